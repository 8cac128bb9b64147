package envoy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/proxysync"
	"github.com/portico-dev/portico/internal/re2"
	"github.com/portico-dev/portico/internal/testenv"
)

// heavyRegex is a path expression Portico accepts (its RE2 program is
// below re2.MaxProgramSize, the limit of the bootstraps Portico writes)
// and an Envoy with the default runtime limit (100) rejects: the real
// NACK of a proxy deployed by hand, without Portico's bootstrap.
const heavyRegex = "/[a-z]{60,80}/x"

// handDeployedBootstrap is an Envoy bootstrap without Portico's runtime
// layer: ADS (delta) to xds, node id and cluster (the Gateway) given.
func handDeployedBootstrap(node, gateway, xds string) string {
	host, port, _ := net.SplitHostPort(xds)
	return fmt.Sprintf(`node: {id: %s, cluster: %s}
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
dynamic_resources:
  ads_config: {api_type: DELTA_GRPC, transport_api_version: V3, grpc_services: [{envoy_grpc: {cluster_name: xds}}]}
  lds_config: {ads: {}, resource_api_version: V3}
  cds_config: {ads: {}, resource_api_version: V3}
static_resources:
  clusters:
  - name: xds
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
    load_assignment:
      cluster_name: xds
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: %s, port_value: %s}}}}]}]
`, node, gateway, host, port)
}

