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

var echoBuild struct {
	once sync.Once
	path string
	err  error
}

// EchoBinary builds the echo server (once per process; the go build
// cache makes later builds instant) and returns its path.
func EchoBinary() (string, error) {
	echoBuild.once.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			echoBuild.err = err
			return
		}
		dir := filepath.Join(CacheDir(), "echo")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			echoBuild.err = err
			return
		}
		out := filepath.Join(dir, fmt.Sprintf("echo-basic-%d", os.Getpid()))
		cmd := GoCommand(context.Background(), "build", "-o", out, EchoPackage)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			echoBuild.err = fmt.Errorf("go build %s: %v\n%s", EchoPackage, err, b)
			return
		}
		// One binary per process, renamed into place: concurrent test
		// binaries never run a half-written file.
		final := filepath.Join(dir, "echo-basic")
		if err := os.Rename(out, final); err != nil {
			echoBuild.err = err
			return
		}
		echoBuild.path = final
	})
	return echoBuild.path, echoBuild.err
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
