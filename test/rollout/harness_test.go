// Package rollout proves with real traffic that provisioned proxies are
// highly available: a proxy Pod is Ready only once its Envoy has its
// configuration, and a rolling update, a scale-down by the autoscaler and
// a deleted Pod lose no request.
//
// It runs on a local kwok cluster (hack/cluster-up.sh) with the local data
// plane (internal/testenv/dataplane) acting as the kubelet of the Pods the
// tests create: every ProxyConfig here adds the annotation
// dataplane.KubeletAnnotation to its proxy Pods (spec.pod.annotations), so
// their Ready condition follows their readiness probes and their deletion
// runs their preStop hooks, SIGTERM and grace period; their load balancer
// sends each new connection to a Ready Pod and leaves established ones
// alone, as kube-proxy and a cloud load balancer do. One Portico replica
// runs in-process with provisioning and xDS over mTLS; the proxies reach
// its xDS server through a gate the readiness test closes. The cluster's
// HorizontalPodAutoscaler controller reads the test's resource metrics
// API (internal/testenv/metricsapi).
//
// The tests can fail: with the data plane's preStop hooks skipped (Envoy
// then gets SIGTERM without a drain) the rolling update lost 6 of 93,357
// requests and the Pod deletion 2 of 78,765 (EOF on a request in flight),
// where with them they lose none.
//
// The suite takes a few minutes and runs only with PORTICO_ROLLOUT=1,
// which `make test-rollout` sets. Without network namespaces, Envoy or the
// kube binaries it skips, or fails with CI=true.
package rollout

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	gwxv1alpha1 "sigs.k8s.io/gateway-api/apisx/v1alpha1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/controller"
	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/proxyspec"
	"github.com/portico-dev/portico/internal/testenv"
	"github.com/portico-dev/portico/internal/testenv/dataplane"
	"github.com/portico-dev/portico/internal/testenv/metricsapi"
)

const (
	porticoNamespace = "portico-system"
	xdsPort          = 18000
)

var harness struct {
	cluster *testenv.Cluster
	logPath string
	log     *os.File
	logMu   sync.Mutex

	once    sync.Once
	err     error
	cfg     *rest.Config
	client  client.Client
	dp      *dataplane.DataPlane
	stop    func()
	xdsOpen atomic.Bool // the gate between proxies and the xDS server
	// cpu is the CPU usage (millicores) the metrics API reports for every
	// Envoy container of a namespace's proxies.
	cpu sync.Map // namespace → int64
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) (code int) {
	flag.Parse()
	if os.Getenv("PORTICO_ROLLOUT") != "1" {
		fmt.Fprintln(os.Stderr, "rollout: SKIP: the suite takes minutes: run `make test-rollout` (PORTICO_ROLLOUT=1)")
		return 0
	}
	if testing.Short() {
		fmt.Fprintln(os.Stderr, "rollout: SKIP: -short")
		return 0
	}
	f, err := os.CreateTemp("", "portico-rollout-*.log")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	harness.log, harness.logPath = f, f.Name()
	defer func() {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "rollout: FAILED; data plane and controller log %s, last lines:\n%s\n", harness.logPath, lastLines(harness.logPath, 200))
		} else {
			_ = os.Remove(harness.logPath)
		}
	}()
	cluster, err := testenv.MainCluster("rollout")
	if err != nil {
		fmt.Fprintf(os.Stderr, "rollout: %v\n", err)
		return testenv.ExitCode(err)
	}
	harness.cluster = cluster
	defer func() { cluster.Stop(code != 0, os.Getenv("PORTICO_ROLLOUT_ARTIFACTS")) }()
	defer func() {
		if harness.stop != nil {
			harness.stop()
		}
	}()
	harness.xdsOpen.Store(true)
	return m.Run()
}

