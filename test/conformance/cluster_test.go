package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The local cluster, as in test/e2e: hack/cluster-up.sh starts etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok (fake
// Nodes whose Pods become Running and Ready) on loopback.

// k8sVersionDir is the cache directory hack/kube-binaries.sh builds into.
const k8sVersionDir = "k8s-v1.37.2"

// findRepoRoot walks up from the test's directory to go.mod.
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// kubeBinaries finds the directory with everything hack/cluster-up.sh
// runs, without building anything.
func kubeBinaries() (string, error) {
	dir := os.Getenv("PORTICO_KUBE_BINARIES")
	if dir == "" {
		cache := os.Getenv("PORTICO_CACHE")
		if cache == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", err
			}
			cache = filepath.Join(home, ".cache", "portico")
		}
		dir = filepath.Join(cache, k8sVersionDir)
	}
	var missing []string
	for _, b := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"} {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "kwok-stages", "pod-ready.yaml")); err != nil {
		missing = append(missing, "kwok-stages")
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%s missing in %s", strings.Join(missing, ", "), dir)
	}
	return dir, nil
}

// startCluster runs hack/cluster-up.sh into a temporary directory and
// stops the cluster when the test ends (keeping the components' logs of a
// failed run). A watchdog started by the script stops the cluster if this
// process dies without cleaning up.
func startCluster(t *testing.T, repo, bins string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "portico-conformance-")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(repo, "hack", "cluster-up.sh"), dir)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(),
		"PORTICO_KUBE_BINARIES="+bins,
		fmt.Sprintf("PORTICO_CLUSTER_OWNER_PID=%d", os.Getpid()),
	)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t.Cleanup(func() {
		if t.Failed() {
			saveClusterLogs(t, dir)
		}
		down := exec.Command(filepath.Join(repo, "hack", "cluster-down.sh"), dir)
		down.Dir = repo
		if out, err := down.CombinedOutput(); err != nil {
			t.Logf("hack/cluster-down.sh: %v\n%s", err, out)
		}
		_ = os.RemoveAll(dir)
	})
	if err := cmd.Run(); err != nil {
		t.Fatalf("hack/cluster-up.sh: %v\n%s", err, stderr.String())
	}
	kubeconfig := strings.TrimSpace(stdout.String())
	t.Logf("kwok cluster up in %s (%s)", time.Since(start).Round(time.Millisecond), kubeconfig)
	return kubeconfig
}

// saveClusterLogs copies the components' logs to
// $PORTICO_CONFORMANCE_ARTIFACTS if set, else logs their last lines.
func saveClusterLogs(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	dest := os.Getenv("PORTICO_CONFORMANCE_ARTIFACTS")
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		if dest != "" {
			if err := os.MkdirAll(dest, 0o755); err == nil {
				_ = os.WriteFile(filepath.Join(dest, filepath.Base(l)), data, 0o644)
			}
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 20 {
			lines = lines[len(lines)-20:]
		}
		t.Logf("----- last lines of %s -----\n%s", filepath.Base(l), strings.Join(lines, "\n"))
	}
}

// installCRDs installs (or updates) the Gateway API standard CRDs of the
// pinned module and Portico's CRDs, and waits until all are Established.
func installCRDs(cfg *rest.Config, c client.Client, repo string) error {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api")
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("locating sigs.k8s.io/gateway-api: %w", err)
	}
	gwDir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard")
	// envtest reads only CustomResourceDefinition documents (the
	// ValidatingAdmissionPolicy in the standard directory is skipped).
	crds, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths:              []string{gwDir, filepath.Join(repo, "config", "crd")},
		ErrorIfPathMissing: true,
		MaxTime:            60 * time.Second,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, crd := range crds {
		for {
			var got apiextensionsv1.CustomResourceDefinition
			err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, &got)
			if err == nil && crdEstablished(&got) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CRD %s not Established (last error: %v)", crd.Name, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
