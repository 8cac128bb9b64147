package envoy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	pb "sigs.k8s.io/gateway-api-conformance-images/echo-basic/grpcechoserver"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/pki"
	"github.com/portico-dev/portico/internal/provider/kube"
	"github.com/portico-dev/portico/internal/proxyspec"
	"github.com/portico-dev/portico/internal/testenv"
	"github.com/portico-dev/portico/internal/testenv/dataplane"
)

// startAPIServer starts a real kube-apiserver and etcd (envtest) with the
// Gateway API and Portico CRDs, and returns a client, a clientset and the
// path of a cluster-admin kubeconfig.
func startAPIServer(t *testing.T) (client.Client, kubernetes.Interface, string) {
	t.Helper()
	cfg, kubeconfig := testenv.StartAPIServer(t)
	c, err := client.New(cfg, client.Options{Scheme: kube.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, cs, kubeconfig
}

// freePort is a port free on addr just now.
func freePort(t *testing.T, addr string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestProvisionedProxy runs `portico controller` (mutual TLS on xDS,
// provisioning on) against a real API server, makes a Pod of the
// Deployment it provisions for a Gateway, and runs that Pod's Envoy as a
// kubelet would (the local data plane's dataplane.ResolveContainer: the
// bootstrap ConfigMap and client-certificate Secret volumes laid out and
// mounted, the arguments expanded, the container's user and the Pod's
// fsGroup) in a network namespace of its own (the Pod's IP). It checks
// that the proxy connects over mTLS, ACKs its configuration, becomes
// Ready only with it, keeps admin on loopback, and serves HTTP, HTTPS
// with the Gateway's certificate by SDS and gRPC. A second Envoy of the
// same Pod, in a namespace from which xDS cannot be reached, is never
// Ready, not even after Envoy's default initial fetch timeout (15 s):
// it waits for its configuration however long it takes.
func TestProvisionedProxy(t *testing.T) {
	testenv.RequireEnvoy(t)
	testenv.RequireNetns(t)
	echo := testenv.RequireEcho(t)
	k8s, cs, kubeconfig := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The "node network": the host side of a bridge, the proxy Pod and
	// a backend Pod in namespaces of their own on it.
	gateway := netip.MustParseAddr("10.248.0.1")
	bridge, err := testenv.NewBridge(gateway, netip.MustParsePrefix("10.248.0.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := bridge.Close(); err != nil {
			t.Errorf("removing the bridge: %v", err)
		}
	})
	proxyNS, err := bridge.AddNamespace(netip.MustParseAddr("10.248.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	backendNS, err := bridge.AddNamespace(netip.MustParseAddr("10.248.0.3"))
	if err != nil {
		t.Fatal(err)
	}
	logs := t.TempDir()
	testenv.StartProcess(t, "backend", logs, backendNS.Wrap([]string{echo}), "POD_NAME=backend-0", "NAMESPACE=apps", "HTTP_PORT=3000")
	testenv.StartProcess(t, "grpc-backend", logs, backendNS.Wrap([]string{echo}), "POD_NAME=grpc-0", "NAMESPACE=apps", "HTTP_PORT=3100", "GRPC_ECHO_SERVER=1")
	ca, err := pki.NewCA(time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueServer([]string{"secure.example.com"}, nil, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	xdsAddr := net.JoinHostPort(gateway.String(), strconv.Itoa(freePort(t, gateway.String())))
	ctrl := testenv.StartProcess(t, "controller", logs, []string{porticoBin, "controller",
		"--kubeconfig", kubeconfig, "--namespace", "portico-system",
		"--xds-address", xdsAddr, "--xds-service-address", xdsAddr, "--xds-extra-san", gateway.String(),
		"--admin-address", "127.0.0.1:0", "--debug-address=", "--lease-duration", "2s", "--renew-deadline", "1500ms", "--retry-period", "200ms",
		// Short-lived connections: a rotated client certificate is
		// presented within seconds (see rotateClientCert).
		"--xds-max-connection-age", "3s", "--xds-max-connection-age-grace", "1s",
		"--log-level", "debug"})

	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "portico-system"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}},
		&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "portico"}, Spec: gwv1.GatewayClassSpec{ControllerName: "portico.dev/gateway-controller"}},
		&gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: "apps"}, Spec: gwv1.GatewaySpec{
			GatewayClassName: "portico",
			Listeners: []gwv1.Listener{
				{Name: "http", Port: 8080, Protocol: gwv1.HTTPProtocolType},
				{Name: "https", Port: 8443, Protocol: gwv1.HTTPSProtocolType, Hostname: ptr.To[gwv1.Hostname]("secure.example.com"),
					TLS: &gwv1.ListenerTLSConfig{Mode: ptr.To(gwv1.TLSModeTerminate), CertificateRefs: []gwv1.SecretObjectReference{{Name: "edge-tls"}}}},
			},
		}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "edge-tls", Namespace: "apps"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "grpc", Namespace: "apps"}, Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{Name: "grpc", Port: 9000, TargetPort: intOrStr(3100), AppProtocol: ptr.To("kubernetes.io/h2c")}},
		}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "grpc-1", Namespace: "apps", Labels: map[string]string{discoveryv1.LabelServiceName: "grpc"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("grpc"), Port: ptr.To[int32](3100), Protocol: ptr.To(corev1.ProtocolTCP), AppProtocol: ptr.To("kubernetes.io/h2c")}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.248.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		},
		&gwv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "apps"}, Spec: gwv1.GRPCRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "edge", SectionName: ptr.To[gwv1.SectionName]("http")}}},
			Hostnames:       []gwv1.Hostname{"grpc.example.com"},
			Rules: []gwv1.GRPCRouteRule{{BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: "grpc", Port: ptr.To[gwv1.PortNumber](9000)},
			}}}}},
		}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps"}, Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intOrStr(3000)}},
		}},
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "apps", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](3000), Protocol: ptr.To(corev1.ProtocolTCP)}},
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.248.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		},
		&gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps"}, Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "edge"}}},
			Hostnames:       []gwv1.Hostname{"web.example.com", "secure.example.com"},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: ptr.To[gwv1.PortNumber](80)},
			}}}}},
		}},
	} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}

	// What the leader provisions for Gateway apps/edge.
	name := proxyspec.Name("edge")
	var dep appsv1.Deployment
	var cm corev1.ConfigMap
	var cert corev1.Secret
	eventually(t, 60*time.Second, "the proxy's Deployment, ConfigMap and client certificate", func() error {
		select {
		case <-ctrl.Exited():
			t.Fatalf("the controller exited: %v", ctrl.ExitErr())
		default:
		}
		for _, x := range []struct {
			name string
			obj  client.Object
		}{{name, &dep}, {name, &cm}, {proxyspec.ClientCertSecretName("edge"), &cert}} {
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: "apps", Name: x.name}, x.obj); err != nil {
				return err
			}
		}
		return nil
	})

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "edge-abc12", Namespace: "apps", Labels: dep.Spec.Template.Labels},
		Spec: dep.Spec.Template.Spec}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	ctr, err := dataplane.ResolveContainer(ctx, cs, pod, &pod.Spec.Containers[0], 65532)
	if err != nil {
		t.Fatal(err)
	}
	// A kubelet would probe 10.248.0.2:19002 (the readiness probe).
	probe := pod.Spec.Containers[0].ReadinessProbe.HTTPGet
	probeURL := fmt.Sprintf("http://%s:%d%s", proxyNS.Addr, probe.Port.IntValue(), probe.Path)

	// The same Pod's Envoy where xDS is out of reach, started first.
	cutOffNS := isolatedNamespace(t)
	cutOff := startPodEnvoy(t, ctr, cutOffNS)
	envoyDir := t.TempDir()
	envoy := startPodEnvoyIn(t, ctr, proxyNS, envoyDir)
	if err := envoy.WaitLive(60 * time.Second); err != nil {
		t.Fatalf("the provisioned proxy did not get its configuration: %v", err)
	}
	stats, err := envoy.Stats(ctx, "(lds|cds)\\.update_(success|rejected)|control_plane.connected_state")
	if err != nil {
		t.Fatal(err)
	}
	if stats["control_plane.connected_state"] != 1 || stats["listener_manager.lds.update_success"] < 1 ||
		stats["cluster_manager.cds.update_success"] < 1 || stats["listener_manager.lds.update_rejected"] != 0 || stats["cluster_manager.cds.update_rejected"] != 0 {
		t.Fatalf("xDS over mTLS: want connected, LDS and CDS applied and none rejected; got %v", stats)
	}

	t.Run("ready once configured", func(t *testing.T) {
		eventually(t, 10*time.Second, "readiness probe "+probeURL+" 200", func() error {
			return expectStatus(probeURL, http.StatusOK)
		})
	})
	t.Run("admin only on loopback", func(t *testing.T) {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(proxyNS.Addr.String(), "19001"), 2*time.Second)
		if err == nil {
			c.Close()
			t.Fatal("Envoy's admin interface answers on the Pod's IP")
		}
		// Nothing but /ready of admin is reachable through the readiness port.
		if err := expectStatus(fmt.Sprintf("http://%s:%d/config_dump", proxyNS.Addr, probe.Port.IntValue()), http.StatusNotFound); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("HTTPS with the Gateway's certificate by SDS", func(t *testing.T) {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca.CertPEM())
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{ServerName: "secure.example.com", RootCAs: pool}}}
		eventually(t, 20*time.Second, "https://secure.example.com through the proxy", func() error {
			return getOK(c, fmt.Sprintf("https://%s:8443/hello", proxyNS.Addr), "secure.example.com")
		})
	})
	t.Run("gRPC", func(t *testing.T) {
		conn, err := grpc.NewClient(net.JoinHostPort(proxyNS.Addr.String(), "8080"),
			grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("grpc.example.com"))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var resp *pb.EchoResponse
		eventually(t, 20*time.Second, "gRPC Echo through the proxy", func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			r, err := pb.NewGrpcEchoClient(conn).Echo(ctx, &pb.EchoRequest{})
			resp = r
			return err
		})
		if pod := resp.GetAssertions().GetContext().GetPod(); pod != "grpc-0" {
			t.Fatalf("gRPC answered by %q", pod)
		}
	})
	t.Run("route served", func(t *testing.T) {
		c := &http.Client{Timeout: 5 * time.Second}
		eventually(t, 20*time.Second, "web.example.com through the proxy", func() error {
			return getOK(c, fmt.Sprintf("http://%s:8080/hello", proxyNS.Addr), "web.example.com")
		})
	})
	t.Run("client certificate rotated without restart", func(t *testing.T) {
		rotateClientCert(t, k8s, ctrl, envoy, ctr, envoyDir)
		eventually(t, 20*time.Second, "web.example.com through the proxy after the rotation", func() error {
			return getOK(&http.Client{Timeout: 5 * time.Second}, fmt.Sprintf("http://%s:8080/hello", proxyNS.Addr), "web.example.com")
		})
	})
	t.Run("never Ready without xDS", func(t *testing.T) { neverReady(t, cutOff, cutOffNS) })
}