func logf(format string, args ...any) {
	harness.logMu.Lock()
	defer harness.logMu.Unlock()
	fmt.Fprintf(harness.log, "%s %s\n", time.Now().Format("15:04:05.000"), strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
}

type logWriter struct{}

func (logWriter) Write(p []byte) (int, error) { logf("%s", p); return len(p), nil }

func lastLines(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// env sets the suite up once (the test's requirements first: network
// namespaces and Envoy) and returns the cluster client.
func env(t *testing.T) client.Client {
	t.Helper()
	testenv.RequireNetns(t)
	testenv.RequireEnvoy(t)
	harness.once.Do(func() { harness.err = setUp() })
	if harness.err != nil {
		t.Fatalf("setting up: %v", harness.err)
	}
	return harness.client
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(gwv1.Install(s))
	utilruntime.Must(gwv1beta1.Install(s))
	utilruntime.Must(gwxv1alpha1.Install(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

func setUp() error {
	ctx := context.Background()
	cfg, c, err := harness.cluster.SetUp(100, 200, newScheme())
	if err != nil {
		return err
	}
	harness.cfg, harness.client = cfg, c
	var stops []func()
	harness.stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if err := testenv.InstallCRDs(ctx, cfg, c, harness.cluster.Repo); err != nil {
		return fmt.Errorf("installing CRDs: %w", err)
	}
	echo, err := testenv.EchoBinary()
	if err != nil {
		return err
	}
	dp, err := dataplane.New(dataplane.Options{Config: cfg, Runtimes: []dataplane.Runtime{dataplane.EchoBasic(echo)}, Logf: logf})
	if err != nil {
		return err
	}
	harness.dp = dp
	stops = append(stops, func() {
		if err := dp.Close(); err != nil {
			logf("closing the data plane: %v", err)
		}
	})
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: porticoNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	metrics, err := metricsapi.Start(ctx, c, cs, porticoNamespace, dp.Gateway(), func(p *corev1.Pod, container string) corev1.ResourceList {
		cpu := int64(1)
		if v, ok := harness.cpu.Load(p.Namespace); ok && container == "envoy" {
			cpu = v.(int64)
		}
		return corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewMilliQuantity(cpu, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(32<<20, resource.BinarySI),
		}
	})
	if err != nil {
		return err
	}
	stops = append(stops, func() { _ = metrics.Close() })

	xl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	// The gate: while closed, a proxy's xDS connection is accepted and
	// closed at once, as when the controller cannot be reached.
	gate, err := testenv.Forward(netip.MustParseAddrPort("127.0.0.1:0"), func() []string {
		if harness.xdsOpen.Load() {
			return []string{xl.Addr().String()}
		}
		return nil
	})
	if err != nil {
		return err
	}
	stops = append(stops, func() { _ = gate.Close() })
	xdsService, err := dp.Forward(xdsPort, gate.Addr().String())
	if err != nil {
		return err
	}
	al, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctrl, err := controller.New(controller.Options{
		RESTConfig:        rest.CopyConfig(cfg),
		Namespace:         porticoNamespace,
		ControllerName:    gatewayapi.DefaultControllerName,
		LeaderElectionID:  "portico-leader",
		Identity:          "portico-0",
		LeaseDuration:     4 * time.Second,
		RenewDeadline:     3 * time.Second,
		RetryPeriod:       500 * time.Millisecond,
		QPS:               100,
		Burst:             200,
		Debounce:          20 * time.Millisecond,
		MaxDelay:          200 * time.Millisecond,
		XDSListener:       xl,
		AdminListener:     al,
		Provision:         true,
		XDSServiceAddress: xdsService.String(),
		XDSTLS:            true,
		XDSExtraSANs:      []string{xdsService.Addr().String()},
		Log:               slog.New(slog.NewTextHandler(logWriter{}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(rctx) }()
	stops = append(stops, func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				logf("controller: %v", err)
			}
		case <-time.After(30 * time.Second):
			logf("controller did not stop")
		}
	})
	return nil
}

// proxyConfig is the spec the tests start from: the data plane is the
// proxies' kubelet, a short drain.
func proxyConfig(replicas int32) v1alpha1.ProxyConfigSpec {
	return v1alpha1.ProxyConfigSpec{
		Replicas: ptr.To(replicas),
		Service:  v1alpha1.ProxyService{Type: corev1.ServiceTypeLoadBalancer},
		Pod:      &v1alpha1.ProxyPod{Annotations: map[string]string{dataplane.KubeletAnnotation: "true"}},
		Shutdown: &v1alpha1.ProxyShutdown{
			DrainTimeout:     &metav1.Duration{Duration: 20 * time.Second},
			MinDrainDuration: &metav1.Duration{Duration: 2 * time.Second},
		},
	}
}

// gatewayFixture is one test's GatewayClass (with its ProxyConfig), a
// namespace with an echo backend, a Gateway and an HTTPRoute to the
// backend, all removed when the test ends.
type gatewayFixture struct {
	c       client.Client
	class   string
	ns      string
	gateway string
	pc      *v1alpha1.ProxyConfig
}

func newGateway(t *testing.T, c client.Client, name string, spec v1alpha1.ProxyConfigSpec) *gatewayFixture {
	t.Helper()
	ctx := context.Background()
	f := &gatewayFixture{c: c, class: "rollout-" + name, ns: "rollout-" + name, gateway: name}
	f.pc = &v1alpha1.ProxyConfig{ObjectMeta: metav1.ObjectMeta{Namespace: porticoNamespace, Name: f.class}, Spec: spec}
	mustCreate(t, c, f.pc)
	mustCreate(t, c, &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: f.class}, Spec: gwv1.GatewayClassSpec{
		ControllerName: gwv1.GatewayController(gatewayapi.DefaultControllerName),
		ParametersRef: &gwv1.ParametersReference{Group: "portico.dev", Kind: v1alpha1.Kind, Name: f.class,
			Namespace: ptr.To(gwv1.Namespace(porticoNamespace))},
	}})
	mustCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}})
	eventually(t, 30*time.Second, "the namespace's default ServiceAccount", func() error {
		return c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "default"}, &corev1.ServiceAccount{})
	})
	t.Cleanup(func() {
		ctx := context.Background()
		_ = c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}})
		_ = c.Delete(ctx, &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: f.class}})
		_ = c.Delete(ctx, f.pc)
	})
	f.echo(t)
	mustCreate(t, c, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}, Spec: gwv1.GatewaySpec{
		GatewayClassName: gwv1.ObjectName(f.class),
		Listeners:        []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}},
	}})
	mustCreate(t, c, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "echo"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwv1.ObjectName(name)}}},
		Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
			BackendObjectReference: gwv1.BackendObjectReference{Name: "echo", Port: ptr.To(gwv1.PortNumber(8080))}}}}}},
	}})
	return f
}

