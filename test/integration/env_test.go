// Package integration runs Portico's controller against a real
// kube-apiserver and etcd (controller-runtime envtest), with the Gateway API
// v1.7.0 experimental-channel CRDs (testenv.GatewayAPICRDs) installed from
// the module.
//
// The binaries come from hack/kube-binaries.sh (KUBEBUILDER_ASSETS, or its
// cache directory). Without them the tests skip locally and fail in CI
// (CI=true): integration tests must never silently skip there.
package integration

import (
	"context"
	"fmt"
	"github.com/portico-dev/portico/internal/testenv"
	"io"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/portico-dev/portico/internal/provider/kube"
)

var (
	env     *envtest.Environment
	restCfg *rest.Config
	k8s     client.Client
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// client-go's leader election logs through klog; the replicas' own
	// logs go to the test log.
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	assets, err := testenv.BinaryDir()
	if err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "integration: %v (CI=true: failing instead of skipping)\n", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "integration: SKIP: %v (run hack/kube-binaries.sh)\n", err)
		return 0
	}
	crds, err := testenv.GatewayAPICRDs()
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration: %v\n", err)
		return 1
	}
	env = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		// Gateway API and Portico's own CRDs (go test runs in this
		// package's directory).
		CRDDirectoryPaths:     []string{crds, filepath.Join("..", "..", "config", "crd")},
		ErrorIfCRDPathMissing: true,
	}
	restCfg, err = env.Start()
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration: starting kube-apiserver and etcd: %v\n", err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	k8s, err = client.New(restCfg, client.Options{Scheme: kube.NewScheme()})
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration: client: %v\n", err)
		return 1
	}
	return m.Run()
}

// ctxT is a context cancelled when the test ends.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx
}
