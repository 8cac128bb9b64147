package workload

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/proxyspec"
	"github.com/portico-dev/portico/internal/resource"
)

// Rich returns Snapshot(routes) with objects that exercise more of the
// translation: Namespaces with labels and a Gateway admitting routes by
// namespace selector, a ListenerSet, GRPCRoutes, a route with two parents,
// a cross-namespace backend with its ReferenceGrant, a second
// GatewayClass with a ProxyConfig, a Gateway with a ProxyConfig of its own,
// a listener certificate in another namespace with its ReferenceGrant, and
// the provisioned Deployments and Services of some Gateways, and
// BackendTLSPolicies with their CA sources (trust.go).
func Rich(routes int) *resource.Snapshot {
	s := Snapshot(routes)
	for i := 0; i < Namespaces; i++ {
		ns := fmt.Sprintf("team%d", i)
		s.Namespaces.Set(ns, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"tier": fmt.Sprint(i % 2)}}})
	}
	s.Namespaces.Set("infra", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "infra"}})
	sel := gwv1.NamespacesFromSelector
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "selective", Generation: 1, CreationTimestamp: metav1.NewTime(epoch)},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: "portico",
			Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, AllowedRoutes: &gwv1.AllowedRoutes{
				Namespaces: &gwv1.RouteNamespaces{From: &sel, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "1"}}},
			}}},
			AllowedListeners: &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: &sel,
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "0"}}}},
		},
	}
	s.Gateways.Set(key(gw.ObjectMeta), gw)
	s.ListenerSets.Set(resource.Key{Namespace: "team0", Name: "extra"}, listenerSet("team0", "extra", "selective", 8080))
	for i := 0; i < 4; i++ {
		addGRPCRoute(s, i, "selective")
	}
	// A route with two parents, one of them the selective Gateway.
	if r := s.HTTPRoutes.Value(resource.Key{Namespace: "team1", Name: "route1"}); r != nil {
		r.Spec.ParentRefs = append(r.Spec.ParentRefs, gwv1.ParentReference{Namespace: ptr(gwv1.Namespace("infra")), Name: "selective"})
	}
	// A backend in another namespace, allowed by a ReferenceGrant.
	if r := s.HTTPRoutes.Value(resource.Key{Namespace: "team2", Name: "route2"}); r != nil {
		r.Spec.Rules[1].BackendRefs[0].Namespace = ptr(gwv1.Namespace("team3"))
		r.Spec.Rules[1].BackendRefs[0].Name = "svc0"
		addService(s, "team3", "svc0")
		s.ReferenceGrants.Set(resource.Key{Namespace: "team3", Name: "from-team2"}, grant("team3", "from-team2", "team2"))
	}
	s.GatewayClasses.Set("configured", &gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "configured", Generation: 1},
		Spec: gwv1.GatewayClassSpec{ControllerName: ControllerName, ParametersRef: &gwv1.ParametersReference{
			Group: gwv1.Group(v1alpha1.GroupVersion.Group), Kind: v1alpha1.Kind, Name: "proxy", Namespace: ptr(gwv1.Namespace("infra")),
		}},
	})
	s.ProxyConfigs.Set(resource.Key{Namespace: "infra", Name: "proxy"}, &v1alpha1.ProxyConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "proxy"},
		Spec:       v1alpha1.ProxyConfigSpec{Replicas: ptr(int32(3))},
	})
	if g := s.Gateways.Value(resource.Key{Namespace: "infra", Name: "gw9"}); g != nil {
		g.Spec.GatewayClassName = "configured"
	}
	// A Gateway with a ProxyConfig of its own.
	if g := s.Gateways.Value(resource.Key{Namespace: "infra", Name: "gw8"}); g != nil {
		g.Spec.Infrastructure = &gwv1.GatewayInfrastructure{ParametersRef: &gwv1.LocalParametersReference{
			Group: gwv1.Group(v1alpha1.GroupVersion.Group), Kind: v1alpha1.Kind, Name: "gw8-proxy",
		}}
		s.ProxyConfigs.Set(resource.Key{Namespace: "infra", Name: "gw8-proxy"}, gatewayProxy(2))
	}
	// A listener certificate in another namespace, allowed by a
	// ReferenceGrant.
	if g := s.Gateways.Value(resource.Key{Namespace: "infra", Name: "gw3"}); g != nil {
		g.Spec.Listeners[1].TLS.CertificateRefs = []gwv1.SecretObjectReference{{Namespace: ptr(gwv1.Namespace("certs")), Name: "tls"}}
		s.Namespaces.Set("certs", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "certs"}})
		s.Secrets.Set(certsSecret, crossSecret())
		s.ReferenceGrants.Set(certsGrant, secretGrant())
	}
	addL4(s)
	addTrust(s)
	// The provisioned proxies of some Gateways (read when Portico
	// provisions them, Options.Infrastructure).
	for g := 0; g < provisioned; g++ {
		s.Deployments.Set(proxyKey(g), proxyDeployment(g, fmt.Sprintf("gw%d", g), 1))
		s.Services.Set(proxyKey(g), proxyService(g, fmt.Sprintf("192.0.2.%d", g+1)))
	}
	return s.Build()
}

