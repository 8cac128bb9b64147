// Package faults is Portico's HA fault suite: several `portico controller`
// processes, each talking to kube-apiserver through its own fault proxy
// (test/faults/faultproxy), on a local kwok cluster (hack/cluster-up.sh).
// Each test injects one fault — hung status writes, a partitioned leader, a
// killed leader, an API server restart, a foreign status writer, many
// concurrent writers of one Gateway — asserts that Portico behaves, and
// reports its figures as "FIGURE name=value" log lines and in
// _output/faults/figures.json (docs/reliability.md shows them).
//
// The suite is slow (minutes) and runs only with PORTICO_FAULTS=1, which
// `make test-faults` sets. It starts a cluster in a temporary directory and
// stops it at the end; with PORTICO_KUBECONFIG set it uses that cluster
// instead (the API server restart test then needs the kubeconfig to live in
// a hack/cluster-up.sh directory). PORTICO_FAULTS_BINARY tests a given
// portico binary instead of building ./cmd/portico. Without the kube binaries
// (hack/kube-binaries.sh) it skips, or fails with CI=true.
package faults

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

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/portico-dev/portico/api/v1alpha1"
)

// k8sVersionDir is the cache directory hack/kube-binaries.sh builds into.
const k8sVersionDir = "k8s-v1.37.2"

// Leader-election timing of every replica (short, so faults play out in
// seconds).
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = 500 * time.Millisecond
)

var harness struct {
	repo       string
	kubeconfig string
	clusterDir string // hack/cluster-up.sh directory; "" if unknown
	cfg        *rest.Config
	client     client.Client
	scheme     *runtime.Scheme
	portico    string // the built portico binary
	outDir     string // _output/faults
	loadStart  string // load average when the suite started
}

func kubeClient() client.Client   { return harness.client }
func restConfig() *rest.Config    { return rest.CopyConfig(harness.cfg) }
func testScheme() *runtime.Scheme { return harness.scheme }

// ctxT is a context cancelled when the test ends.
func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it returns nil and returns how long that
// took, failing the test with what and cond's last error after timeout.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	d, err := poll(timeout, cond)
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
	}
	return d
}

