package envoy

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/testenv"
)

// TestDemo runs `make demo`'s script (hack/demo.sh) with DEMO_CHECK=1 in
// an isolated network namespace: standalone Portico, an Envoy booted
// from `portico bootstrap`, echo backends, and the README's requests
// answered from the backends.
func TestDemo(t *testing.T) {
	testenv.RequireEnvoy(t)
	testenv.RequireNetns(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ns := isolatedNamespace(t)
	cmd := exec.Command("timeout", "--kill-after=5s", "180s", "ip", "netns", "exec", ns.Name, filepath.Join(root, "hack", "demo.sh"))
	cmd.Dir = root
	cmd.Env = append(cmd.Environ(), "DEMO_CHECK=1")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/demo.sh: %v after %s\n%s", err, time.Since(start).Round(time.Millisecond), out)
	}
	t.Logf("%s", out)
}
