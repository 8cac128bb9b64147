package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/modfile"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/provider/kube"
	"github.com/portico-dev/portico/internal/testenv"
)

// auditPolicy records status writes on Gateways and HTTPRoutes only, so the
// audit log costs the API server next to nothing.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["update", "patch"]
  resources:
  - group: gateway.networking.k8s.io
    resources: ["gateways/status", "httproutes/status"]
- level: None
`

// Cluster is the kwok cluster the suite runs on.
type Cluster struct {
	Repo       string
	Dir        string // hack/cluster-up.sh state; empty for an existing cluster
	Kubeconfig string
	AuditLog   string // empty when the API server was not started by us
	Config     *rest.Config
	Client     client.WithWatch
	Clientset  kubernetes.Interface
	Scheme     *runtime.Scheme
}

// StartCluster runs hack/cluster-up.sh into work/cluster with the audit
// log on; a watchdog stops the cluster if this process dies. With
// kubeconfig set it uses that cluster instead (no audit log).
func StartCluster(ctx context.Context, repo, work, kubeconfig string) (*Cluster, error) {
	c := &Cluster{Repo: repo, Kubeconfig: kubeconfig}
	if kubeconfig == "" {
		c.Dir = filepath.Join(work, "cluster")
		if err := os.MkdirAll(c.Dir, 0o755); err != nil {
			return nil, err
		}
		policy := filepath.Join(work, "audit-policy.yaml")
		if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
			return nil, err
		}
		c.AuditLog = filepath.Join(work, "audit.log")
		var err error
		c.Kubeconfig, err = testenv.ClusterUp(ctx, repo, c.Dir,
			"PORTICO_APISERVER_EXTRA_ARGS=--audit-policy-file="+policy+" --audit-log-path="+c.AuditLog+
				" --audit-log-maxsize=0 --audit-log-format=json")
		if err != nil {
			return nil, err
		}
	}
	c.Scheme = kube.NewScheme()
	utilruntime.Must(v1alpha1.AddToScheme(c.Scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(c.Scheme))
	var err error
	// The suite's own writes must not be throttled client-side.
	if c.Config, c.Client, err = testenv.Connect(c.Kubeconfig, 5000, 10000, c.Scheme); err != nil {
		c.Stop()
		return nil, err
	}
	if c.Clientset, err = kubernetes.NewForConfig(c.Config); err != nil {
		c.Stop()
		return nil, err
	}
	if err := testenv.InstallCRDs(ctx, c.Config, c.Client, repo); err != nil {
		c.Stop()
		return nil, fmt.Errorf("installing CRDs: %w", err)
	}
	return c, nil
}

// Stop stops a cluster we started and removes its state.
func (c *Cluster) Stop() {
	if c.Dir == "" {
		return
	}
	if err := testenv.ClusterDown(c.Repo, c.Dir); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
	}
}

// poll calls cond every interval until it returns true, an error, or
// timeout passes.
func poll(ctx context.Context, timeout, interval time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s", timeout)
		case <-time.After(interval):
		}
	}
}

// productModule is the module path of the repository's own go.mod.
const productModule = "github.com/portico-dev/portico"

// FindRepo is the repository root: the nearest directory at or above the
// working directory whose go.mod is the product's module. The benchmark's
// own module (test/bench/go.mod) is passed over, so the suite finds the
// repository whether it runs from there or from test/bench.
func FindRepo() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modfile.ModulePath(data) == productModule {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s at or above the working directory", productModule)
		}
		dir = parent
	}
}
