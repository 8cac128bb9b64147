package testenv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// components are kwokctl's names of the cluster's processes: their pid
// and log files in the cluster directory.
var components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller"}

// TestCluster starts the local cluster as the suites do (ClusterUp) and
// checks what they rely on: the directory layout (kubeconfig, marker, pid
// and log files naming the directory), a Ready fake Node kwok-node-0 on
// 127.0.0.1, Pods scheduled and given IPs in 10.244.0.0/16, Services in
// 10.96.0.0/16, Pod logs through the API server (kwok's Logs and kubelet
// server), the aggregation layer's request-header settings, the
// controllers' Leases; then that ClusterDown leaves no process and no
// state, and that the watchdog stops a cluster whose owner is gone.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts two clusters")
	}
	if _, err := ClusterBinaries(); err != nil {
		if InCI() {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skipf("skipping: %v (run hack/kube-binaries.sh)", err)
	}
	repo, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("up and down", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "cluster")
		owner := startOwner(t)
		kubeconfig, err := ClusterUp(context.Background(), repo, dir, fmt.Sprintf("PORTICO_CLUSTER_OWNER_PID=%d", owner.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		pids := clusterPids(t, dir)
		t.Cleanup(func() { killAll(pids) })
		if want := filepath.Join(dir, "kubeconfig"); kubeconfig != want {
			t.Errorf("kubeconfig %s, want %s", kubeconfig, want)
		}
		if _, err := os.Stat(filepath.Join(dir, ".portico-cluster")); err != nil {
			t.Errorf("marker: %v", err)
		}
		for _, name := range components {
			if _, err := os.Stat(filepath.Join(dir, "logs", name+".log")); err != nil {
				t.Errorf("log of %s: %v", name, err)
			}
		}
		// Running it again while the cluster is up changes nothing.
		if again, err := ClusterUp(context.Background(), repo, dir); err != nil || again != kubeconfig {
			t.Errorf("second ClusterUp: %q, %v", again, err)
		}
		if got := clusterPids(t, dir); !maps.Equal(got, pids) {
			t.Errorf("second ClusterUp restarted components: %v, then %v", pids, got)
		}
		checkCluster(t, kubeconfig)

		if err := ClusterDown(repo, dir); err != nil {
			t.Fatal(err)
		}
		for name, pid := range pids {
			if running(pid) {
				t.Errorf("%s (pid %d) still running after ClusterDown", name, pid)
			}
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cluster directory after ClusterDown: %v", err)
		}
	})

	t.Run("watchdog", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "cluster")
		owner := startOwner(t)
		if _, err := ClusterUp(context.Background(), repo, dir, fmt.Sprintf("PORTICO_CLUSTER_OWNER_PID=%d", owner.Process.Pid)); err != nil {
			t.Fatal(err)
		}
		pids := clusterPids(t, dir)
		t.Cleanup(func() { killAll(pids) })
		_ = owner.Process.Kill()
		_ = owner.Wait()
		waitFor(t, 30*time.Second, "the watchdog to stop the cluster", func() error {
			for name, pid := range pids {
				if running(pid) {
					return fmt.Errorf("%s (pid %d) still running", name, pid)
				}
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("%s still there (%v)", dir, err)
			}
			return nil
		})
	})
}