// provisioned is the number of Gateways (gw0...) of Rich whose proxies
// are provisioned.
const provisioned = 4

var (
	certsSecret = resource.Key{Namespace: "certs", Name: "tls"}
	certsGrant  = resource.Key{Namespace: "certs", Name: "gateways"}
)

func crossSecret() *corev1.Secret {
	sec := tlsSecret()
	sec.Namespace = certsSecret.Namespace
	return sec
}

// secretGrant lets Gateways of namespace infra use the Secrets of
// namespace certs.
func secretGrant() *gwv1beta1.ReferenceGrant {
	return &gwv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: certsGrant.Namespace, Name: certsGrant.Name},
		Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "Gateway", Namespace: "infra"}},
			To:   []gwv1.ReferenceGrantTo{{Kind: "Secret"}},
		},
	}
}

func gatewayProxy(replicas int32) *v1alpha1.ProxyConfig {
	return &v1alpha1.ProxyConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw8-proxy"},
		Spec: v1alpha1.ProxyConfigSpec{Replicas: ptr(replicas)}}
}

func proxyKey(g int) resource.Key {
	return resource.Key{Namespace: "infra", Name: proxyspec.Name(fmt.Sprintf("gw%d", g))}
}

// proxyDeployment is the Envoy Deployment of Gateway gw<g>, controlled by
// Gateway owner, with available replicas.
func proxyDeployment(g int, owner string, available int32) *appsv1.Deployment {
	k := proxyKey(g)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name, Generation: 1,
			Labels: proxyspec.Labels(k.Namespace, owner), OwnerReferences: gatewayOwner(owner)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, AvailableReplicas: available},
	}
}

// proxyService is the Service of Gateway gw<g>'s proxies, with
// load-balancer address addr (none when empty).
func proxyService(g int, addr string) *corev1.Service {
	k := proxyKey(g)
	gw := fmt.Sprintf("gw%d", g)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name,
			Labels: proxyspec.Labels(k.Namespace, gw), OwnerReferences: gatewayOwner(gw)},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: fmt.Sprintf("10.96.0.%d", g+1),
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	if addr != "" {
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: addr}}
	}
	return svc
}

func gatewayOwner(gw string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway", Name: gw, UID: "uid-" + types.UID(gw), Controller: ptr(true)}}
}

func key(m metav1.ObjectMeta) resource.Key { return resource.Key{Namespace: m.Namespace, Name: m.Name} }

