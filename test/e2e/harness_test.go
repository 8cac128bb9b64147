// Package e2e runs Portico against a real, if small, Kubernetes cluster:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
// (fake Nodes whose Pods become Running and Ready), started on loopback by
// hack/cluster-up.sh. Deployments turn into scheduled Pods and Services get
// EndpointSlices, as in a real cluster, but no container ever runs.
//
// TestMain starts a cluster in a temporary directory and stops it at the
// end; with PORTICO_KUBECONFIG set it uses that cluster instead (e.g. one
// started by `make cluster-up`, kept between runs). It installs the Gateway
// API v1.6.3 standard CRDs and Portico's CRDs. Without the binaries
// (hack/kube-binaries.sh) the tests skip locally and fail in CI (CI=true);
// with -short they skip.
//
// Helpers for tests: kubeClient, restConfig, kubeconfigPath, repoRoot,
// ctxT, eventually, newNamespace.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/provider/kube"
)

// k8sVersionDir is the cache directory hack/kube-binaries.sh builds into.
const k8sVersionDir = "k8s-v1.37.2"

// harness is set up once by TestMain; tests use the accessors below.
var harness struct {
	repo       string
	kubeconfig string
	cfg        *rest.Config
	client     client.Client
	scheme     *runtime.Scheme
}

// kubeClient is an uncached client for the e2e cluster, with the core,
// apps, Gateway API, Portico and apiextensions kinds in its scheme.
func kubeClient() client.Client { return harness.client }

// restConfig is a copy of the cluster-admin REST config of the e2e cluster.
func restConfig() *rest.Config { return rest.CopyConfig(harness.cfg) }

// kubeconfigPath is the cluster-admin kubeconfig file of the e2e cluster
// (for processes a test starts, e.g. `portico controller --kubeconfig`).
func kubeconfigPath() string { return harness.kubeconfig }

// repoRoot is the repository's top directory.
func repoRoot() string { return harness.repo }

// testScheme is the scheme kubeClient uses.
func testScheme() *runtime.Scheme { return harness.scheme }

// ctxT is a context cancelled when the test ends.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it returns nil, failing the test with what
// and cond's last error once timeout has passed. cond's error should say
// what it saw ("1/2 pods ready"), which is what a failure reports.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	interval := 50 * time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(interval)
		if interval < 500*time.Millisecond {
			interval *= 2
		}
	}
}

// newNamespace creates a fresh namespace (deleted when the test ends) and
// waits for its default ServiceAccount, so Pods can be created in it.
func newNamespace(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	c := kubeClient()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "e2e-",
		Labels:       map[string]string{"portico.dev/e2e": "true"},
	}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	eventually(t, 30*time.Second, "the default ServiceAccount of namespace "+ns.Name, func() error {
		return c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "default"}, &corev1.ServiceAccount{})
	})
	return ns.Name
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	flag.Parse()
	repo, err := findRepoRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	harness.repo = repo

	if testing.Short() {
		fmt.Fprintln(os.Stderr, "e2e: SKIP: -short")
		return 0
	}
	kubeconfig := os.Getenv("PORTICO_KUBECONFIG")
	if kubeconfig == "" {
		bins, err := kubeBinaries()
		if err != nil {
			if os.Getenv("CI") == "true" {
				fmt.Fprintf(os.Stderr, "e2e: %v (CI=true: failing instead of skipping)\n", err)
				return 1
			}
			fmt.Fprintf(os.Stderr, "e2e: SKIP: %v (run hack/kube-binaries.sh)\n", err)
			return 0
		}
		dir, err := os.MkdirTemp("", "portico-e2e-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			return 1
		}
		defer os.RemoveAll(dir)
		kubeconfig, err = clusterUp(repo, dir, bins)
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
			return 1
		}
		defer func() {
			if code != 0 {
				saveLogs(dir)
			}
			clusterDown(repo, dir)
		}()
	}
	harness.kubeconfig = kubeconfig

	if err := connect(kubeconfig); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	start := time.Now()
	if err := installCRDs(repo); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: installing CRDs: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: CRDs established in %s\n", time.Since(start).Round(time.Millisecond))
	return m.Run()
}

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

// clusterUp runs hack/cluster-up.sh into dir. A watchdog started by the
// script stops the cluster if this process dies without cleaning up (test
// timeout, SIGKILL).
func clusterUp(repo, dir, bins string) (string, error) {
	start := time.Now()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(repo, "hack", "cluster-up.sh"), dir)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(),
		"PORTICO_KUBE_BINARIES="+bins,
		fmt.Sprintf("PORTICO_CLUSTER_OWNER_PID=%d", os.Getpid()),
	)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/cluster-up.sh: %v\n%s", err, stderr.String())
	}
	kubeconfig := strings.TrimSpace(stdout.String())
	fmt.Fprintf(os.Stderr, "e2e: cluster up in %s (%s)\n", time.Since(start).Round(time.Millisecond), kubeconfig)
	return kubeconfig, nil
}

func clusterDown(repo, dir string) {
	start := time.Now()
	cmd := exec.Command(filepath.Join(repo, "hack", "cluster-down.sh"), dir)
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: hack/cluster-down.sh: %v\n%s", err, out)
		return
	}
	fmt.Fprintf(os.Stderr, "e2e: cluster down in %s\n", time.Since(start).Round(time.Millisecond))
}

// saveLogs keeps the components' logs of a failed run: copied to
// $PORTICO_E2E_ARTIFACTS if set, else their last lines go to stderr.
func saveLogs(dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	dest := os.Getenv("PORTICO_E2E_ARTIFACTS")
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
		fmt.Fprintf(os.Stderr, "----- last lines of %s -----\n%s\n", filepath.Base(l), strings.Join(lines, "\n"))
	}
	if dest != "" {
		fmt.Fprintf(os.Stderr, "e2e: cluster logs saved in %s\n", dest)
	}
}

func connect(kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	s := kube.NewScheme()
	utilruntime.Must(v1alpha1.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	harness.cfg, harness.client, harness.scheme = cfg, c, s
	return nil
}

// installCRDs installs (or updates) the Gateway API standard CRDs of the
// pinned module and Portico's CRDs, and waits until all are Established.
func installCRDs(repo string) error {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api")
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("locating sigs.k8s.io/gateway-api: %w", err)
	}
	gwDir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard")
	// envtest reads only CustomResourceDefinition documents (the
	// ValidatingAdmissionPolicy in the standard directory is skipped).
	crds, err := envtest.InstallCRDs(harness.cfg, envtest.CRDInstallOptions{
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
			err := harness.client.Get(ctx, client.ObjectKey{Name: crd.Name}, &got)
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
