package gatewayapi

import (
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/testenv/workload"
)

// Test fixtures: a GatewayClass "portico" of ours, builders for the other
// objects, and accessors for the result.

const testController = "portico.dev/gateway-controller"

var (
	t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
)

func ptr[T any](v T) *T { return &v }

func at(sec int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(sec) * time.Second)) }

// snapshot returns a snapshot holding our GatewayClass and the objects.
func snapshot(objs ...any) *resource.Snapshot {
	s := resource.New()
	s.GatewayClasses.Set("portico", &gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "portico", Generation: 1},
		Spec:       gwv1.GatewayClassSpec{ControllerName: testController},
	})
	for _, o := range objs {
		add(s, o)
	}
	return s.Build()
}

func add(s *resource.Snapshot, o any) {
	key := func(m metav1.ObjectMeta) resource.Key { return resource.Key{Namespace: m.Namespace, Name: m.Name} }
	switch v := o.(type) {
	case *gwv1.GatewayClass:
		s.GatewayClasses.Set(v.Name, v)
	case *gwv1.Gateway:
		s.Gateways.Set(key(v.ObjectMeta), v)
	case *gwv1.ListenerSet:
		s.ListenerSets.Set(key(v.ObjectMeta), v)
	case *gwv1.HTTPRoute:
		s.HTTPRoutes.Set(key(v.ObjectMeta), v)
	case *gwv1.GRPCRoute:
		s.GRPCRoutes.Set(key(v.ObjectMeta), v)
	case *gwv1.TLSRoute:
		s.TLSRoutes.Set(key(v.ObjectMeta), v)
	case *gwv1.TCPRoute:
		s.TCPRoutes.Set(key(v.ObjectMeta), v)
	case *gwv1.UDPRoute:
		s.UDPRoutes.Set(key(v.ObjectMeta), v)
	case *gwv1beta1.ReferenceGrant:
		s.ReferenceGrants.Set(key(v.ObjectMeta), v)
	case *corev1.Service:
		s.Services.Set(key(v.ObjectMeta), v)
	case *discoveryv1.EndpointSlice:
		s.EndpointSlices.Set(key(v.ObjectMeta), v)
	case *corev1.Secret:
		s.Secrets.Set(key(v.ObjectMeta), v)
	case *corev1.Namespace:
		s.Namespaces.Set(v.Name, v)
	case *corev1.ConfigMap:
		s.ConfigMaps.Set(key(v.ObjectMeta), v)
	case *certificatesv1.ClusterTrustBundle:
		s.ClusterTrustBundles.Set(v.Name, v)
	case *gwv1.BackendTLSPolicy:
		s.BackendTLSPolicies.Set(key(v.ObjectMeta), v)
	default:
		panic("unknown object")
	}
}

func translate(objs ...any) *Result {
	return Translate(snapshot(objs...), Options{ControllerName: testController})
}

func meta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 3, CreationTimestamp: at(0)}
}

func gateway(ns, name string, ls ...gwv1.Listener) *gwv1.Gateway {
	return &gwv1.Gateway{ObjectMeta: meta(ns, name), Spec: gwv1.GatewaySpec{GatewayClassName: "portico", Listeners: ls}}
}

func httpL(name string, port int32, host string) gwv1.Listener {
	l := gwv1.Listener{Name: gwv1.SectionName(name), Port: port, Protocol: gwv1.HTTPProtocolType}
	if host != "" {
		l.Hostname = ptr(gwv1.Hostname(host))
	}
	return l
}

func httpsL(name string, port int32, host string, secrets ...string) gwv1.Listener {
	l := httpL(name, port, host)
	l.Protocol = gwv1.HTTPSProtocolType
	l.TLS = &gwv1.ListenerTLSConfig{}
	for _, s := range secrets {
		l.TLS.CertificateRefs = append(l.TLS.CertificateRefs, gwv1.SecretObjectReference{Name: gwv1.ObjectName(s)})
	}
	return l
}

func allowAll(l gwv1.Listener) gwv1.Listener {
	all := gwv1.NamespacesFromAll
	l.AllowedRoutes = &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}}
	return l
}

func tlsSecret(ns, name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: []byte(workload.TestCertPEM), corev1.TLSPrivateKeyKey: []byte(workload.TestKeyPEM)},
	}
}

func service(ns, name string, ports ...int32) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "http", Port: p, Protocol: corev1.ProtocolTCP})
	}
	return svc
}

func slice(ns, svc, name string, port int32, addrs ...string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(port)}},
	}
	for _, a := range addrs {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
	}
	return es
}

func parent(name string) gwv1.ParentReference {
	return gwv1.ParentReference{Name: gwv1.ObjectName(name)}
}

func backend(name string, port int32) gwv1.HTTPBackendRef {
	return gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
		Name: gwv1.ObjectName(name), Port: ptr(port)}}}
}

func weighted(b gwv1.HTTPBackendRef, w int32) gwv1.HTTPBackendRef {
	b.Weight = &w
	return b
}

