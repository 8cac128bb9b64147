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
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	pb "sigs.k8s.io/gateway-api/conformance/echo-basic/grpcechoserver"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/infra"
	"github.com/portico-dev/portico/internal/pki"
	"github.com/portico-dev/portico/internal/provider/kube"
	"github.com/portico-dev/portico/internal/testenv"
)

// startAPIServer starts a real kube-apiserver and etcd (envtest) with the
// Gateway API and Portico CRDs, and returns a client and the path of a
// cluster-admin kubeconfig.
func startAPIServer(t *testing.T) (client.Client, string) {
	t.Helper()
	assets, err := testenv.BinaryDir()
	if err != nil {
		if testenv.InCI() {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
	crds, err := testenv.GatewayAPICRDs()
	if err != nil {
		t.Fatal(err)
	}
	own, err := testenv.PorticoCRDs()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, CRDDirectoryPaths: []string{crds, own}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: kube.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return c, kubeconfig
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
// provisioning on) against a real API server, takes the Deployment,
// ConfigMap and client-certificate Secret it provisions for a Gateway,
// lays the volumes out as a kubelet does and runs Envoy as the
// Deployment's container would: in a network namespace of its own (the
// Pod's IP), as the container's user, with the Pod's fsGroup. It checks
// that the proxy connects over mTLS, ACKs its configuration, becomes
// Ready only with it, keeps admin on loopback, and serves a route.
func TestProvisionedProxy(t *testing.T) {
	testenv.RequireEnvoy(t)
	testenv.RequireNetns(t)
	echo := testenv.RequireEcho(t)
	k8s, kubeconfig := startAPIServer(t)
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
		"--admin-address", "127.0.0.1:0", "--lease-duration", "2s", "--renew-deadline", "1500ms", "--retry-period", "200ms",
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
	name := infra.Name("edge")
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
		}{{name, &dep}, {name, &cm}, {infra.ClientCertSecretName("edge"), &cert}} {
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: "apps", Name: x.name}, x.obj); err != nil {
				return err
			}
		}
		return nil
	})

	pod := podOf(t, &dep, map[string]corev1.ConfigMap{cm.Name: cm}, map[string]corev1.Secret{cert.Name: cert}, "edge-abc12")
	// A kubelet would probe 10.248.0.2:19002 (the readiness probe).
	probe := dep.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet
	probeURL := fmt.Sprintf("http://%s:%d%s", proxyNS.Addr, probe.Port.IntValue(), probe.Path)

	wrap, err := pod.container.Prepare(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	envoy := testenv.StartEnvoy(t, testenv.EnvoyOptions{
		Args: pod.args,
		Env:  pod.env,
		Wrap: func(argv []string) []string { return proxyNS.Wrap(wrap(argv)) },
		Dial: proxyNS.DialContext,
	})
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
}