func listenerSet(ns, name, gw string, port int32) *gwv1.ListenerSet {
	all := gwv1.NamespacesFromAll
	return &gwv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1, CreationTimestamp: metav1.NewTime(epoch)},
		Spec: gwv1.ListenerSetSpec{
			ParentRef: gwv1.ParentGatewayReference{Namespace: ptr(gwv1.Namespace("infra")), Name: gwv1.ObjectName(gw)},
			Listeners: []gwv1.ListenerEntry{{Name: "extra", Port: gwv1.PortNumber(port), Protocol: gwv1.HTTPProtocolType,
				AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}}}},
		},
	}
}

func grant(ns, name, from string) *gwv1beta1.ReferenceGrant {
	return &gwv1beta1.ReferenceGrant{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: gwv1.ReferenceGrantSpec{
			From: []gwv1.ReferenceGrantFrom{{Group: gwv1.GroupName, Kind: "HTTPRoute", Namespace: gwv1.Namespace(from)}},
			To:   []gwv1.ReferenceGrantTo{{Kind: "Service"}},
		},
	}
}

func addGRPCRoute(s *resource.Snapshot, i int, gw string) {
	ns := fmt.Sprintf("team%d", i%Namespaces)
	svc := fmt.Sprintf("grpc%d", i)
	addService(s, ns, svc)
	port := gwv1.PortNumber(8080)
	r := &gwv1.GRPCRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("grpc%d", i), Generation: 1,
			CreationTimestamp: metav1.NewTime(epoch.Add(-time.Duration(i) * time.Second))},
		Spec: gwv1.GRPCRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Namespace: ptr(gwv1.Namespace("infra")), Name: gwv1.ObjectName(gw)}}},
			Rules: []gwv1.GRPCRouteRule{{
				Matches:     []gwv1.GRPCRouteMatch{{Method: &gwv1.GRPCMethodMatch{Service: ptr(fmt.Sprintf("pkg.Svc%d", i))}}},
				BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(svc), Port: &port}}}},
			}},
		},
	}
	s.GRPCRoutes.Set(key(r.ObjectMeta), r)
}

// Copy returns a copy of s that shares its objects and maps (which copy
// what they change, see resource.Map), so that objects can be added,
// replaced or removed without changing s. Call Build on the copy when
// done.
func Copy(s *resource.Snapshot) *resource.Snapshot {
	c := resource.New()
	c.GatewayClasses = s.GatewayClasses.Clone()
	c.Gateways = s.Gateways.Clone()
	c.ListenerSets = s.ListenerSets.Clone()
	c.HTTPRoutes = s.HTTPRoutes.Clone()
	c.GRPCRoutes = s.GRPCRoutes.Clone()
	c.TLSRoutes = s.TLSRoutes.Clone()
	c.TCPRoutes = s.TCPRoutes.Clone()
	c.UDPRoutes = s.UDPRoutes.Clone()
	c.ReferenceGrants = s.ReferenceGrants.Clone()
	c.Services = s.Services.Clone()
	c.EndpointSlices = s.EndpointSlices.Clone()
	c.Secrets = s.Secrets.Clone()
	c.Namespaces = s.Namespaces.Clone()
	c.ProxyConfigs = s.ProxyConfigs.Clone()
	c.Deployments = s.Deployments.Clone()
	c.ConfigMaps = s.ConfigMaps.Clone()
	c.ClusterTrustBundles = s.ClusterTrustBundles.Clone()
	c.BackendTLSPolicies = s.BackendTLSPolicies.Clone()
	return c
}

// ChangeRoute returns a snapshot made from s (with Edit, as a provider
// would) in which HTTPRoute "route<i>" (as made by Snapshot) has another
// path prefix, and the key of that route. Its Changes list that route.
func ChangeRoute(s *resource.Snapshot, i int, version int) (*resource.Snapshot, resource.Key) {
	k := resource.Key{Namespace: fmt.Sprintf("team%d", i%Namespaces), Name: fmt.Sprintf("route%d", i)}
	r := s.HTTPRoutes.Value(k).DeepCopy()
	p := fmt.Sprintf("/r%d/v%d", i, version)
	r.Spec.Rules[0].Matches[0].Path.Value = &p
	r.Generation++
	return edit(s, resource.KindHTTPRoute, k, r), k
}

