package certstore_test

// The Manager and ServingSource tests run against a real kube-apiserver and
// etcd (controller-runtime envtest), found like test/integration does:
// KUBEBUILDER_ASSETS or hack/kube-binaries.sh's cache. Without them those
// tests skip locally and fail in CI (CI=true); the unit tests always run.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"github.com/portico-dev/portico/internal/testenv"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

const waitTimeout = 20 * time.Second

var (
	restCfg *rest.Config
	k8s     client.Client
	envErr  error // why restCfg is nil
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	assets, err := testenv.BinaryDir()
	if err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "pki: %v (CI=true: failing instead of skipping)\n", err)
			return 1
		}
		envErr = err
		return m.Run()
	}
	crds, err := testenv.GatewayAPICRDs()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pki: %v\n", err)
		return 1
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{crds},
		ErrorIfCRDPathMissing: true,
	}
	restCfg, err = env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pki: starting kube-apiserver and etcd: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	k8s, err = client.New(restCfg, client.Options{Scheme: scheme()})
	if err != nil {
		fmt.Fprintf(os.Stderr, "pki: client: %v\n", err)
		return 1
	}
	return m.Run()
}

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(gwv1.Install(s))
	return s
}

// needEnv skips t without an API server.
func needEnv(t *testing.T) {
	t.Helper()
	if restCfg == nil {
		t.Skipf("no kube-apiserver: %v (run hack/kube-binaries.sh)", envErr)
	}
}

// newNamespace creates a namespace of its own for t.
func newNamespace(t *testing.T, ctx context.Context) string {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	ns := "pki-" + hex.EncodeToString(b)
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}

// clock is a settable clock for the Manager.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Now().Truncate(time.Second)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// eventually polls cond until it holds or waitTimeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