// checkCluster checks the running cluster of kubeconfig.
func checkCluster(t *testing.T, kubeconfig string) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()

	node, err := cs.CoreV1().Nodes().Get(ctx, "kwok-node-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !nodeReady(node) {
		t.Errorf("kwok-node-0 not Ready: %v", node.Status.Conditions)
	}
	var internal []string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			internal = append(internal, a.Address)
		}
	}
	if !slices.Equal(internal, []string{"127.0.0.1"}) || node.Status.DaemonEndpoints.KubeletEndpoint.Port == 0 {
		t.Errorf("kwok-node-0: InternalIP %v, kubelet port %d", internal, node.Status.DaemonEndpoints.KubeletEndpoint.Port)
	}
	if len(node.Spec.Taints) != 0 {
		t.Errorf("kwok-node-0 tainted: %v", node.Spec.Taints)
	}

	// The controllers hold their Leases (the script waits for them) and
	// the default ServiceAccount exists.
	for _, l := range []string{"kube-controller-manager", "kube-scheduler"} {
		if _, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, l, metav1.GetOptions{}); err != nil {
			t.Errorf("lease %s: %v", l, err)
		}
	}

	// The aggregation layer: the request-header settings extension API
	// servers read.
	auth, err := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if auth.Data["requestheader-client-ca-file"] == "" || !strings.Contains(auth.Data["requestheader-allowed-names"], "kwok-admin") {
		t.Errorf("extension-apiserver-authentication: requestheader settings missing: %v", auth.Data)
	}

	svc, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ip, err := netip.ParseAddr(svc.Spec.ClusterIP); err != nil || !netip.MustParsePrefix("10.96.0.0/16").Contains(ip) {
		t.Errorf("Service ClusterIP %q not in 10.96.0.0/16", svc.Spec.ClusterIP)
	}

	// A Pod is scheduled onto the fake Node and made Running with an IP.
	_, err = cs.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "example.invalid/web"}},
			AutomountServiceAccountToken: new(false)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	waitFor(t, 30*time.Second, "Pod web-0 Running with an IP", func() error {
		pod, err = cs.CoreV1().Pods("default").Get(ctx, "web-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
			return fmt.Errorf("phase %s, IP %q", pod.Status.Phase, pod.Status.PodIP)
		}
		return nil
	})
	if pod.Spec.NodeName != "kwok-node-0" {
		t.Errorf("web-0 on node %q", pod.Spec.NodeName)
	}
	if ip, err := netip.ParseAddr(pod.Status.PodIP); err != nil || !netip.MustParsePrefix("10.244.0.0/16").Contains(ip) {
		t.Errorf("Pod IP %q not in 10.244.0.0/16", pod.Status.PodIP)
	}

	// Its log through the API server: kwok's kubelet server reads the file
	// its Logs object names (CRI log format).
	logFile := filepath.Join(t.TempDir(), "web.log")
	if err := os.WriteFile(logFile, []byte("2026-01-02T03:04:05.000000000Z stdout F hello from kwok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Logs",
		"metadata": map[string]any{"name": "web-0", "namespace": "default"},
		"spec":     map[string]any{"logs": []any{map[string]any{"containers": []any{"web"}, "logsFile": logFile}}},
	}}
	dyn := dynamic.NewForConfigOrDie(cfg)
	gvr := schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}
	if _, err := dyn.Resource(gvr).Namespace("default").Create(ctx, logs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the Pod's log through the API server", func() error {
		out, err := cs.CoreV1().Pods("default").GetLogs("web-0", &corev1.PodLogOptions{Container: "web"}).DoRaw(ctx)
		if err != nil {
			return err
		}
		if got := strings.TrimSpace(string(out)); got != "hello from kwok" {
			return fmt.Errorf("log %q", got)
		}
		return nil
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// startOwner starts a process that stands for the cluster's owner (the
// watchdog's PORTICO_CLUSTER_OWNER_PID).
func startOwner(t *testing.T) *exec.Cmd {
	owner := exec.Command("sleep", "600")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = owner.Process.Kill(); _ = owner.Wait() })
	return owner
}

// clusterPids reads the components' pid files of the cluster in dir and
// checks that each names a running process with dir on its command line.
func clusterPids(t *testing.T, dir string) map[string]int {
	t.Helper()
	pids := map[string]int{}
	for _, name := range append(slices.Clone(components), "watchdog") {
		file := filepath.Join(dir, "pids", name+".pid")
		if name == "watchdog" {
			file = filepath.Join(dir, "watchdog.pid")
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.Contains(string(cmdline), dir+"/") {
			t.Fatalf("%s: pid %d is not this cluster's (%q, %v)", name, pid, cmdline, err)
		}
		pids[name] = pid
	}
	return pids
}

// running reports whether pid is a live (not zombie) process.
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	if i := strings.LastIndex(s, ") "); i >= 0 && strings.HasPrefix(s[i+2:], "Z") {
		return false
	}
	return true
}

// killAll is the cleanup of a failed test: nothing of the cluster outlives
// it.
func killAll(pids map[string]int) {
	for _, pid := range pids {
		if running(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// waitFor polls fn until it succeeds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
