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
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/testenv"
)

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
	portico    string // the built portico binary
	outDir     string // _output/faults
	loadStart  string // load average when the suite started
}

func kubeClient() client.Client   { return harness.client }
func restConfig() *rest.Config    { return rest.CopyConfig(harness.cfg) }
func testScheme() *runtime.Scheme { return harness.client.Scheme() }

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
	repo, err := testenv.RepoRoot()
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
	cluster, err := testenv.MainCluster("faults")
	if err != nil {
		fmt.Fprintf(os.Stderr, "faults: %v\n", err)
		return testenv.ExitCode(err)
	}
	defer func() { cluster.Stop(code != 0, filepath.Join(harness.outDir, "cluster-logs")) }()
	harness.kubeconfig = cluster.Kubeconfig
	if dir := filepath.Dir(cluster.Kubeconfig); fileExists(filepath.Join(dir, ".portico-cluster")) {
		harness.clusterDir = dir
	}
	if harness.cfg, harness.client, err = cluster.SetUp(500, 1000, newScheme()); err != nil {
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
		build := testenv.GoCommand(context.Background(), "build", "-o", harness.portico, "./cmd/portico")
		build.Dir = repo
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "faults: building portico: %v\n%s", err, out)
			return 1
		}
		fmt.Fprintf(os.Stderr, "faults: built portico in %s\n", time.Since(start).Round(time.Millisecond))
	} else {
		fmt.Fprintf(os.Stderr, "faults: testing %s (PORTICO_FAULTS_BINARY)\n", harness.portico)
	}
	code = m.Run()
	if err := writeFigures(); err != nil {
		fmt.Fprintf(os.Stderr, "faults: writing figures: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// newScheme is built here rather than taken from internal/provider/kube so
// the suite compiles against any state of Portico's packages.
func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(gwv1.Install(s))
	utilruntime.Must(gwv1beta1.Install(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
