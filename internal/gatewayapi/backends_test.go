package gatewayapi

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/resource"
)

// oneRoute translates a route with one rule on a plain HTTP Gateway and
// returns the result and the IR route.
func oneRoute(t *testing.T, rule gwv1.HTTPRouteRule, objs ...any) (*Result, *ir.Route) {
	t.Helper()
	r := httpRoute("apps", "r", []gwv1.ParentReference{{Name: "gw", Namespace: ptr(gwv1.Namespace("infra"))}}, nil, rule)
	res := translate(append([]any{gateway("infra", "gw", allowAll(httpL("http", 80, ""))), r}, objs...)...)
	g := irGateway(t, res, "infra", "gw")
	v := vhost(t, irListener(t, g, "http-80"), "*")
	if len(v.Routes) != 1 {
		t.Fatalf("routes = %v", routeNames(v))
	}
	return res, v.Routes[0]
}

func TestBackendResolution(t *testing.T) {
	svcBackend := func(ns, name string, port int32) gwv1.HTTPBackendRef {
		b := backend(name, port)
		if ns != "" {
			b.Namespace = ptr(gwv1.Namespace(ns))
		}
		return b
	}
	noPort := backend("web", 80)
	noPort.Port = nil
	kind := backend("web", 80)
	kind.Kind = ptr(gwv1.Kind("ServiceImport"))
	kind.Group = ptr(gwv1.Group("multicluster.x-k8s.io"))
	external := service("apps", "ext", 80)
	external.Spec.Type = corev1.ServiceTypeExternalName

	tests := []struct {
		name   string
		refs   []gwv1.HTTPBackendRef
		extra  []any
		reason string               // ResolvedRefs reason, "" when True
		backs  []ir.WeightedBackend // nil: direct 500
	}{
		{"valid", []gwv1.HTTPBackendRef{backend("web", 80)}, nil, "", []ir.WeightedBackend{{Cluster: "apps/web/80", Weight: 1}}},
		{"missing service", []gwv1.HTTPBackendRef{backend("nope", 80)}, nil, string(gwv1.RouteReasonBackendNotFound), nil},
		{"missing port on service", []gwv1.HTTPBackendRef{backend("web", 81)}, nil, string(gwv1.RouteReasonBackendNotFound), nil},
		{"no port in ref", []gwv1.HTTPBackendRef{noPort}, nil, string(gwv1.RouteReasonBackendNotFound), nil},
		{"unknown kind", []gwv1.HTTPBackendRef{kind}, nil, string(gwv1.RouteReasonInvalidKind), nil},
		{"ExternalName", []gwv1.HTTPBackendRef{backend("ext", 80)}, []any{external}, string(gwv1.RouteReasonInvalidKind), nil},
		{"cross namespace without grant", []gwv1.HTTPBackendRef{svcBackend("other", "web", 80)}, []any{service("other", "web", 80)}, string(gwv1.RouteReasonRefNotPermitted), nil},
		{"cross namespace with grant", []gwv1.HTTPBackendRef{svcBackend("other", "web", 80)},
			[]any{service("other", "web", 80), refGrant("other", "g", "HTTPRoute", "apps", "Service", nil)}, "",
			[]ir.WeightedBackend{{Cluster: "other/web/80", Weight: 1}}},
		{"grant names another service", []gwv1.HTTPBackendRef{svcBackend("other", "web", 80)},
			[]any{service("other", "web", 80), refGrant("other", "g", "HTTPRoute", "apps", "Service", ptr("db"))}, string(gwv1.RouteReasonRefNotPermitted), nil},
		{"grant for GRPCRoutes only", []gwv1.HTTPBackendRef{svcBackend("other", "web", 80)},
			[]any{service("other", "web", 80), refGrant("other", "g", "GRPCRoute", "apps", "Service", nil)}, string(gwv1.RouteReasonRefNotPermitted), nil},
		{"one of two invalid: 500 share", []gwv1.HTTPBackendRef{weighted(backend("web", 80), 3), weighted(backend("nope", 80), 1)}, nil,
			string(gwv1.RouteReasonBackendNotFound), []ir.WeightedBackend{{Cluster: "apps/web/80", Weight: 3}, {Weight: 1, Invalid: true}}},
		{"weight zero gets no traffic", []gwv1.HTTPBackendRef{weighted(backend("web", 80), 0), backend("db", 80)}, []any{service("apps", "db", 80)}, "",
			[]ir.WeightedBackend{{Cluster: "apps/db/80", Weight: 1}}},
		{"all weights zero: 500", []gwv1.HTTPBackendRef{weighted(backend("web", 80), 0)}, nil, "", nil},
		{"no backendRefs: 500", nil, nil, "", nil},
		{"same backend twice merges", []gwv1.HTTPBackendRef{weighted(backend("web", 80), 2), weighted(backend("web", 80), 5)}, nil, "",
			[]ir.WeightedBackend{{Cluster: "apps/web/80", Weight: 7}}},
		{"huge weight clamped", []gwv1.HTTPBackendRef{weighted(backend("web", 80), 1<<30)}, nil, "", []ir.WeightedBackend{{Cluster: "apps/web/80", Weight: maxWeight}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := append([]any{service("apps", "web", 80)}, tc.extra...)
			res, r := oneRoute(t, gwv1.HTTPRouteRule{BackendRefs: tc.refs}, objs...)
			p := routeParent(t, res, resource.KindHTTPRoute, "apps", "r", 0)
			// The route stays accepted whatever its backends.
			wantCond(t, p.Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
			if tc.reason == "" {
				wantCond(t, p.Conditions, string(gwv1.RouteConditionResolvedRefs), metav1.ConditionTrue, string(gwv1.RouteReasonResolvedRefs))
			} else {
				wantCond(t, p.Conditions, string(gwv1.RouteConditionResolvedRefs), metav1.ConditionFalse, tc.reason)
			}
			if tc.backs == nil {
				if r.DirectResponse == nil || r.DirectResponse.Status != 500 || r.Forward != nil {
					t.Errorf("want a direct 500, got %+v", r)
				}
				return
			}
			if r.Forward == nil {
				t.Fatalf("want forward, got %+v", r)
			}
			var got []ir.WeightedBackend
			for _, b := range r.Forward.Backends {
				got = append(got, *b)
			}
			if len(got) != len(tc.backs) {
				t.Fatalf("backends = %+v, want %+v", got, tc.backs)
			}
			for i := range got {
				if got[i] != tc.backs[i] {
					t.Errorf("backend %d = %+v, want %+v", i, got[i], tc.backs[i])
				}
			}
			g := irGateway(t, res, "infra", "gw")
			for _, b := range got {
				if !b.Invalid && !hasCluster(g, b.Cluster) {
					t.Errorf("cluster %s missing from the Gateway", b.Cluster)
				}
			}
		})
	}
}

func hasCluster(g *ir.Gateway, name string) bool {
	for _, c := range g.Clusters {
		if c.Name == name {
			return true
		}
	}
	return false
}

func TestClusterEndpoints(t *testing.T) {
	svc := service("apps", "web", 80)
	svc.Spec.Ports[0].Name = "web"
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "admin", Port: 9000})
	s1 := slice("apps", "web", "web-1", 8080, "10.0.0.2", "10.0.0.1")
	s1.Ports = []discoveryv1.EndpointPort{{Name: ptr("admin"), Port: ptr(int32(9001))}, {Name: ptr("web"), Port: ptr(int32(8080))}}
	s1.Endpoints = append(s1.Endpoints,
		discoveryv1.Endpoint{Addresses: []string{"10.0.0.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false)}},
		discoveryv1.Endpoint{Addresses: []string{"10.0.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}},
	)
	// The same address in a second slice is listed once.
	s2 := slice("apps", "web", "web-2", 8080, "10.0.0.1")
	s2.Ports[0].Name = ptr("web")
	fqdn := slice("apps", "web", "web-3", 8080, "web.example.com")
	fqdn.AddressType = discoveryv1.AddressTypeFQDN
	fqdn.Ports[0].Name = ptr("web")
	v6 := slice("apps", "web", "web-4", 8080, "fd00::1")
	v6.AddressType = discoveryv1.AddressTypeIPv6
	v6.Ports[0].Name = ptr("web")
	// A slice without the Service port's name contributes nothing.
	other := slice("apps", "web", "web-5", 7070, "10.9.9.9")
	other.Ports[0].Name = ptr("nope")
	// A slice of another Service.
	foreign := slice("apps", "db", "db-1", 5432, "10.1.1.1")

	res, _ := oneRoute(t, gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)}}, svc, s1, s2, fqdn, v6, other, foreign)
	g := irGateway(t, res, "infra", "gw")
	if len(g.Clusters) != 1 {
		t.Fatalf("clusters = %+v", g.Clusters)
	}
	c := g.Clusters[0]
	if c.Name != "apps/web/80" || c.ServiceNamespace != "apps" || c.ServiceName != "web" || c.ServicePort != 80 || c.Protocol != ir.UpstreamHTTP1 {
		t.Errorf("cluster = %+v", c)
	}
	want := []ir.Endpoint{{Address: "10.0.0.1", Port: 8080}, {Address: "10.0.0.2", Port: 8080}, {Address: "10.0.0.3", Port: 8080}, {Address: "fd00::1", Port: 8080}}
	if len(c.Endpoints) != len(want) {
		t.Fatalf("endpoints = %v, want %v", c.Endpoints, want)
	}
	for i := range want {
		if c.Endpoints[i] != want[i] {
			t.Errorf("endpoint %d = %v, want %v", i, c.Endpoints[i], want[i])
		}
	}
}