// TestProxiesInSyncRealEnvoys: three controller replicas (processes, the
// leader aggregating every replica's /debug/proxies, found from their
// Pods and read with its token); two real Envoys, each connected to a
// follower. A route that the Envoys' RE2 limit rejects turns the
// Gateway's portico.dev/ProxiesInSync False with Envoy's error, and the
// route's own parent status too; removing it turns the Gateway's True. The leader is then killed (SIGKILL: its Lease is not
// released) and the same holds under the new leader, with one of the
// NACKing Envoys on the remaining follower; then that follower is killed
// too, and the condition counts the proxy still connected.
func TestProxiesInSyncRealEnvoys(t *testing.T) {
	testenv.RequireEnvoy(t)
	testenv.RequireNetns(t)
	if n, err := re2.ProgramSize(heavyRegex); err != nil || n <= 100 || n > re2.MaxProgramSize {
		t.Fatalf("heavyRegex program size bound %d (%v): want between Envoy's default 100 and %d", n, err, re2.MaxProgramSize)
	}
	k8s, cs, adminKubeconfig := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	gateway := netip.MustParseAddr("10.252.0.1")
	bridge, err := testenv.NewBridge(gateway, netip.MustParsePrefix("10.252.0.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := bridge.Close(); err != nil {
			t.Errorf("removing the bridge: %v", err)
		}
	})

	// The controller's ServiceAccount token (it checks and presents
	// bearer tokens on the debug servers).
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "portico-system"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "portico", Namespace: "portico-system"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "portico"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "portico-system", Name: "portico"}}},
	} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := cs.CoreV1().ServiceAccounts("portico-system").CreateToken(ctx, "portico", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", adminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: restCfg.Host, CertificateAuthorityData: restCfg.CAData}
	kc.AuthInfos["portico"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["portico"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "portico"}
	kc.CurrentContext = "portico"
	kubeconfig := filepath.Join(t.TempDir(), "portico.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}

	// Three replicas: xDS on the bridge (the Envoys' "Service"), debug
	// servers off loopback (HTTPS, tokens checked), each with its Pod.
	logs := t.TempDir()
	type replica struct {
		name, xds string
		proc      *testenv.Process
	}
	replicas := map[string]*replica{}
	for _, name := range []string{"portico-a", "portico-b", "portico-c"} {
		xds := net.JoinHostPort(gateway.String(), strconv.Itoa(freePort(t, gateway.String())))
		debugPort := freePort(t, "127.0.0.1")
		proc := testenv.StartProcess(t, name, logs, []string{porticoBin, "controller",
			"--kubeconfig", kubeconfig, "--namespace", "portico-system", "--identity", name,
			"--xds-address", xds, "--xds-tls=false", "--provision=false",
			"--admin-address", "127.0.0.1:0", "--debug-address", ":" + strconv.Itoa(debugPort),
			"--peer-selector", "app.kubernetes.io/name=portico",
			"--lease-duration", "2s", "--renew-deadline", "1500ms", "--retry-period", "200ms"}, "POD_NAME="+name)
		replicas[name] = &replica{name: name, xds: xds, proc: proc}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "portico-system", Name: name, Labels: map[string]string{"app.kubernetes.io/name": "portico"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "portico", Image: "portico",
				Ports: []corev1.ContainerPort{{Name: "debug", ContainerPort: int32(debugPort)}}}}}}
		if err := k8s.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}}}
		if err := k8s.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	holder := func() string {
		var l coordinationv1.Lease
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "portico-system", Name: "portico-leader"}, &l); err != nil {
			return ""
		}
		return ptr.Deref(l.Spec.HolderIdentity, "")
	}
	eventually(t, 60*time.Second, "a leader", func() error {
		if replicas[holder()] == nil {
			return fmt.Errorf("lease holder %q", holder())
		}
		return nil
	})
	leader := replicas[holder()]
	var followers []*replica
	for _, name := range []string{"portico-a", "portico-b", "portico-c"} {
		if name != leader.name {
			followers = append(followers, replicas[name])
		}
	}

	for _, o := range []client.Object{
		&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "portico"}, Spec: gwv1.GatewayClassSpec{ControllerName: "portico.dev/gateway-controller"}},
		&gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: "apps"}, Spec: gwv1.GatewaySpec{
			GatewayClassName: "portico", Listeners: []gwv1.Listener{{Name: "http", Port: 8080, Protocol: gwv1.HTTPProtocolType}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps"}, Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}},
		&gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps"}, Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "edge"}}},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: ptr.To[gwv1.PortNumber](80)}}}}}}}},
	} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	// One hand-deployed Envoy on each follower.
	for i, f := range followers {
		ns, err := bridge.AddNamespace(netip.MustParseAddr(fmt.Sprintf("10.252.0.%d", 2+i)))
		if err != nil {
			t.Fatal(err)
		}
		e := testenv.StartEnvoy(t, testenv.EnvoyOptions{Bootstrap: handDeployedBootstrap(fmt.Sprintf("edge-proxy-%d", i+1), "apps/edge", f.xds),
			Wrap: ns.Wrap, Dial: ns.DialContext})
		if err := e.WaitLive(60 * time.Second); err != nil {
			t.Fatalf("envoy on %s: %v", f.name, err)
		}
	}

	cond := func() *metav1.Condition {
		var gw gwv1.Gateway
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "edge"}, &gw); err != nil {
			return nil
		}
		return meta.FindStatusCondition(gw.Status.Conditions, proxysync.ConditionType)
	}
	wait := func(what string, ok func(c *metav1.Condition) bool) time.Duration {
		t.Helper()
		start := time.Now()
		eventually(t, 30*time.Second, what, func() error {
			if c := cond(); c == nil || !ok(c) {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		})
		return time.Since(start)
	}
	routeCond := func(name string) *metav1.Condition {
		var r gwv1.HTTPRoute
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "apps", Name: name}, &r); err != nil {
			return nil
		}
		for _, p := range r.Status.Parents {
			if p.ControllerName == "portico.dev/gateway-controller" {
				return meta.FindStatusCondition(p.Conditions, proxysync.ConditionType)
			}
		}
		return nil
	}
	inSync := func(c *metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue && c.Message == "2 proxies run the current configuration."
	}
	rejected := func(c *metav1.Condition) bool {
		return c.Status == metav1.ConditionFalse && c.Reason == proxysync.ReasonRejected &&
			strings.HasPrefix(c.Message, "2 of 2 proxies rejected the configuration: edge-proxy-1") && strings.Contains(c.Message, "RE2")
	}
	wait("both Envoys in sync", inSync)

	heavy := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "heavy", Namespace: "apps"}, Spec: gwv1.HTTPRouteSpec{
		CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "edge"}}},
		Rules: []gwv1.HTTPRouteRule{{
			Matches:     []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchRegularExpression), Value: ptr.To(heavyRegex)}}},
			BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: ptr.To[gwv1.PortNumber](80)}}}},
		}}}}
	breakAndFix := func(when string) {
		t.Helper()
		h := heavy.DeepCopy()
		if err := k8s.Create(ctx, h); err != nil {
			t.Fatal(err)
		}
		took := wait(when+": the Envoys' rejection on the Gateway", rejected)
		t.Logf("%s: route with the heavy regex created → ProxiesInSync False in %s: %s", when, took.Round(time.Millisecond), cond().Message)
		// The rejection is traced to the route (Envoy quotes its regex),
		// not to the others.
		eventually(t, 30*time.Second, when+": the rejection on the route's status", func() error {
			if c := routeCond("heavy"); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "rejected VHDS") {
				return fmt.Errorf("route heavy: %+v", c)
			}
			return nil
		})
		if c := routeCond("web"); c != nil {
			t.Errorf("%s: route web, which the Envoys accept, has %+v", when, c)
		}
		if err := k8s.Delete(ctx, h); err != nil {
			t.Fatal(err)
		}
		took = wait(when+": in sync again", inSync)
		t.Logf("%s: route deleted → ProxiesInSync True in %s", when, took.Round(time.Millisecond))
	}
	breakAndFix("Envoys on followers")

	// The leader dies without releasing its Lease.
	if err := syscall.Kill(-leader.proc.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-leader.proc.Exited()
	killed := time.Now()
	eventually(t, 30*time.Second, "a new leader", func() error {
		if h := holder(); h == leader.name || replicas[h] == nil {
			return fmt.Errorf("lease holder %q", h)
		}
		return nil
	})
	// Its Pod stays Running (as until the kubelet notices): the new
	// leader's fetches of it fail and are left out.
	t.Logf("leader %s killed; %s leads after %s", leader.name, holder(), time.Since(killed).Round(time.Millisecond))
	breakAndFix("after the leader was killed")

	// A follower crashes: the new leader's fetches of it fail and its
	// proxy is left out (in a cluster, that proxy reconnects to another
	// replica through the xDS Service); the condition keeps being written.
	var follower *replica
	for _, f := range followers {
		if f.name != holder() {
			follower = f
		}
	}
	if err := syscall.Kill(-follower.proc.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-follower.proc.Exited()
	took := wait("follower killed: the other Envoy in sync", func(c *metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue && c.Message == "1 proxy runs the current configuration."
	})
	t.Logf("follower %s killed → condition counts the proxies still connected in %s", follower.name, took.Round(time.Millisecond))
}