// ChangeEndpoints returns a snapshot made from s (with Edit) in which the
// EndpointSlice of Service "svc<i>" of namespace "team<ns>" has other
// addresses, and the key of that slice. Its Changes list that slice.
func ChangeEndpoints(s *resource.Snapshot, ns, i, version int) (*resource.Snapshot, resource.Key) {
	k := resource.Key{Namespace: fmt.Sprintf("team%d", ns%Namespaces), Name: fmt.Sprintf("svc%d-1", i)}
	es := s.EndpointSlices.Value(k).DeepCopy()
	for e := range es.Endpoints {
		es.Endpoints[e].Addresses = []string{fmt.Sprintf("10.200.%d.%d", version%256, e)}
	}
	return edit(s, resource.KindEndpointSlice, k, es), k
}

// RouteToService returns a snapshot made from s (with Edit) in which the
// second rule of route i goes to Service svc of the route's namespace,
// created with an EndpointSlice of one endpoint when s has none, and the
// route's key. Its Changes list what it set.
func RouteToService(s *resource.Snapshot, i int, svc string) (*resource.Snapshot, resource.Key) {
	ns := fmt.Sprintf("team%d", i%Namespaces)
	k := resource.Key{Namespace: ns, Name: fmt.Sprintf("route%d", i)}
	r := s.HTTPRoutes.Value(k).DeepCopy()
	r.Spec.Rules[1].BackendRefs[0].Name = gwv1.ObjectName(svc)
	r.Generation++
	e := s.Edit()
	changes := resource.NewChanges(s.ID())
	set := func(kind resource.Kind, key resource.Key, obj any) {
		if err := e.Set(kind, key, obj); err != nil {
			panic(err)
		}
		changes.Add(kind, key)
	}
	if sk := (resource.Key{Namespace: ns, Name: svc}); s.Services.Value(sk) == nil {
		set(resource.KindService, sk, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}},
		})
		set(resource.KindEndpointSlice, resource.Key{Namespace: ns, Name: svc + "-1"}, &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.250.0.1"},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
		})
	}
	set(resource.KindHTTPRoute, k, r)
	c := e.Snapshot()
	c.Changes = changes
	return c, k
}

// edit returns s with one object set, and Changes listing it.
func edit(s *resource.Snapshot, kind resource.Kind, k resource.Key, obj any) *resource.Snapshot {
	e := s.Edit()
	if err := e.Set(kind, k, obj); err != nil {
		panic(err)
	}
	c := e.Snapshot()
	c.Changes = resource.NewChanges(s.ID())
	c.Changes.Add(kind, k)
	return c
}

// Change applies one random change to a copy of s (made by Rich) and
// returns the copy, built, and a description of the change. Changes touch
// every kind of object: routes (paths, hostnames, parents, backends,
// deletion, creation), Gateways, GatewayClasses, ListenerSets, Services,
// EndpointSlices, Secrets (the Gateways' own and one in another
// namespace), Namespaces, ReferenceGrants (of backends and of
// certificates), ProxyConfigs (of a class and of a Gateway), the
// Deployments and Services of provisioned proxies, and the backend TLS
// objects (BackendTLSPolicies, CA ConfigMaps, ClusterTrustBundles).
func Change(s *resource.Snapshot, rng *rand.Rand) (*resource.Snapshot, string) {
	c := Copy(s)
	desc := changeOne(c, rng)
	return c.Build(), desc
}

func pick[K comparable, V any](rng *rand.Rand, m resource.Map[K, V], less func(a, b K) int) (K, V, bool) {
	var zero K
	if m.Len() == 0 {
		var v V
		return zero, v, false
	}
	keys := slices.SortedFunc(m.Keys(), less)
	k := keys[rng.IntN(len(keys))]
	return k, m.Value(k), true
}