func TestClusterProtocol(t *testing.T) {
	h2c := service("apps", "h2c", 80)
	h2c.Spec.Ports[0].AppProtocol = ptr("kubernetes.io/h2c")
	tlsSvc := service("apps", "secure", 443)
	tlsSvc.Spec.Ports[0].AppProtocol = ptr("https")
	rule := gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backend("h2c", 80), backend("web", 80), backend("secure", 443)}}
	r := httpRoute("apps", "r", []gwv1.ParentReference{{Name: "gw", Namespace: ptr(gwv1.Namespace("infra"))}}, []string{"web.example.com"}, rule)
	// A GRPCRoute using "grpc" makes that cluster HTTP/2 in this Gateway.
	g := grpcRoute("apps", "g", 0, []gwv1.ParentReference{{Name: "gw", Namespace: ptr(gwv1.Namespace("infra"))}}, []string{"grpc.example.com"},
		gwv1.GRPCRouteRule{BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: backend("grpc", 80).BackendRef}}})
	res := translate(gateway("infra", "gw", allowAll(httpL("http", 80, ""))), r, g, h2c, service("apps", "web", 80), service("apps", "grpc", 80), tlsSvc)
	wantCond(t, routeParent(t, res, resource.KindHTTPRoute, "apps", "r", 0).Conditions, string(gwv1.RouteConditionResolvedRefs), metav1.ConditionFalse, string(gwv1.RouteReasonUnsupportedProtocol))
	want := map[string]ir.UpstreamProtocol{"apps/h2c/80": ir.UpstreamHTTP2, "apps/web/80": ir.UpstreamHTTP1, "apps/grpc/80": ir.UpstreamHTTP2}
	gw := irGateway(t, res, "infra", "gw")
	if len(gw.Clusters) != len(want) {
		t.Fatalf("clusters = %d, want %d", len(gw.Clusters), len(want))
	}
	for i, c := range gw.Clusters {
		if want[c.Name] != c.Protocol {
			t.Errorf("cluster %s protocol %s, want %s", c.Name, c.Protocol, want[c.Name])
		}
		if i > 0 && gw.Clusters[i-1].Name >= c.Name {
			t.Errorf("clusters not sorted")
		}
	}
}

