package dataplane

// Envoy containers run through testenv.LaunchEnvoy, the helper every
// Envoy test uses (admin address file, log file, process group, stop);
// they come and go with their Pods.

import (
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/portico-dev/portico/internal/testenv"
)

// EnvoyRuntime runs Portico's proxy containers: image repository
// envoyproxy/envoy, any tag.
type EnvoyRuntime struct {
	// Binary is an Envoy every user can execute (see New: the data
	// plane installs testenv.EnvoyBinary where the proxies' user can
	// run it).
	Binary string
}

func (r *EnvoyRuntime) Name() string { return "envoy" }
func (r *EnvoyRuntime) Handles(image string) bool {
	return imageRepository(image) == "envoyproxy/envoy"
}

// DefaultUser: the distroless Envoy images run as nonroot.
func (r *EnvoyRuntime) DefaultUser(string) int64 { return 65532 }

// Start runs Envoy with the container's arguments. The configuration
// path (--config-path, -c) and the log level are passed as
// testenv.EnvoyOptions, which adds its own log, admin-address and
// hot-restart flags.
func (r *EnvoyRuntime) Start(c *Container, sb *Sandbox) (Process, error) {
	if len(c.Command) > 0 && path.Base(c.Command[0]) != "envoy" {
		return nil, fmt.Errorf("envoy: command %v is not envoy", c.Command)
	}
	args := append([]string(nil), c.Args...)
	if len(c.Command) > 1 {
		args = append(append([]string(nil), c.Command[1:]...), args...)
	}
	var cfg string
	var rest []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case (a == "--config-path" || a == "-c") && i+1 < len(args):
			cfg = args[i+1]
			i++
		case (a == "--log-level" || a == "-l") && i+1 < len(args):
			i++ // testenv.StartEnvoy sets the log level
		default:
			rest = append(rest, a)
		}
	}
	if cfg == "" {
		return nil, fmt.Errorf("envoy: no --config-path in %v", args)
	}
	wrap, err := sb.Wrap(c, r.Binary)
	if err != nil {
		return nil, err
	}
	e, err := testenv.LaunchEnvoy(testenv.EnvoyOptions{
		Binary: r.Binary, ConfigPath: cfg, Args: rest, Wrap: wrap, Env: c.Env, Dial: sb.Netns.DialContext,
		Stdout: sb.Stdout, Stderr: sb.Stderr,
	})
	if err != nil {
		return nil, err
	}
	return &envoyProcess{e: e, name: c.Pod.Namespace + "/" + c.Pod.Name + "/" + c.Spec.Name, logf: sb.Logf}, nil
}

type envoyProcess struct {
	e    *testenv.Envoy
	name string
	logf func(format string, args ...any)
	once sync.Once
}

func (p *envoyProcess) Exited() <-chan struct{} { return p.e.Exited() }

func (p *envoyProcess) Stop() {
	p.once.Do(func() {
		select {
		case <-p.e.Exited():
			// It died: the end of its log says why.
			p.logf("%s: envoy exited (%v); its log ends:\n%s", p.name, p.e.ExitErr(), p.Tail())
		default:
		}
		_ = p.e.Stop()
		_ = p.e.Close()
	})
}

// Terminate: Envoy gets SIGTERM (it exits at once: a graceful drain is
// its preStop hook's business) and is killed after grace.
func (p *envoyProcess) Terminate(grace time.Duration) {
	p.once.Do(func() {
		_ = p.e.Terminate(grace)
		_ = p.e.Close()
	})
}

func (p *envoyProcess) Tail() string {
	return lastLines(p.e.Log(), 30) + "\n" + lastLines(p.e.Output(), 10)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