// startPodEnvoy runs the Pod's Envoy container c in ns.
func startPodEnvoy(t *testing.T, c *dataplane.Container, ns *testenv.Netns) *testenv.Envoy {
	t.Helper()
	return startPodEnvoyIn(t, c, ns, t.TempDir())
}

// startPodEnvoyIn is startPodEnvoy with the container's volumes laid out
// in dir (dir/vol<i>, as testenv.Container.Prepare does).
func startPodEnvoyIn(t *testing.T, c *dataplane.Container, ns *testenv.Netns, dir string) *testenv.Envoy {
	t.Helper()
	wrap, err := c.Process.Prepare(dir)
	if err != nil {
		t.Fatal(err)
	}
	return testenv.StartEnvoy(t, testenv.EnvoyOptions{
		Args: c.Args, Env: c.Env, Dial: ns.DialContext,
		Wrap: func(argv []string) []string { return ns.Wrap(wrap(argv)) },
	})
}

// neverReady checks that envoy, which cannot reach xDS, is not Ready
// until it has been up for longer than Envoy's default initial fetch
// timeout, and that it has not given up waiting then.
func neverReady(t *testing.T, envoy *testenv.Envoy, ns *testenv.Netns) {
	t.Helper()
	probe := &http.Client{Transport: &http.Transport{DialContext: ns.DialContext}, Timeout: 2 * time.Second}
	// By Envoy's own uptime, so a slow start under load does not shorten
	// the window.
	deadline := time.Now().Add(90 * time.Second)
	for {
		if resp, err := probe.Get("http://127.0.0.1:19002/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Fatalf("a proxy without xDS is Ready")
			}
		}
		if up, err := envoyUptime(envoy); err == nil && up > 16*time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Envoy did not report an uptime over 16 s within 90 s")
		}
		select {
		case <-envoy.Exited():
			t.Fatalf("envoy exited: %v", envoy.ExitErr())
		case <-time.After(250 * time.Millisecond):
		}
	}
	state, err := envoy.ServerState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if state == "LIVE" {
		t.Fatalf("a proxy without xDS went LIVE")
	}
	// Envoy fetches clusters first and listeners after them, so with a
	// timeout it would turn LIVE only after two; that the first did not
	// expire shows it waits.
	timeouts, err := envoy.Stats(context.Background(), "init_fetch_timeout")
	if err != nil {
		t.Fatal(err)
	}
	if len(timeouts) == 0 {
		t.Fatal("Envoy reports no init_fetch_timeout counter")
	}
	for name, n := range timeouts {
		if n != 0 {
			t.Errorf("%s = %d: Envoy gave up waiting for its initial configuration", name, n)
		}
	}
}

// envoyUptime is Envoy's uptime by its /server_info.
func envoyUptime(e *testenv.Envoy) (time.Duration, error) {
	_, body, err := e.Admin(context.Background(), "/server_info")
	if err != nil {
		return 0, err
	}
	var info struct {
		Uptime string `json:"uptime_current_epoch"`
	}
	if err := json.Unmarshal([]byte(body), &info); err != nil {
		return 0, err
	}
	return time.ParseDuration(info.Uptime)
}

// getOK GETs url with Host host and wants a 200.
func getOK(c *http.Client, url, host string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Host = host
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s (Host %s): status %d", url, host, resp.StatusCode)
	}
	return nil
}

func expectStatus(url string, want int) error {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("GET %s: %d, want %d", url, resp.StatusCode, want)
	}
	return nil
}

func intOrStr(i int32) intstr.IntOrString { return intstr.FromInt32(i) }