func TestMirrors(t *testing.T) {
	mirror := func(name string, pct *int32, frac *gwv1.Fraction) gwv1.HTTPRouteFilter {
		return gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{
			BackendRef: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: ptr(int32(80))}, Percent: pct, Fraction: frac}}
	}
	rule := gwv1.HTTPRouteRule{
		Filters: []gwv1.HTTPRouteFilter{
			mirror("m1", nil, nil),
			mirror("m2", ptr(int32(25)), nil),
			mirror("m3", nil, &gwv1.Fraction{Numerator: 1, Denominator: ptr(int32(8))}),
			mirror("missing", nil, nil),
			mirror("m1", ptr(int32(0)), nil),
		},
		BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)},
	}
	res, r := oneRoute(t, rule, service("apps", "web", 80), service("apps", "m1", 80), service("apps", "m2", 80), service("apps", "m3", 80))
	wantCond(t, routeParent(t, res, resource.KindHTTPRoute, "apps", "r", 0).Conditions, string(gwv1.RouteConditionResolvedRefs), metav1.ConditionFalse, string(gwv1.RouteReasonBackendNotFound))
	want := []ir.Mirror{{Cluster: "apps/m1/80", Percent: 100}, {Cluster: "apps/m2/80", Percent: 25}, {Cluster: "apps/m3/80", Percent: 12.5}}
	if len(r.Forward.Mirrors) != len(want) {
		t.Fatalf("mirrors = %+v", r.Forward.Mirrors)
	}
	for i := range want {
		if *r.Forward.Mirrors[i] != want[i] {
			t.Errorf("mirror %d = %+v, want %+v", i, *r.Forward.Mirrors[i], want[i])
		}
	}
	g := irGateway(t, res, "infra", "gw")
	for _, c := range []string{"apps/m1/80", "apps/m2/80", "apps/m3/80", "apps/web/80"} {
		if !hasCluster(g, c) {
			t.Errorf("cluster %s missing", c)
		}
	}
}