// TestProxyWithoutXDSNeverReady boots the provisioned bootstrap in a
// namespace from which the xDS server cannot be reached, and checks that
// the proxy is not Ready after Envoy's default initial fetch timeout
// (15 s) has passed: it must wait for its configuration however long.
func TestProxyWithoutXDSNeverReady(t *testing.T) {
	testenv.RequireEnvoy(t)
	testenv.RequireNetns(t)
	t.Parallel()
	ns, err := testenv.NewIsolatedNamespace()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ns.Close() })
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: "apps"}, Spec: gwv1.GatewaySpec{GatewayClassName: "portico"}}
	objs, err := infra.Render(gw, v1alpha1Spec(), []int32{8080}, infra.Params{XDSAddress: "10.248.9.9:18000", XDSServerName: "portico-xds.portico-system.svc"})
	if err != nil {
		t.Fatal(err)
	}
	dep := deploymentFrom(t, objs)
	cm := corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: infra.Name("edge")}, Data: objs.ConfigMap.Data}
	// Any client certificate will do: the connection never gets that far.
	sec := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: infra.ClientCertSecretName("edge")}, Data: map[string][]byte{"tls.crt": nil, "tls.key": nil, "ca.crt": nil}}
	pod := podOf(t, dep, map[string]corev1.ConfigMap{cm.Name: cm}, map[string]corev1.Secret{sec.Name: sec}, "edge-0")
	wrap, err := pod.container.Prepare(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	envoy := testenv.StartEnvoy(t, testenv.EnvoyOptions{Args: pod.args, Env: pod.env, Dial: ns.DialContext,
		Wrap: func(argv []string) []string { return ns.Wrap(wrap(argv)) }})
	probe := &http.Client{Transport: &http.Transport{DialContext: ns.DialContext}, Timeout: 2 * time.Second}
	// Probe until Envoy has been up for longer than its default initial
	// fetch timeout (by its own uptime, so a slow start under load does
	// not shorten the window).
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

// proxyPod is the Envoy container of a provisioned Deployment as a
// process: its volumes and user, its args and env as the kubelet expands
// them.
type proxyPod struct {
	container testenv.Container
	args      []string
	env       []string
}

// podOf reads what a kubelet would from the Deployment's Pod template,
// with the ConfigMaps and Secrets its volumes name, for a Pod podName.
func podOf(t *testing.T, dep *appsv1.Deployment, cms map[string]corev1.ConfigMap, secrets map[string]corev1.Secret, podName string) proxyPod {
	t.Helper()
	spec := dep.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("proxy Pod has %d containers", len(spec.Containers))
	}
	ctr := spec.Containers[0]
	p := proxyPod{container: testenv.Container{RunAsUser: 0, RunAsGroup: -1, FSGroup: -1}}
	if sc := spec.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			p.container.RunAsUser = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			p.container.RunAsGroup = *sc.RunAsGroup
		}
		if sc.FSGroup != nil {
			p.container.FSGroup = *sc.FSGroup
		}
	}
	if sc := ctr.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			p.container.RunAsUser = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			p.container.RunAsGroup = *sc.RunAsGroup
		}
	}
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	for _, m := range ctr.VolumeMounts {
		v, ok := vols[m.Name]
		if !ok {
			t.Fatalf("mount %s names no volume", m.Name)
		}
		vol := testenv.Volume{MountPath: m.MountPath, Files: map[string][]byte{}}
		switch {
		case v.ConfigMap != nil:
			cm, ok := cms[v.ConfigMap.Name]
			if !ok {
				t.Fatalf("volume %s: no ConfigMap %s", v.Name, v.ConfigMap.Name)
			}
			for k, d := range cm.Data {
				vol.Files[k] = []byte(d)
			}
			if v.ConfigMap.DefaultMode != nil {
				vol.Mode = os.FileMode(*v.ConfigMap.DefaultMode)
			}
		case v.Secret != nil:
			sec, ok := secrets[v.Secret.SecretName]
			if !ok {
				t.Fatalf("volume %s: no Secret %s", v.Name, v.Secret.SecretName)
			}
			for k, d := range sec.Data {
				vol.Files[k] = d
			}
			if v.Secret.DefaultMode != nil {
				vol.Mode = os.FileMode(*v.Secret.DefaultMode)
			}
		default:
			t.Fatalf("volume %s: only ConfigMap and Secret volumes are laid out", v.Name)
		}
		p.container.Volumes = append(p.container.Volumes, vol)
	}
	vars := map[string]string{}
	for _, e := range ctr.Env {
		val := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			switch e.ValueFrom.FieldRef.FieldPath {
			case "metadata.name":
				val = podName
			case "metadata.namespace":
				val = dep.Namespace
			default:
				t.Fatalf("env %s: field %s", e.Name, e.ValueFrom.FieldRef.FieldPath)
			}
		}
		vars[e.Name] = val
		p.env = append(p.env, e.Name+"="+val)
	}
	for _, a := range ctr.Args {
		for k, v := range vars {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		p.args = append(p.args, a)
	}
	return p
}

func intOrStr(i int32) intstr.IntOrString { return intstr.FromInt32(i) }

// v1alpha1Spec is the ProxyConfig of a Gateway with none: the defaults.
func v1alpha1Spec() v1alpha1.ProxyConfigSpec { return v1alpha1.ProxyConfigSpec{} }

// deploymentFrom is the Deployment of rendered proxy objects, as the API
// server would store it.
func deploymentFrom(t *testing.T, objs *infra.Objects) *appsv1.Deployment {
	t.Helper()
	data, err := json.Marshal(objs.Deployment)
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	if err := json.Unmarshal(data, &dep); err != nil {
		t.Fatal(err)
	}
	return &dep
}