// echo is the backend: two echo-basic Pods, Ready from their probes,
// behind Service echo:8080.
func (f *gatewayFixture) echo(t *testing.T) {
	labels := map[string]string{"app": "echo"}
	mustCreate(t, f.c, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "echo"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](2),
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{dataplane.KubeletAnnotation: "true"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "echo", Image: "registry.k8s.io/gateway-api/conformance/echo-basic:v1.7.0",
				Env: []corev1.EnvVar{
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
				},
				Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 3000}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(3000)}}},
			}}},
		},
	}})
	mustCreate(t, f.c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "echo"}, Spec: corev1.ServiceSpec{
		Selector: labels, Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromString("http")}},
	}})
}

// address waits for the Gateway to be Programmed with an address and
// returns it.
func (f *gatewayFixture) address(t *testing.T, timeout time.Duration) string {
	t.Helper()
	var addr string
	eventually(t, timeout, "Gateway "+f.gateway+" Programmed with an address", func() error {
		var gw gwv1.Gateway
		if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: f.gateway}, &gw); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed))
		if cond == nil || cond.Status != metav1.ConditionTrue || len(gw.Status.Addresses) == 0 {
			return fmt.Errorf("Programmed %+v, addresses %v", cond, gw.Status.Addresses)
		}
		addr = gw.Status.Addresses[0].Value
		return nil
	})
	return addr
}

// pods are the Gateway's proxy Pods.
func (f *gatewayFixture) pods(t *testing.T) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := f.c.List(context.Background(), &list, client.InNamespace(f.ns), client.MatchingLabels(proxyspec.Labels(f.ns, f.gateway))); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// settled waits until the proxy Deployment runs exactly want replicas, all
// of the current template, all Ready, and no other proxy Pod is left
// (terminating ones included).
func (f *gatewayFixture) settled(t *testing.T, want int32, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%d Ready proxies of the current template and nothing else", want), func() error {
		var d appsv1.Deployment
		if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: proxyspec.Name(f.gateway)}, &d); err != nil {
			return err
		}
		s := d.Status
		if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != want || s.ReadyReplicas != want || s.AvailableReplicas != want || s.Replicas != want {
			return fmt.Errorf("generation %d observed %d: replicas %d updated %d ready %d available %d", d.Generation, s.ObservedGeneration, s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas)
		}
		if pods := f.pods(t); len(pods) != int(want) {
			var names []string
			for _, p := range pods {
				names = append(names, p.Name)
			}
			return fmt.Errorf("proxy Pods %v", names)
		}
		return nil
	})
}

func mustCreate(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
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