// changeKinds are the kinds of change Change makes, each with its weight:
// Change draws one number below the sum of the weights and makes the
// change whose range (in this order) holds it. The order and the weights
// are part of the random sequence of the differential tests: changing
// them (or adding a kind) makes each seed's step numbers name other
// changes than before.
var changeKinds = []struct {
	weight int
	change func(c *resource.Snapshot, rng *rand.Rand) string
}{
	{14, changeHTTPRoute},
	{2, changeGRPCRoute},
	{3, changeGateway},
	{2, changeListenerSet},
	{3, changeService},
	{6, changeEndpointSlice},
	{2, changeSecret},
	{2, changeNamespace},
	{2, changeReferenceGrant},
	{2, changeGatewayClass},
	{2, changeProxyConfig},
	{3, changeProvisionedProxy},
	{3, changeL4},
	{3, changeTrust},
}

// changeWeights is the sum of the weights of changeKinds.
var changeWeights = func() int {
	sum := 0
	for _, k := range changeKinds {
		sum += k.weight
	}
	return sum
}()

// changeOne makes one random change of c and describes it.
func changeOne(c *resource.Snapshot, rng *rand.Rand) string {
	n := rng.IntN(changeWeights)
	for _, k := range changeKinds {
		if n < k.weight {
			return k.change(c, rng)
		}
		n -= k.weight
	}
	panic("unreachable: n is below the sum of the weights")
}

// parentNames are the Gateways of infra that changes attach routes and
// ListenerSets to: some of Snapshot, one of the class "configured", the
// selective one of Rich, and one that does not exist.
var parentNames = []string{"gw0", "gw1", "gw2", "gw9", "selective", "missing"}

// randomParent is a parentRef to one of parentNames.
func randomParent(rng *rand.Rand) gwv1.ObjectName {
	return gwv1.ObjectName(parentNames[rng.IntN(len(parentNames))])
}

// changeHTTPRoute changes an HTTPRoute: its path, hostnames, parents or
// backend, a redirect or no header match; or deletes it, or creates a copy
// of it under a new name.
func changeHTTPRoute(c *resource.Snapshot, rng *rand.Rand) string {
	k, r, ok := pick(rng, c.HTTPRoutes, resource.CompareKeys)
	if !ok {
		return "no route"
	}
	orig := r
	r = r.DeepCopy()
	r.Generation++
	c.HTTPRoutes.Set(k, r)
	switch rng.IntN(9) {
	case 0:
		p := fmt.Sprintf("/changed/%d", rng.IntN(1000))
		r.Spec.Rules[0].Matches[0].Path.Value = &p
		return "route path " + k.String()
	case 1:
		hosts := [][]gwv1.Hostname{nil, {"app1.gw0.example.com"}, {"*.gw1.example.com"}, {"other.example.org"}, {"app2.gw2.example.com", "app3.gw2.example.com"}}
		r.Spec.Hostnames = hosts[rng.IntN(len(hosts))]
		return "route hostnames " + k.String()
	case 2:
		r.Spec.ParentRefs = []gwv1.ParentReference{{Namespace: ptr(gwv1.Namespace("infra")), Name: randomParent(rng)}}
		return "route parent " + k.String()
	case 3:
		sec := gwv1.SectionName([]string{"http", "https", "nope"}[rng.IntN(3)])
		r.Spec.ParentRefs = append(r.Spec.ParentRefs, gwv1.ParentReference{Namespace: ptr(gwv1.Namespace("infra")),
			Name: randomParent(rng), SectionName: &sec})
		return "route second parent " + k.String()
	case 4:
		names := []string{"svc1", "svc2", "nope"}
		r.Spec.Rules[1].BackendRefs[0].Name = gwv1.ObjectName(names[rng.IntN(len(names))])
		if rng.IntN(2) == 0 {
			r.Spec.Rules[1].BackendRefs[0].Namespace = ptr(gwv1.Namespace(fmt.Sprintf("team%d", rng.IntN(4))))
		}
		return "route backend " + k.String()
	case 5:
		c.HTTPRoutes.Delete(k)
		return "route deleted " + k.String()
	case 6:
		r.Spec.Rules[0].Filters = append(r.Spec.Rules[0].Filters, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestRedirect,
			RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Hostname: ptr(gwv1.PreciseHostname("moved.example.com"))}})
		r.Spec.Rules[0].BackendRefs = nil
		return "route redirect " + k.String()
	case 7:
		nk := resource.Key{Namespace: k.Namespace, Name: fmt.Sprintf("new%d", rng.IntN(1000))}
		r.Name = nk.Name
		r.CreationTimestamp = metav1.NewTime(epoch.Add(-time.Duration(rng.IntN(100)) * time.Second))
		c.HTTPRoutes.Set(k, orig) // unchanged: only the copy is new
		c.HTTPRoutes.Set(nk, r)
		return "route created " + nk.String()
	default:
		r.Spec.Rules[0].Matches[0].Headers = nil
		return "route headers " + k.String()
	}
}

