package dataplane

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/portico-dev/portico/internal/testenv"
)

// TestDataPlane runs Pods that the test creates on a real API server (no
// scheduler or kwok: the test sets their node, phase and IP as kwok would)
// and checks what their processes see and who reaches them: the Pod's IP
// from the host, a load-balancer address written to the Service's status,
// a Pod the data plane cannot run reported, and everything removed when
// Pods go and when the data plane closes.
func TestDataPlane(t *testing.T) {
	testenv.RequireNetns(t)
	assets, err := testenv.BinaryDir()
	if err != nil {
		if testenv.InCI() {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
	echo, err := testenv.EchoBinary()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	cs := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()

	logf := func(format string, args ...any) { t.Logf(format, args...) }
	// A shell image, to look inside a container.
	sh := &ExecRuntime{RuntimeName: "sh", Repositories: []string{"test/sh"}, Binary: "/bin/sh", User: 1234}
	dp, err := New(Options{Config: cfg, Runtimes: []Runtime{EchoBasic(echo), sh}, Logf: logf})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = dp.Close()
		}
	})

	const ns = "apps"
	mustCreate(t, func() error {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf"},
			Data: map[string]string{"greeting": "hello"}}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "key"},
			Data: map[string][]byte{"tls.key": []byte("secret")}}, metav1.CreateOptions{})
		return err
	})

	echoPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "echo-0", Labels: map[string]string{"app": "echo"}},
		Spec: corev1.PodSpec{
			NodeName: "kwok-node-0", AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{
				Name: "echo", Image: "registry.k8s.io/gateway-api/echo-basic:v1.5.1",
				Env: []corev1.EnvVar{
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
				},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(3000)}}},
			}},
		},
	}
	// What the shell sees: its arguments expanded, its environment, its
	// user and groups, the volumes and the Pod's sysctl.
	shPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sh-0"},
		Spec: corev1.PodSpec{
			NodeName: "kwok-node-0", AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				FSGroup: ptr.To[int64](2000),
				Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}},
			},
			Containers: []corev1.Container{{
				Name: "sh", Image: "test/sh:1",
				Args: []string{"-c", `echo "args $0 $1"; echo "greeting $(cat /etc/conf/greeting)"; echo "key $(cat /etc/key/tls.key)"; ` +
					`echo "uid $(id -u) groups $(id -G)"; echo "port $(cat /proc/sys/net/ipv4/ip_unprivileged_port_start)"; ` +
					`echo "from $FROM"; exec sleep 600`, "$(POD_NAME)", "$$(POD_NAME)"},
				Env: []corev1.EnvVar{
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "FROM", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}, Key: "greeting"}}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/conf"}, {Name: "key", MountPath: "/etc/key"}},
			}},
			Volumes: []corev1.Volume{
				{Name: "conf", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}}}},
				{Name: "key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "key", DefaultMode: ptr.To[int32](0o440)}}},
			},
		},
	}
	other := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "dns-0"},
		Spec: corev1.PodSpec{NodeName: "kwok-node-0", AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "dns", Image: "registry.k8s.io/coredns/coredns:v1.12.2"}}},
	}
	ips := map[string]string{"echo-0": "10.244.0.5", "sh-0": "10.244.0.6", "dns-0": "10.244.0.7"}
	for _, p := range []*corev1.Pod{echoPod, shPod, other} {
		p.Namespace = ns
		created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// What kwok's pod-ready stage does.
		created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ips[p.Name], HostIP: "127.0.0.1"}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "echo"},
			Ports: []corev1.ServicePort{{Port: 3000, TargetPort: intstr.FromInt32(3000)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The echo server answers on its Pod's IP, knowing its Pod.
	client := &http.Client{Timeout: 2 * time.Second}
	echoed := func(url string) error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var body struct{ Pod, Namespace string }
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			return err
		}
		if body.Pod != "echo-0" || body.Namespace != ns {
			return fmt.Errorf("answered as %s/%s", body.Namespace, body.Pod)
		}
		return nil
	}
	eventually(t, 30*time.Second, "echo-basic on its Pod IP", func() error { return echoed("http://10.244.0.5:3000/") })

	// The load balancer: an address in the Service's status that reaches
	// the Pod.
	var lb string
	eventually(t, 30*time.Second, "the Service's load-balancer address", func() error {
		s, err := cs.CoreV1().Services(ns).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if in := s.Status.LoadBalancer.Ingress; len(in) == 1 && in[0].IP != "" {
			lb = in[0].IP
			return nil
		}
		return fmt.Errorf("status %+v", s.Status.LoadBalancer)
	})
	if lb != "10.245.0.1" {
		t.Errorf("load-balancer address %s, want the pool's first, 10.245.0.1", lb)
	}
	if err := echoed("http://" + lb + ":3000/"); err != nil {
		t.Errorf("through the load balancer: %v", err)
	}

	// What the shell saw.
	var log string
	eventually(t, 30*time.Second, "the shell's output", func() error {
		log, err = dp.ContainerLog(ns, "sh-0", "sh")
		if err == nil && !strings.Contains(log, "from ") {
			err = fmt.Errorf("log so far: %q", log)
		}
		return err
	})
	for _, want := range []string{
		"stdout F args sh-0 $(POD_NAME)", "stdout F greeting hello", "stdout F key secret",
		"stdout F uid 1234 groups 1234 2000", "stdout F port 0", "stdout F from hello",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the shell's log lacks %q:\n%s", want, log)
		}
	}

	// The Pod it cannot run is reported, with its image.
	u := dp.Unsupported()
	if len(u) != 1 || u[0].Pod != "dns-0" || u[0].Image != "registry.k8s.io/coredns/coredns:v1.12.2" {
		t.Errorf("unsupported: %+v", u)
	}

	// A deleted Pod's namespace goes, and with it the load balancer's
	// address.
	nsName := netnsOf(t, dp, ns, "echo-0")
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "echo-0", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the deleted Pod's namespace to go", func() error {
		if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), nsName+" ") || strings.HasSuffix(strings.TrimSpace(string(out)), nsName) {
			return fmt.Errorf("%s still there", nsName)
		}
		return nil
	})
	if err := echoed("http://" + lb + ":3000/"); err == nil {
		t.Error("the load balancer still answers with its only Pod gone")
	}

	bridge := dp.bridge.Name
	closed = true
	if err := dp.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), "portico-"+strings.TrimPrefix(bridge, "ptb")+"-") {
		t.Errorf("namespaces left after Close:\n%s", out)
	}
	if exec.Command("ip", "link", "show", bridge).Run() == nil {
		t.Errorf("bridge %s left after Close", bridge)
	}
}

