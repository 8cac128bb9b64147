// Package workload is test support: it generates synthetic, valid input
// snapshots of any size for benchmarks (Gateways with HTTP and HTTPS
// listeners, HTTPRoutes spread over namespaces and hostnames, and their
// Services and EndpointSlices: Snapshot, WithTCPRoutes), richer ones for
// the differential tests (Rich), and the edits both apply to them:
// ChangeRoute, ChangeEndpoints, RouteToService, and Change, one seeded
// random edit of any kind of object. The output depends only on the
// arguments (and, for Change, on the random source's sequence).
//
// Only tests and the benchmark suite (test/bench) import it; no product
// package does.
package workload

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/resource"
)

// ControllerName is the controllerName of the generated GatewayClass.
const ControllerName = "portico.dev/gateway-controller"

// Shape of the generated input.
const (
	Gateways          = 10 // Gateways, round-robin over routes
	Namespaces        = 20 // namespaces holding routes and Services
	HostsPerGateway   = 50 // hostnames per Gateway
	RoutesPerService  = 5  // routes sharing one Service
	EndpointsPerSlice = 3
)

// TestCertPEM and TestKeyPEM are a self-signed ECDSA certificate for
// example.com and *.example.com, valid 2024-2124. For tests only.
const (
	TestCertPEM = `-----BEGIN CERTIFICATE-----
MIIBajCCARGgAwIBAgIBATAKBggqhkjOPQQDAjAWMRQwEgYDVQQDEwtleGFtcGxl
LmNvbTAgFw0yNDAxMDEwMDAwMDBaGA8yMTI0MDEwMTAwMDAwMFowFjEUMBIGA1UE
AxMLZXhhbXBsZS5jb20wWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAATL3y1l4YVi
IrYI0EugWrSYIzcUf4s/V/pgPZokLAG7xMey34o30F27vQhNnKD9xyFP5sOS80JL
f8lrPfL6qmyyo04wTDAOBgNVHQ8BAf8EBAMCB4AwEwYDVR0lBAwwCgYIKwYBBQUH
AwEwJQYDVR0RBB4wHIILZXhhbXBsZS5jb22CDSouZXhhbXBsZS5jb20wCgYIKoZI
zj0EAwIDRwAwRAIgP7/5Qeh0eL5qHPln68CWh/HlNbZYdGTQFVfDY8dQjvMCIEu6
FiBZdMwh5sMo1YKrEVXA7fGdQiFiV3y4i9WsnGAf
-----END CERTIFICATE-----
`
	TestKeyPEM = `-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIItcICCyHheYG77Zt4Kc/EaIecKY2BAJ9GP+xHOL/3GVoAoGCCqGSM49
AwEHoUQDQgAEy98tZeGFYiK2CNBLoFq0mCM3FH+LP1f6YD2aJCwBu8THst+KN9Bd
u70ITZyg/cchT+bDkvNCS3/Jaz3y+qpssg==
-----END EC PRIVATE KEY-----
`
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Snapshot returns a built snapshot with the given number of HTTPRoutes
// spread over Gateways (each with an HTTP listener on port 80 and an HTTPS
// listener on 443 for *.gw<N>.example.com), namespaces and hostnames. Every
// route has two rules (a prefix match with a header match, and an exact
// match with a query parameter match) forwarding to a Service with ready
// endpoints; every fifth route also uses a request header modifier and a
// weighted second backend.
func Snapshot(routes int) *resource.Snapshot { return snapshot(routes, HostsPerGateway) }

// OneHostname is Snapshot with every route of a Gateway on one hostname
// (app0.gw<N>.example.com): the Gateway's routes share one virtual host.
func OneHostname(routes int) *resource.Snapshot { return snapshot(routes, 1) }

func snapshot(routes, hostsPerGateway int) *resource.Snapshot {
	s := resource.New()
	s.GatewayClasses.Set("portico", &gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "portico", Generation: 1},
		Spec:       gwv1.GatewayClassSpec{ControllerName: ControllerName},
	})
	all := gwv1.NamespacesFromAll
	s.Secrets.Set(resource.Key{Namespace: "infra", Name: "tls"}, tlsSecret())
	for g := 0; g < Gateways; g++ {
		host := gwv1.Hostname(fmt.Sprintf("*.gw%d.example.com", g))
		allowed := &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}}
		gw := &gwv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: fmt.Sprintf("gw%d", g), Generation: 1,
				CreationTimestamp: metav1.NewTime(epoch)},
			Spec: gwv1.GatewaySpec{
				GatewayClassName: "portico",
				Listeners: []gwv1.Listener{
					{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, AllowedRoutes: allowed},
					{Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: &host, AllowedRoutes: allowed,
						TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "tls"}}}},
				},
			},
		}
		s.Gateways.Set(resource.Key{Namespace: gw.Namespace, Name: gw.Name}, gw)
	}
	for i := 0; i < routes; i++ {
		addRoute(s, i, hostsPerGateway)
	}
	return s.Build()
}