// changeGRPCRoute deletes a GRPCRoute or gives it another parent and
// hostname.
func changeGRPCRoute(c *resource.Snapshot, rng *rand.Rand) string {
	k, r, ok := pick(rng, c.GRPCRoutes, resource.CompareKeys)
	if !ok {
		return "no grpc route"
	}
	if rng.IntN(4) == 0 {
		c.GRPCRoutes.Delete(k)
		return "grpc route deleted " + k.String()
	}
	r = r.DeepCopy()
	r.Spec.ParentRefs = []gwv1.ParentReference{{Namespace: ptr(gwv1.Namespace("infra")), Name: randomParent(rng)}}
	r.Spec.Hostnames = []gwv1.Hostname{gwv1.Hostname(fmt.Sprintf("app%d.gw%d.example.com", rng.IntN(3), rng.IntN(3)))}
	c.GRPCRoutes.Set(k, r)
	return "grpc route " + k.String()
}

// changeGateway changes a Gateway's listeners (a hostname, the second
// removed, the routes the first allows), its class or the ListenerSets it
// allows; or deletes it.
func changeGateway(c *resource.Snapshot, rng *rand.Rand) string {
	k, g, ok := pick(rng, c.Gateways, resource.CompareKeys)
	if !ok {
		return "no gateway"
	}
	g = g.DeepCopy()
	g.Generation++
	c.Gateways.Set(k, g)
	switch rng.IntN(6) {
	case 0:
		if len(g.Spec.Listeners) > 1 {
			h := gwv1.Hostname(fmt.Sprintf("*.app%d.gw0.example.com", rng.IntN(3)))
			g.Spec.Listeners[1].Hostname = &h
		}
		return "gateway hostname " + k.String()
	case 1:
		g.Spec.Listeners = g.Spec.Listeners[:1]
		return "gateway listener removed " + k.String()
	case 2:
		same := gwv1.NamespacesFromSame
		g.Spec.Listeners[0].AllowedRoutes = &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &same}}
		return "gateway allowed routes " + k.String()
	case 3:
		c.Gateways.Delete(k)
		return "gateway deleted " + k.String()
	case 4:
		g.Spec.GatewayClassName = gwv1.ObjectName([]string{"portico", "configured", "other"}[rng.IntN(3)])
		return "gateway class " + k.String()
	default:
		all := gwv1.NamespacesFromAll
		g.Spec.AllowedListeners = &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: &all}}
		return "gateway allows listener sets " + k.String()
	}
}

// changeListenerSet deletes, creates or replaces one of a few
// ListenerSets.
func changeListenerSet(c *resource.Snapshot, rng *rand.Rand) string {
	name := fmt.Sprintf("ls%d", rng.IntN(3))
	k := resource.Key{Namespace: fmt.Sprintf("team%d", rng.IntN(3)), Name: name}
	if _, ok := c.ListenerSets.Get(k); ok && rng.IntN(2) == 0 {
		c.ListenerSets.Delete(k)
		return "listener set deleted " + k.String()
	}
	c.ListenerSets.Set(k, listenerSet(k.Namespace, k.Name, parentNames[rng.IntN(len(parentNames))], int32(8081+rng.IntN(3))))
	return "listener set " + k.String()
}

