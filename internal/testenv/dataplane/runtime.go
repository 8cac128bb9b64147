package dataplane

// The seam between the data plane and what it runs: a Runtime knows some
// images and starts their containers as processes in a Pod's sandbox.
// Envoy (Portico's proxies) and EchoBasic (the conformance suite's
// backend) are the two the conformance run uses; a backend that moves to
// another module or image is another Runtime.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/portico-dev/portico/internal/testenv"
)

// Runtime runs the containers of the images it handles.
type Runtime interface {
	// Name names the runtime in messages.
	Name() string
	// Handles reports whether it runs image.
	Handles(image string) bool
	// DefaultUser is the user image runs as when neither the container
	// nor the Pod sets runAsUser (the image's USER).
	DefaultUser(image string) int64
	// Start starts the container in sb.
	Start(c *Container, sb *Sandbox) (Process, error)
}

// Process is a running container.
type Process interface {
	// Exited is closed when the process has exited.
	Exited() <-chan struct{}
	// Stop stops it (SIGTERM, then SIGKILL) and waits for it.
	Stop()
	// Terminate sends SIGTERM and waits for it to exit, at most grace,
	// then kills it (a Pod's termination).
	Terminate(grace time.Duration)
	// Tail is the end of its output, for messages.
	Tail() string
}

// Sandbox is where a container runs: its Pod's network namespace, a
// directory of its own, and its log.
type Sandbox struct {
	Netns *testenv.Netns
	// Dir is the container's directory (volumes, scripts).
	Dir string
	// Stdout and Stderr write to the container's log (kubelet-style,
	// read back through the API server).
	Stdout, Stderr io.Writer
	// Logf reports what happens to the container.
	Logf func(format string, args ...any)
}

// Wrap is how a command line becomes the container's: its volumes mounted
// and its user set (testenv.Container.Prepare) inside the Pod's network
// namespace. bin, if set, replaces argv[0] (a copy of a binary that the
// container's user can execute).
func (sb *Sandbox) Wrap(c *Container, bin string) (func(argv []string) []string, error) {
	inner, err := c.Process.Prepare(sb.Dir)
	if err != nil {
		return nil, err
	}
	return func(argv []string) []string {
		argv = append([]string(nil), argv...)
		if bin != "" {
			argv[0] = bin
		}
		return sb.Netns.Wrap(inner(argv))
	}, nil
}

// imageRepository is image without its registry host, tag and digest:
// "envoyproxy/envoy" for docker.io/envoyproxy/envoy:v1.36.2.
func imageRepository(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		image = image[:i]
	}
	if first, rest, ok := strings.Cut(image, "/"); ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		image = rest
	}
	return image
}

// ExecRuntime runs images whose repository is one of Repositories with Binary as
// their entrypoint (the container's command, if any, replaces it only
// when it names another program). Its output goes to the container's log.
type ExecRuntime struct {
	RuntimeName  string
	Repositories []string
	Binary       string
	User         int64
}

// EchoBasic runs the conformance suite's echo-basic image
// (registry.k8s.io/gateway-api/conformance/echo-basic, any tag; before
// v1.7.0 registry.k8s.io/gateway-api/echo-basic) from bin
// (testenv.EchoBinary). The image runs as nonroot (65532).
func EchoBasic(bin string) *ExecRuntime {
	return &ExecRuntime{RuntimeName: "echo-basic", Repositories: []string{"gateway-api/conformance/echo-basic", "gateway-api/echo-basic"}, Binary: bin, User: 65532}
}

// Portico runs Portico's image (ghcr.io/portico-dev/portico, any tag)
// from bin (testenv.PorticoBinary): the proxies' shutdown-manager sidecar,
// `portico proxy-agent`. The image runs as nonroot (65532).
func Portico(bin string) *ExecRuntime {
	return &ExecRuntime{RuntimeName: "portico", Repositories: []string{"portico-dev/portico"}, Binary: bin, User: 65532}
}

func (r *ExecRuntime) Name() string { return r.RuntimeName }
func (r *ExecRuntime) Handles(image string) bool {
	return slices.Contains(r.Repositories, imageRepository(image))
}
func (r *ExecRuntime) DefaultUser(image string) int64 { return r.User }

func (r *ExecRuntime) Start(c *Container, sb *Sandbox) (Process, error) {
	if len(c.Command) > 0 && path.Base(c.Command[0]) != path.Base(r.Binary) {
		return nil, fmt.Errorf("%s: command %v is not the image's entrypoint", r.RuntimeName, c.Command)
	}
	argv := append([]string{r.Binary}, c.Args...)
	if len(c.Command) > 1 {
		argv = append(append([]string{r.Binary}, c.Command[1:]...), c.Args...)
	}
	wrap, err := sb.Wrap(c, "")
	if err != nil {
		return nil, err
	}
	argv = wrap(argv)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(baseEnv(), c.Env...)
	tail := &tailBuffer{max: 4096}
	cmd.Stdout = io.MultiWriter(sb.Stdout, tail)
	cmd.Stderr = io.MultiWriter(sb.Stderr, tail)
	proc, err := testenv.LaunchCommand(c.Spec.Name, cmd)
	if err != nil {
		return nil, err
	}
	return &execProcess{Process: proc, tail: tail}, nil
}

// baseEnv is what a container's environment starts from: PATH and HOME,
// not the test's environment.
func baseEnv() []string {
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/"}
}

type execProcess struct {
	*testenv.Process
	tail *tailBuffer
}

func (p *execProcess) Stop() { _ = p.Process.Stop() }

func (p *execProcess) Terminate(grace time.Duration) { _ = p.Process.Terminate(grace) }

func (p *execProcess) Tail() string {
	s := p.tail.String()
	select {
	case <-p.Exited():
		s += fmt.Sprintf("\n(exited: %v)", p.ExitErr())
	default:
	}
	return s
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// installBinary makes src executable by any user at dir/name: a hard link
// where possible, else a copy. (The binaries hack/envoy.sh installs live
// under a home directory other users cannot enter.)
func installBinary(src, dir, name string) (string, error) {
	src, err := filepath.EvalSymlinks(src)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, name)
	if err := os.Link(src, dst); err == nil {
		if st, err := os.Stat(dst); err == nil && st.Mode()&0o005 == 0o005 {
			return dst, nil
		}
		_ = os.Remove(dst)
	}
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, bufio.NewReaderSize(in, 1<<20)); err != nil {
		out.Close()
		return "", err
	}
	return dst, out.Close()
}