// poll is eventually without failing: it returns cond's last error on
// timeout.
func poll(timeout time.Duration, cond func() error) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	interval := 20 * time.Millisecond
	for {
		err := cond()
		if err == nil {
			return time.Since(start), nil
		}
		if time.Now().After(deadline) {
			return time.Since(start), err
		}
		time.Sleep(interval)
		if interval < 100*time.Millisecond {
			interval *= 2
		}
	}
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) (code int) {
	flag.Parse()
	repo, err := findRepoRoot()
	if err != nil {
		fmt.Fprintf(os.Stderr, "faults: %v\n", err)
		return 1
	}
	harness.repo = repo
	harness.outDir = filepath.Join(repo, "_output", "faults")
	if os.Getenv("PORTICO_FAULTS") != "1" {
		fmt.Fprintln(os.Stderr, "faults: SKIP: the fault suite runs with PORTICO_FAULTS=1 (make test-faults)")
		return 0
	}
	if testing.Short() {
		fmt.Fprintln(os.Stderr, "faults: SKIP: -short")
		return 0
	}
	_ = os.RemoveAll(filepath.Join(harness.outDir, "cluster-logs")) // of an earlier failed run
	harness.loadStart = loadAverage()
	kubeconfig := os.Getenv("PORTICO_KUBECONFIG")
	if kubeconfig == "" {
		bins, err := kubeBinaries()
		if err != nil {
			if os.Getenv("CI") == "true" {
				fmt.Fprintf(os.Stderr, "faults: %v (CI=true: failing instead of skipping)\n", err)
				return 1
			}
			fmt.Fprintf(os.Stderr, "faults: SKIP: %v (run hack/kube-binaries.sh)\n", err)
			return 0
		}
		dir, err := os.MkdirTemp("", "portico-faults-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "faults: %v\n", err)
			return 1
		}
		defer os.RemoveAll(dir)
		kubeconfig, err = clusterUp(repo, dir, bins)
		if err != nil {
			fmt.Fprintf(os.Stderr, "faults: %v\n", err)
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
	if dir := filepath.Dir(kubeconfig); fileExists(filepath.Join(dir, ".portico-cluster")) {
		harness.clusterDir = dir
	}
	if err := connect(kubeconfig); err != nil {
		fmt.Fprintf(os.Stderr, "faults: %v\n", err)
		return 1
	}
	bin, err := os.MkdirTemp("", "portico-faults-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "faults: %v\n", err)
		return 1
	}
	defer os.RemoveAll(bin)
	start := time.Now()
	if harness.portico = os.Getenv("PORTICO_FAULTS_BINARY"); harness.portico == "" {
		harness.portico = filepath.Join(bin, "portico")
		build := exec.Command("go", "build", "-o", harness.portico, "./cmd/portico")
		build.Dir = repo
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "faults: building portico: %v\n%s", err, out)
			return 1
		}
		fmt.Fprintf(os.Stderr, "faults: built portico in %s\n", time.Since(start).Round(time.Millisecond))
	} else {
		fmt.Fprintf(os.Stderr, "faults: testing %s (PORTICO_FAULTS_BINARY)\n", harness.portico)
	}
	start = time.Now()
	if err := installCRDs(repo); err != nil {
		fmt.Fprintf(os.Stderr, "faults: installing CRDs: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "faults: CRDs established in %s\n", time.Since(start).Round(time.Millisecond))
	code = m.Run()
	if err := writeFigures(); err != nil {
		fmt.Fprintf(os.Stderr, "faults: writing figures: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// findRepoRoot walks up from the test's directory to go.mod.
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if fileExists(filepath.Join(dir, "go.mod")) {
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
	if !fileExists(filepath.Join(dir, "kwok-stages", "pod-ready.yaml")) {
		missing = append(missing, "kwok-stages")
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("%s missing in %s", strings.Join(missing, ", "), dir)
	}
	return dir, nil
}

// clusterUp runs hack/cluster-up.sh into dir. Its watchdog stops the
// cluster if this process dies without cleaning up.
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
	fmt.Fprintf(os.Stderr, "faults: cluster up in %s (%s)\n", time.Since(start).Round(time.Millisecond), kubeconfig)
	return kubeconfig, nil
}

func clusterDown(repo, dir string) {
	start := time.Now()
	cmd := exec.Command(filepath.Join(repo, "hack", "cluster-down.sh"), dir)
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "faults: hack/cluster-down.sh: %v\n%s", err, out)
		return
	}
	fmt.Fprintf(os.Stderr, "faults: cluster down in %s\n", time.Since(start).Round(time.Millisecond))
}

// saveLogs copies the cluster components' logs of a failed run to
// _output/faults/cluster-logs.
func saveLogs(dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	dest := filepath.Join(harness.outDir, "cluster-logs")
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return
	}
	for _, l := range logs {
		if data, err := os.ReadFile(l); err == nil {
			_ = os.WriteFile(filepath.Join(dest, filepath.Base(l)), data, 0o644)
		}
	}
	fmt.Fprintf(os.Stderr, "faults: cluster logs saved in %s\n", dest)
}

func connect(kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	// The scheme is built here rather than taken from internal/provider/kube
	// so the suite compiles against any state of Portico's packages.
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(gwv1.Install(s))
	utilruntime.Must(gwv1beta1.Install(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	harness.cfg, harness.client, harness.scheme = cfg, c, s
	return nil
}

// installCRDs installs the Gateway API standard CRDs of the pinned module
// and Portico's CRDs, and waits until all are Established.
func installCRDs(repo string) error {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api")
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("locating sigs.k8s.io/gateway-api: %w", err)
	}
	gwDir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard")
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