// changeService deletes a Service or changes its port or appProtocol.
func changeService(c *resource.Snapshot, rng *rand.Rand) string {
	k, svc, ok := pick(rng, c.Services, resource.CompareKeys)
	if !ok {
		return "no service"
	}
	switch rng.IntN(3) {
	case 0:
		c.Services.Delete(k)
		return "service deleted " + k.String()
	case 1:
		svc = svc.DeepCopy()
		svc.Spec.Ports[0].Port = 8081
		c.Services.Set(k, svc)
		return "service port " + k.String()
	default:
		svc = svc.DeepCopy()
		svc.Spec.Ports[0].AppProtocol = ptr("kubernetes.io/h2c")
		c.Services.Set(k, svc)
		return "service appProtocol " + k.String()
	}
}

// changeEndpointSlice deletes an EndpointSlice, makes an endpoint not
// ready, changes an address, or adds a second slice of the same Service.
func changeEndpointSlice(c *resource.Snapshot, rng *rand.Rand) string {
	k, es, ok := pick(rng, c.EndpointSlices, resource.CompareKeys)
	if !ok {
		return "no slice"
	}
	switch rng.IntN(4) {
	case 0:
		c.EndpointSlices.Delete(k)
		return "slice deleted " + k.String()
	case 1:
		es = es.DeepCopy()
		es.Endpoints[0].Conditions.Ready = ptr(false)
		c.EndpointSlices.Set(k, es)
		return "slice not ready " + k.String()
	case 2:
		es2 := es.DeepCopy()
		es2.Name += "-2"
		es2.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{fmt.Sprintf("10.250.0.%d", rng.IntN(250))}}}
		c.EndpointSlices.Set(key(es2.ObjectMeta), es2)
		return "slice added " + key(es2.ObjectMeta).String()
	default:
		es = es.DeepCopy()
		es.Endpoints[len(es.Endpoints)-1].Addresses = []string{fmt.Sprintf("10.251.%d.%d", rng.IntN(250), rng.IntN(250))}
		c.EndpointSlices.Set(k, es)
		return "slice address " + k.String()
	}
}

// changeSecret restores, deletes or spoils a certificate Secret: the
// Gateways' own, or the one in namespace certs.
func changeSecret(c *resource.Snapshot, rng *rand.Rand) string {
	k, fresh := resource.Key{Namespace: "infra", Name: "tls"}, tlsSecret
	if rng.IntN(3) == 0 {
		k, fresh = certsSecret, crossSecret
	}
	switch sec := c.Secrets.Value(k); {
	case sec == nil:
		c.Secrets.Set(k, fresh())
		return "secret restored " + k.String()
	case rng.IntN(2) == 0:
		c.Secrets.Delete(k)
		return "secret deleted " + k.String()
	default:
		sec = sec.DeepCopy()
		sec.Data[corev1.TLSCertKey] = []byte("garbage")
		c.Secrets.Set(k, sec)
		return "secret invalid " + k.String()
	}
}

// changeNamespace gives a team namespace other labels.
func changeNamespace(c *resource.Snapshot, rng *rand.Rand) string {
	name := fmt.Sprintf("team%d", rng.IntN(4))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"tier": fmt.Sprint(rng.IntN(3))}}}
	c.Namespaces.Set(name, ns)
	return "namespace labels " + name
}

