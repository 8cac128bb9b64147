// Package e2e runs Portico against a real, if small, Kubernetes cluster:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
// (fake Nodes whose Pods become Running and Ready), started on loopback by
// hack/cluster-up.sh. Deployments turn into scheduled Pods and Services get
// EndpointSlices, as in a real cluster, but no container ever runs.
//
// TestMain starts a cluster in a temporary directory and stops it at the
// end (internal/testenv's MainCluster; the components' logs of a failed
// run go to $PORTICO_E2E_ARTIFACTS if set, else their last lines to
// stderr); with PORTICO_KUBECONFIG set it uses that cluster instead (e.g.
// one started by `make cluster-up`, kept between runs). It installs the
// Gateway API v1.7.0 experimental-channel CRDs and Portico's CRDs. Without the binaries
// (hack/kube-binaries.sh) the tests skip locally and fail in CI (CI=true);
// with -short they skip.
//
// Helpers for tests: kubeClient, restConfig, kubeconfigPath, repoRoot,
// ctxT, eventually, newNamespace.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/provider/kube"
	"github.com/portico-dev/portico/internal/testenv"
)

// harness is set up once by TestMain; tests use the accessors below.
var harness struct {
	repo       string
	kubeconfig string
	cfg        *rest.Config
	client     client.Client
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
func testScheme() *runtime.Scheme { return harness.client.Scheme() }

// newScheme has the core, apps, Gateway API, Portico and apiextensions
// kinds.
func newScheme() *runtime.Scheme {
	s := kube.NewScheme()
	utilruntime.Must(v1alpha1.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	return s
}

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
	if testing.Short() {
		fmt.Fprintln(os.Stderr, "e2e: SKIP: -short")
		return 0
	}
	cluster, err := testenv.MainCluster("e2e")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return testenv.ExitCode(err)
	}
	defer func() { cluster.Stop(code != 0, os.Getenv("PORTICO_E2E_ARTIFACTS")) }()
	harness.repo, harness.kubeconfig = cluster.Repo, cluster.Kubeconfig
	if harness.cfg, harness.client, err = cluster.SetUp(100, 200, newScheme()); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	return m.Run()
}