func httpRoute(ns, name string, parents []gwv1.ParentReference, hostnames []string, rules ...gwv1.HTTPRouteRule) *gwv1.HTTPRoute {
	r := &gwv1.HTTPRoute{ObjectMeta: meta(ns, name)}
	r.Spec.ParentRefs = parents
	for _, h := range hostnames {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gwv1.Hostname(h))
	}
	r.Spec.Rules = rules
	return r
}

func prefixMatch(p string) gwv1.HTTPRouteMatch {
	return gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchPathPrefix), Value: ptr(p)}}
}

func exactMatch(p string) gwv1.HTTPRouteMatch {
	return gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchExact), Value: ptr(p)}}
}

func regexMatch(p string) gwv1.HTTPRouteMatch {
	return gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchRegularExpression), Value: ptr(p)}}
}

func refGrant(ns, name, fromKind, fromNS, toKind string, toName *string) *gwv1beta1.ReferenceGrant {
	g := &gwv1beta1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	g.Spec.From = []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: gwv1.Kind(fromKind), Namespace: gwv1.Namespace(fromNS)}}
	to := gwv1.ReferenceGrantTo{Group: "", Kind: gwv1.Kind(toKind)}
	if toName != nil {
		to.Name = ptr(gwv1.ObjectName(*toName))
	}
	g.Spec.To = []gwv1.ReferenceGrantTo{to}
	return g
}

// status finds the status of an object in a result.
func status(t *testing.T, res *Result, kind resource.Kind, ns, name string) *Status {
	t.Helper()
	if s := res.StatusSet.Get(kind, ns, name); s != nil {
		return s
	}
	t.Fatalf("no status for %s %s/%s", kind, ns, name)
	return nil
}

func hasStatus(res *Result, kind resource.Kind, ns, name string) bool {
	return res.StatusSet.Get(kind, ns, name) != nil
}

// statusList returns the statuses of a result, in order.
func statusList(res *Result) []Status {
	var out []Status
	for _, s := range res.Statuses {
		out = append(out, s)
	}
	return out
}

func cond(t *testing.T, conds []metav1.Condition, typ string) metav1.Condition {
	t.Helper()
	for _, c := range conds {
		if c.Type == typ {
			return c
		}
	}
	t.Fatalf("no %s condition in %+v", typ, conds)
	return metav1.Condition{}
}

func hasCond(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return true
		}
	}
	return false
}

// wantCond checks status and reason of a condition.
func wantCond(t *testing.T, conds []metav1.Condition, typ string, st metav1.ConditionStatus, reason string) {
	t.Helper()
	c := cond(t, conds, typ)
	if c.Status != st || c.Reason != reason {
		t.Errorf("%s = %s/%s (%s), want %s/%s", typ, c.Status, c.Reason, c.Message, st, reason)
	}
}

func listenerStatus(t *testing.T, res *Result, ns, gw, name string) gwv1.ListenerStatus {
	t.Helper()
	for _, l := range status(t, res, resource.KindGateway, ns, gw).Gateway.Listeners {
		if string(l.Name) == name {
			return l
		}
	}
	t.Fatalf("no listener %s in Gateway %s/%s", name, ns, gw)
	return gwv1.ListenerStatus{}
}

// routeParent returns the conditions of the i-th parent of a route status.
func routeParent(t *testing.T, res *Result, kind resource.Kind, ns, name string, i int) gwv1.RouteParentStatus {
	t.Helper()
	st := status(t, res, kind, ns, name)
	if len(st.Route.Parents) <= i {
		t.Fatalf("%s %s/%s has %d parents, want > %d", kind, ns, name, len(st.Route.Parents), i)
	}
	return st.Route.Parents[i]
}

func irGateway(t *testing.T, res *Result, ns, name string) *ir.Gateway {
	t.Helper()
	for _, g := range res.Gateways {
		if g.Namespace == ns && g.Name == name {
			return g
		}
	}
	t.Fatalf("no IR for Gateway %s/%s", ns, name)
	return nil
}

func irListener(t *testing.T, g *ir.Gateway, name string) *ir.Listener {
	t.Helper()
	for _, l := range g.Listeners {
		if l.Name == name {
			return l
		}
	}
	t.Fatalf("no IR listener %s", name)
	return nil
}

// vhost returns a virtual host of the first filter chain of a listener
// whose route config has it.
func vhost(t *testing.T, l *ir.Listener, host string) *ir.VirtualHost {
	t.Helper()
	for _, fc := range l.FilterChains {
		for _, v := range fc.RouteConfig.VirtualHosts {
			if v.Name == host {
				return v
			}
		}
	}
	t.Fatalf("no virtual host %s in listener %s", host, l.Name)
	return nil
}

func routeNames(v *ir.VirtualHost) []string {
	var out []string
	for _, r := range v.Routes {
		out = append(out, r.Name)
	}
	return out
}

func irHasListener(g *ir.Gateway, name string) bool {
	for _, l := range g.Listeners {
		if l.Name == name {
			return true
		}
	}
	return false
}
