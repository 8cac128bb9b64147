package testenv

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// StartAPIServer starts a real kube-apiserver and etcd (envtest) with the
// Gateway API standard CRDs and Portico's, stopped when the test ends. It
// returns the REST config and the path of a kubeconfig file for it. Without
// the binaries (hack/kube-binaries.sh) it skips, or fails with CI=true.
func StartAPIServer(t testing.TB) (*rest.Config, string) {
	t.Helper()
	assets, err := BinaryDir()
	if err != nil {
		if InCI() {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skipf("no kube-apiserver: %v (run hack/kube-binaries.sh)", err)
	}
	crds, err := GatewayAPICRDs()
	if err != nil {
		t.Fatal(err)
	}
	own, err := PorticoCRDs()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, CRDDirectoryPaths: []string{crds, own}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg, kubeconfig
}
