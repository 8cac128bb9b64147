// Package testenv locates what Portico's tests against real Kubernetes
// binaries need: the binaries hack/kube-binaries.sh builds, the Gateway API
// CRDs of the pinned module, and the repository root; and it starts and
// stops the local kwok cluster of the suites under test/ and installs the
// CRDs into it (cluster.go). It also runs the real data-plane pieces of
// traffic tests: Envoy from hack/envoy.sh (envoy.go), the echo backend
// (echo.go), processes that stop with their test (process.go), network
// namespaces on a bridge with no route out (netns.go), a Pod's container
// as a kubelet would lay it out and start it (pod.go), and forwarders from
// a bridge address to loopback (forward.go). It is used by tests and the
// benchmark suite only.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
)

// K8sVersionDir is the cache subdirectory hack/kube-binaries.sh builds into.
const K8sVersionDir = "k8s-v1.37.2"

// CacheDir is $PORTICO_CACHE or $HOME/.cache/portico.
func CacheDir() string {
	if c := os.Getenv("PORTICO_CACHE"); c != "" {
		return c
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".cache", "portico")
	}
	return ""
}

// BinaryDir returns the first of $KUBEBUILDER_ASSETS and the cache that
// holds every named executable (default: kube-apiserver and etcd).
func BinaryDir(names ...string) (string, error) {
	if len(names) == 0 {
		names = []string{"kube-apiserver", "etcd"}
	}
	dirs := []string{os.Getenv("KUBEBUILDER_ASSETS"), filepath.Join(CacheDir(), K8sVersionDir)}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		ok := true
		for _, b := range names {
			if st, err := os.Stat(filepath.Join(d, b)); err != nil || st.Mode()&0o111 == 0 {
				ok = false
			}
		}
		if ok {
			return d, nil
		}
	}
	return "", fmt.Errorf("%s not found in KUBEBUILDER_ASSETS or %s (run hack/kube-binaries.sh)",
		strings.Join(names, ", "), dirs[1])
}

// GatewayAPICRDs is the experimental-channel CRD directory of the pinned
// sigs.k8s.io/gateway-api module. Portico's tests and its conformance run
// use the experimental channel, a superset of the standard one: Portico
// claims features whose fields only it has (listener filters,
// ClusterTrustBundle references, address routability), and the
// standard-channel CRDs would prune them.
func GatewayAPICRDs() (string, error) { return gatewayAPICRDs("") }

// gatewayAPICRDs is GatewayAPICRDs with `go list` run in dir ("": the
// working directory).
func gatewayAPICRDs(dir string) (string, error) {
	cmd := GoCommand(context.Background(), "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating sigs.k8s.io/gateway-api: %w", err)
	}
	crds := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "experimental")
	if _, err := os.Stat(crds); err != nil {
		return "", err
	}
	return crds, nil
}

// porticoModule is the path of the root module.
const porticoModule = "github.com/portico-dev/portico"

// RepoRoot is the directory of Portico's go.mod above the working
// directory (a test of a nested module, such as test/bench, finds the
// root too).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		// Nested modules (test/bench, images) have go.mods of their own:
		// the root is the one declaring Portico's module.
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modfile.ModulePath(data) == porticoModule {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("the go.mod of " + porticoModule + " is not above the working directory")
		}
		dir = parent
	}
}

// PorticoCRDs is the directory of Portico's own CRDs.
func PorticoCRDs() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "config", "crd"), nil
}

// InCI reports whether the tests run in CI (CI=true), where missing
// binaries are a failure, never a skip.
func InCI() bool { return os.Getenv("CI") == "true" }
