package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/provider/kube"
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
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, filepath.Join(repo, "hack", "cluster-up.sh"), c.Dir)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(),
			fmt.Sprintf("PORTICO_CLUSTER_OWNER_PID=%d", os.Getpid()),
			"PORTICO_APISERVER_EXTRA_ARGS=--audit-policy-file="+policy+" --audit-log-path="+c.AuditLog+
				" --audit-log-maxsize=0 --audit-log-format=json",
		)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("hack/cluster-up.sh: %v\n%s", err, stderr.String())
		}
		c.Kubeconfig = strings.TrimSpace(stdout.String())
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("loading %s: %w", c.Kubeconfig, err)
	}
	// The suite's own writes must not be throttled client-side.
	cfg.QPS, cfg.Burst = 5000, 10000
	c.Config = cfg
	c.Scheme = kube.NewScheme()
	utilruntime.Must(v1alpha1.AddToScheme(c.Scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(c.Scheme))
	if c.Client, err = client.NewWithWatch(cfg, client.Options{Scheme: c.Scheme}); err != nil {
		c.Stop()
		return nil, err
	}
	if c.Clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.installCRDs(ctx); err != nil {
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
	cmd := exec.Command(filepath.Join(c.Repo, "hack", "cluster-down.sh"), c.Dir)
	cmd.Dir = c.Repo
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: hack/cluster-down.sh: %v\n%s", err, out)
	}
}

// installCRDs installs the Gateway API standard CRDs of the pinned module
// and Portico's CRDs and waits until they are Established.
func (c *Cluster) installCRDs(ctx context.Context) error {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api")
	cmd.Dir = c.Repo
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("locating sigs.k8s.io/gateway-api: %w", err)
	}
	gwDir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard")
	crds, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{
		Paths:              []string{gwDir, filepath.Join(c.Repo, "config", "crd")},
		ErrorIfPathMissing: true,
		MaxTime:            60 * time.Second,
	})
	if err != nil {
		return err
	}
	for _, crd := range crds {
		err := poll(ctx, 60*time.Second, 100*time.Millisecond, func() (bool, error) {
			var got apiextensionsv1.CustomResourceDefinition
			if err := c.Client.Get(ctx, client.ObjectKey{Name: crd.Name}, &got); err != nil {
				return false, nil
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established {
					return cond.Status == apiextensionsv1.ConditionTrue, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s: %w", crd.Name, err)
		}
	}
	return nil
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

// FindRepo walks up from the working directory to go.mod.
func FindRepo() (string, error) {
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
			return "", fmt.Errorf("go.mod not found above the working directory")
		}
		dir = parent
	}
}
