package testenv

// The backend of traffic tests: the conformance suite's echo server
// (echo-basic), which answers every HTTP request with a JSON description
// of it (path, host, method, headers, and the Pod, Namespace and Service
// names from its environment) and, with GRPC_ECHO_SERVER, TCP_ECHO_SERVER
// or UDP_ECHO_SERVER set, serves the suite's gRPC, TCP or UDP echo. This
// is the one place that says where it comes from: from gateway-api v1.7.0
// on the suite imports sigs.k8s.io/gateway-api-conformance-images, which
// the Go module proxy here does not serve, so go.mod replaces that path
// with the project's own module of the same wire contract
// (test/conformance-images), and this builds its echo-basic.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// EchoPackage is the Go package of the echo server.
const EchoPackage = "sigs.k8s.io/gateway-api-conformance-images/echo-basic"

// EchoBinary builds the echo server (once per process; the go build
// cache makes later builds instant) and returns its path.
func EchoBinary() (string, error) { return buildOnce("echo-basic", EchoPackage) }

// PorticoPackage is Portico's command.
const PorticoPackage = "github.com/portico-dev/portico/cmd/portico"

// PorticoBinary builds `portico` (once per process) and returns its path:
// what the local data plane runs for the proxies' shutdown-manager
// sidecar (image portico-dev/portico).
func PorticoBinary() (string, error) { return buildOnce("portico", PorticoPackage) }

type build struct {
	once sync.Once
	path string
	err  error
}

var builds sync.Map // package → *build

// buildOnce builds pkg into CacheDir()/name/name, once per process.
func buildOnce(name, pkg string) (string, error) {
	v, _ := builds.LoadOrStore(pkg, &build{})
	b := v.(*build)
	b.once.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			b.err = err
			return
		}
		dir := filepath.Join(CacheDir(), name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.err = err
			return
		}
		out := filepath.Join(dir, fmt.Sprintf("%s-%d", name, os.Getpid()))
		cmd := GoCommand(context.Background(), "build", "-o", out, pkg)
		cmd.Dir = root
		if o, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, o)
			return
		}
		// One binary per process, renamed into place: concurrent test
		// binaries never run a half-written file.
		final := filepath.Join(dir, name)
		if err := os.Rename(out, final); err != nil {
			b.err = err
			return
		}
		b.path = final
	})
	return b.path, b.err
}

// RequireEcho is EchoBinary, failing the test on an error.
func RequireEcho(t testing.TB) string {
	t.Helper()
	bin, err := EchoBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}
