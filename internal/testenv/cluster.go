package testenv

// The local kwok cluster of the suites under test/ (e2e, faults,
// conformance, bench): hack/cluster-up.sh has kwokctl (`kwokctl create
// cluster --runtime binary`) start etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok (fake Nodes whose Pods
// become Running and Ready) on loopback from the binaries of
// hack/kube-binaries.sh, with no container and no download anywhere;
// hack/cluster-down.sh stops it. A cluster directory keeps the layout the
// suites read: DIR/kubeconfig, DIR/pids/<component>.pid and
// DIR/logs/<component>.log (links into kwokctl's DIR/clusters/portico).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// clusterBinaries are the executables hack/cluster-up.sh runs: the
// components, kwokctl, and kubectl, which kwokctl calls (and would
// otherwise download).
var clusterBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kwokctl", "kubectl"}

// ClusterBinaries returns the directory with everything hack/cluster-up.sh
// runs — $PORTICO_KUBE_BINARIES, else K8sVersionDir in CacheDir — without
// building anything: the executables and kwok-stages/pod-ready.yaml.
func ClusterBinaries() (string, error) {
	dir := os.Getenv("PORTICO_KUBE_BINARIES")
	if dir == "" {
		cache := CacheDir()
		if cache == "" {
			return "", errors.New("no cache directory: neither PORTICO_CACHE nor a home directory is set")
		}
		dir = filepath.Join(cache, K8sVersionDir)
	}
	var missing []string
	for _, b := range clusterBinaries {
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

// ClusterUp runs hack/cluster-up.sh of repo into dir, with env added to
// the environment (e.g. PORTICO_KUBE_BINARIES or
// PORTICO_APISERVER_EXTRA_ARGS), and returns the cluster-admin kubeconfig
// path it prints. PORTICO_CLUSTER_OWNER_PID is this process: a watchdog
// started by the script stops the cluster if the process dies without
// cleaning up (test timeout, SIGKILL). A failed start leaves nothing
// running (the script stops what it started); the error holds the
// script's stderr.
func ClusterUp(ctx context.Context, repo, dir string, env ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(repo, "hack", "cluster-up.sh"), dir)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORTICO_CLUSTER_OWNER_PID=%d", os.Getpid()))
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/cluster-up.sh: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}

// ClusterDown runs hack/cluster-down.sh of repo on dir: it stops the
// cluster and removes its state. The error holds the script's output.
func ClusterDown(repo, dir string) error {
	cmd := exec.Command(filepath.Join(repo, "hack", "cluster-down.sh"), dir)
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("hack/cluster-down.sh: %v\n%s", err, bytes.TrimRight(out, "\n"))
	}
	return nil
}

// ErrSkip is in the error of StartCluster and MainCluster when the
// cluster binaries are missing outside CI: the suite skips. With CI=true
// (InCI) missing binaries are a failure.
var ErrSkip = errors.New("SKIP")

// Cluster is a local kwok cluster a suite runs on.
type Cluster struct {
	Repo       string
	Dir        string // hack/cluster-up.sh state; "" for a cluster we did not start
	Kubeconfig string // cluster-admin kubeconfig
	logf       func(format string, args ...any)
}

// StartCluster checks the binaries (ClusterBinaries) and starts a cluster
// in a new temporary directory named after pattern (os.MkdirTemp), for a
// suite; Stop stops it. logf reports progress ("cluster up in …") and, at
// Stop, the logs of a failed run. Missing binaries give an error that
// wraps ErrSkip unless InCI.
func StartCluster(repo, pattern string, logf func(format string, args ...any)) (*Cluster, error) {
	bins, err := ClusterBinaries()
	if err != nil {
		if InCI() {
			return nil, fmt.Errorf("%v (CI=true: failing instead of skipping)", err)
		}
		return nil, fmt.Errorf("%w: %v (run hack/kube-binaries.sh)", ErrSkip, err)
	}
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	kubeconfig, err := ClusterUp(context.Background(), repo, dir, "PORTICO_KUBE_BINARIES="+bins)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	logf("cluster up in %s (%s)", time.Since(start).Round(time.Millisecond), kubeconfig)
	return &Cluster{Repo: repo, Dir: dir, Kubeconfig: kubeconfig, logf: logf}, nil
}