func mustCreate(t *testing.T, f func() error) {
	t.Helper()
	if err := f(); err != nil {
		t.Fatal(err)
	}
}

// netnsOf is the network namespace of a running Pod.
func netnsOf(t *testing.T, dp *DataPlane, ns, pod string) string {
	t.Helper()
	name, ok := podNetns(dp, ns, pod)
	if !ok {
		t.Fatalf("Pod %s/%s is not running", ns, pod)
	}
	return name
}

// startEchoDataPlane starts an API server and a data plane running the
// conformance suite's echo server (whose binary it returns too), closed
// when the test ends.
func startEchoDataPlane(t *testing.T) (*DataPlane, kubernetes.Interface, string) {
	t.Helper()
	testenv.RequireNetns(t)
	echo := testenv.RequireEcho(t)
	cfg, _ := testenv.StartAPIServer(t)
	dp, err := New(Options{Config: cfg, Runtimes: []Runtime{EchoBasic(echo)}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dp.Close() })
	return dp, kubernetes.NewForConfigOrDie(cfg), echo
}

func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A test process that dies without closing its data plane (go test's
// -timeout, SIGKILL) leaves nothing behind: the watchdog kills what runs
// in its namespaces and deletes them and the bridge.
func TestWatchdog(t *testing.T) {
	testenv.RequireNetns(t)
	if os.Getenv("PORTICO_DATAPLANE_WATCHDOG_CHILD") == "1" {
		// The child: a data plane (no API server needed for this), one
		// namespace with a process in it, then death without Close.
		dp, err := New(Options{Config: &rest.Config{Host: "http://127.0.0.1:1"}, Runtimes: []Runtime{}})
		if err != nil {
			t.Fatal(err)
		}
		n, err := dp.bridge.AddNamespace(netip.MustParseAddr("10.244.9.9"))
		if err != nil {
			t.Fatal(err)
		}
		sleep := exec.Command("ip", "netns", "exec", n.Name, "sleep", "600")
		sleep.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := sleep.Start(); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("bridge=%s netns=%s pid=%d dir=%s\n", dp.bridge.Name, n.Name, sleep.Process.Pid, dp.dir)
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWatchdog$")
	cmd.Env = append(os.Environ(), "PORTICO_DATAPLANE_WATCHDOG_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var bridge, ns, dir string
	var pid int
	line := strings.TrimSpace(strings.Split(string(out), "\n")[0])
	if _, err := fmt.Sscanf(line, "bridge=%s netns=%s pid=%d dir=%s", &bridge, &ns, &pid, &dir); err != nil {
		t.Fatalf("child said %q: %v", out, err)
	}
	eventually(t, 15*time.Second, "the watchdog to clean up", func() error {
		var left []string
		if exec.Command("ip", "link", "show", bridge).Run() == nil {
			left = append(left, "bridge "+bridge)
		}
		if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(" "+strings.ReplaceAll(string(out), "\n", " "), " "+ns+" ") {
			left = append(left, "netns "+ns)
		}
		if syscall.Kill(pid, 0) == nil {
			left = append(left, fmt.Sprintf("process %d", pid))
		}
		if _, err := os.Stat(dir); err == nil {
			left = append(left, "directory "+dir)
		}
		if len(left) > 0 {
			return fmt.Errorf("left: %s", strings.Join(left, ", "))
		}
		return nil
	})
}