// changeReferenceGrant deletes or creates a ReferenceGrant: the one of the
// certificate in namespace certs, or one of a team namespace's backends.
func changeReferenceGrant(c *resource.Snapshot, rng *rand.Rand) string {
	if rng.IntN(4) == 0 {
		if _, ok := c.ReferenceGrants.Get(certsGrant); ok {
			c.ReferenceGrants.Delete(certsGrant)
			return "secret grant deleted"
		}
		c.ReferenceGrants.Set(certsGrant, secretGrant())
		return "secret grant created"
	}
	k := resource.Key{Namespace: fmt.Sprintf("team%d", rng.IntN(4)), Name: "grant"}
	if _, ok := c.ReferenceGrants.Get(k); ok {
		c.ReferenceGrants.Delete(k)
		return "grant deleted " + k.String()
	}
	c.ReferenceGrants.Set(k, grant(k.Namespace, k.Name, fmt.Sprintf("team%d", rng.IntN(4))))
	return "grant created " + k.String()
}

// changeGatewayClass hands the class "portico" to another controller, or
// back to ours (a new generation).
func changeGatewayClass(c *resource.Snapshot, rng *rand.Rand) string {
	gc := c.GatewayClasses.Value("portico").DeepCopy()
	if gc.Spec.ControllerName == ControllerName && rng.IntN(3) == 0 {
		gc.Spec.ControllerName = "example.com/other"
	} else {
		gc.Spec.ControllerName = ControllerName
		gc.Generation++
	}
	c.GatewayClasses.Set("portico", gc)
	return "gateway class"
}

// changeProxyConfig deletes or replaces a ProxyConfig: the class's, or
// Gateway gw8's own.
func changeProxyConfig(c *resource.Snapshot, rng *rand.Rand) string {
	if rng.IntN(2) == 0 {
		k := resource.Key{Namespace: "infra", Name: "gw8-proxy"}
		if _, ok := c.ProxyConfigs.Get(k); ok && rng.IntN(3) == 0 {
			c.ProxyConfigs.Delete(k)
			return "gateway proxy config deleted"
		}
		c.ProxyConfigs.Set(k, gatewayProxy(int32(rng.IntN(5))))
		return "gateway proxy config"
	}
	k := resource.Key{Namespace: "infra", Name: "proxy"}
	if _, ok := c.ProxyConfigs.Get(k); ok && rng.IntN(2) == 0 {
		c.ProxyConfigs.Delete(k)
		return "proxy config deleted"
	}
	c.ProxyConfigs.Set(k, &v1alpha1.ProxyConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "proxy"},
		Spec: v1alpha1.ProxyConfigSpec{Replicas: ptr(int32(rng.IntN(5)))}})
	return "proxy config"
}

// changeProvisionedProxy changes the Deployment (its availability, its
// owner, deleted or restored) or the Service (its address, deleted or
// restored) of a provisioned proxy.
func changeProvisionedProxy(c *resource.Snapshot, rng *rand.Rand) string {
	g := rng.IntN(provisioned)
	k := proxyKey(g)
	switch rng.IntN(5) {
	case 0:
		c.Deployments.Set(k, proxyDeployment(g, fmt.Sprintf("gw%d", g), int32(rng.IntN(2))))
		return "proxy deployment availability " + k.String()
	case 1:
		if _, ok := c.Deployments.Get(k); ok {
			c.Deployments.Delete(k)
			return "proxy deployment deleted " + k.String()
		}
		c.Deployments.Set(k, proxyDeployment(g, fmt.Sprintf("gw%d", g), 1))
		return "proxy deployment restored " + k.String()
	case 2:
		c.Deployments.Set(k, proxyDeployment(g, "someone-else", 1))
		return "proxy deployment of another Gateway " + k.String()
	case 3:
		addr := ""
		if rng.IntN(3) != 0 {
			addr = fmt.Sprintf("192.0.2.%d", 10+rng.IntN(200))
		}
		c.Services.Set(k, proxyService(g, addr))
		return "proxy service address " + k.String()
	default:
		if _, ok := c.Services.Get(k); ok {
			c.Services.Delete(k)
			return "proxy service deleted " + k.String()
		}
		c.Services.Set(k, proxyService(g, fmt.Sprintf("192.0.2.%d", g+1)))
		return "proxy service restored " + k.String()
	}
}