// MainCluster is the cluster of a suite's TestMain, which logs to stderr
// as "suite: …": the one $PORTICO_KUBECONFIG names if set (Stop leaves it
// alone), else a new one (StartCluster) in a temporary directory named
// portico-suite-*. Repo is the repository root (RepoRoot).
func MainCluster(suite string) (*Cluster, error) {
	repo, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, suite+": "+format+"\n", args...)
	}
	if kubeconfig := os.Getenv("PORTICO_KUBECONFIG"); kubeconfig != "" {
		return &Cluster{Repo: repo, Kubeconfig: kubeconfig, logf: logf}, nil
	}
	return StartCluster(repo, "portico-"+suite+"-", logf)
}

// ExitCode is what a TestMain returns for an error of MainCluster: 0 when
// it skips (ErrSkip), else 1.
func ExitCode(err error) int {
	if errors.Is(err, ErrSkip) {
		return 0
	}
	return 1
}

// Stop stops a cluster StartCluster started and removes its directory; a
// cluster it did not start is left alone. With failed set it first keeps
// the components' logs: copied to logDir if set, else their last lines
// logged.
func (c *Cluster) Stop(failed bool, logDir string) {
	if c.Dir == "" {
		return
	}
	defer os.RemoveAll(c.Dir)
	if failed {
		c.saveLogs(logDir)
	}
	start := time.Now()
	if err := ClusterDown(c.Repo, c.Dir); err != nil {
		c.logf("%v", err)
		return
	}
	c.logf("cluster down in %s", time.Since(start).Round(time.Millisecond))
}

// saveLogs copies the components' logs (DIR/logs/*.log) to dest, or with
// dest "" logs the last 20 lines of each.
func (c *Cluster) saveLogs(dest string) {
	logs, _ := filepath.Glob(filepath.Join(c.Dir, "logs", "*.log"))
	if dest != "" {
		if err := os.MkdirAll(dest, 0o755); err != nil {
			c.logf("keeping the cluster logs: %v", err)
			return
		}
	}
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		if dest != "" {
			_ = os.WriteFile(filepath.Join(dest, filepath.Base(l)), data, 0o644)
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 20 {
			lines = lines[len(lines)-20:]
		}
		c.logf("----- last lines of %s -----\n%s", filepath.Base(l), strings.Join(lines, "\n"))
	}
	if dest != "" {
		c.logf("cluster logs saved in %s", dest)
	}
}

// Connect loads kubeconfig, sets the client-side rate limits of the REST
// config to qps and burst and makes an uncached client with scheme s.
func Connect(kubeconfig string, qps float32, burst int, s *runtime.Scheme) (*rest.Config, client.WithWatch, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("loading %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = qps, burst
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, nil, fmt.Errorf("client: %w", err)
	}
	return cfg, c, nil
}

// SetUp connects to the cluster (Connect) and installs the CRDs
// (InstallCRDs), logging how long they took to be Established.
func (c *Cluster) SetUp(qps float32, burst int, s *runtime.Scheme) (*rest.Config, client.WithWatch, error) {
	cfg, cl, err := Connect(c.Kubeconfig, qps, burst, s)
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	if err := InstallCRDs(context.Background(), cfg, cl, c.Repo); err != nil {
		return nil, nil, fmt.Errorf("installing CRDs: %w", err)
	}
	c.logf("CRDs established in %s", time.Since(start).Round(time.Millisecond))
	return cfg, cl, nil
}

// InstallCRDs installs (or updates) the Gateway API CRDs (GatewayAPICRDs) of the
// module repo pins and Portico's CRDs (repo/config/crd) with cfg, and
// waits with c (whose scheme has apiextensions/v1) until all are
// Established, for 60 seconds at most.
func InstallCRDs(ctx context.Context, cfg *rest.Config, c client.Reader, repo string) error {
	gwDir, err := gatewayAPICRDs(repo)
	if err != nil {
		return err
	}
	// envtest reads only CustomResourceDefinition documents (the
	// ValidatingAdmissionPolicy in the standard directory is skipped).
	crds, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths:              []string{gwDir, filepath.Join(repo, "config", "crd")},
		ErrorIfPathMissing: true,
		MaxTime:            60 * time.Second,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, crd := range crds {
		for {
			var got apiextensionsv1.CustomResourceDefinition
			err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, &got)
			if err == nil && CRDEstablished(&got) {
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

// CRDEstablished reports whether crd's Established condition is True.
func CRDEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}