func addRoute(s *resource.Snapshot, i, hostsPerGateway int) {
	ns := fmt.Sprintf("team%d", i%Namespaces)
	g := i % Gateways
	svc := fmt.Sprintf("svc%d", i/RoutesPerService)
	addService(s, ns, svc)
	port := gwv1.PortNumber(8080)
	exact := gwv1.PathMatchExact
	prefix, health := fmt.Sprintf("/r%d/api", i), fmt.Sprintf("/r%d/health", i)
	rule0 := gwv1.HTTPRouteRule{
		Matches: []gwv1.HTTPRouteMatch{{
			Path:    &gwv1.HTTPPathMatch{Value: &prefix},
			Headers: []gwv1.HTTPHeaderMatch{{Name: "x-tenant", Value: ns}},
		}},
		BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(svc), Port: &port}}}},
	}
	if i%5 == 0 {
		other := fmt.Sprintf("svc%d", i/RoutesPerService+1)
		addService(s, ns, other)
		w1, w2 := int32(90), int32(10)
		rule0.BackendRefs[0].Weight = &w1
		rule0.BackendRefs = append(rule0.BackendRefs, gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{
			BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(other), Port: &port}, Weight: &w2}})
		rule0.Filters = []gwv1.HTTPRouteFilter{{
			Type:                  gwv1.HTTPRouteFilterRequestHeaderModifier,
			RequestHeaderModifier: &gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{{Name: "x-route", Value: fmt.Sprint(i)}}},
		}}
	}
	rule1 := gwv1.HTTPRouteRule{
		Matches: []gwv1.HTTPRouteMatch{{
			Path:        &gwv1.HTTPPathMatch{Type: &exact, Value: &health},
			QueryParams: []gwv1.HTTPQueryParamMatch{{Name: "probe", Value: "1"}},
		}},
		BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(svc), Port: &port}}}},
	}
	r := &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("route%d", i), Generation: 1,
			CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(i) * time.Second))},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{
				Namespace: ptr(gwv1.Namespace("infra")), Name: gwv1.ObjectName(fmt.Sprintf("gw%d", g)),
			}}},
			Hostnames: []gwv1.Hostname{gwv1.Hostname(fmt.Sprintf("app%d.gw%d.example.com", (i/Gateways)%hostsPerGateway, g))},
			Rules:     []gwv1.HTTPRouteRule{rule0, rule1},
		},
	}
	s.HTTPRoutes.Set(resource.Key{Namespace: ns, Name: r.Name}, r)
}

func addService(s *resource.Snapshot, ns, name string) {
	key := resource.Key{Namespace: ns, Name: name}
	if s.Services.Value(key) != nil {
		return
	}
	s.Services.Set(key, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}},
	})
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(8080))}},
	}
	base := s.EndpointSlices.Len()
	for e := 0; e < EndpointsPerSlice; e++ {
		n := base*EndpointsPerSlice + e
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", n>>16&255, n>>8&255, n&255)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)},
		})
	}
	s.EndpointSlices.Set(resource.Key{Namespace: ns, Name: es.Name}, es)
}

func tlsSecret() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "tls"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: []byte(TestCertPEM), corev1.TLSPrivateKeyKey: []byte(TestKeyPEM)},
	}
}

func ptr[T any](v T) *T { return &v }
