package gatewayapi

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/resource"
)

func TestGRPCMethodMatch(t *testing.T) {
	exact, regex := gwv1.GRPCMethodMatchExact, gwv1.GRPCMethodMatchRegularExpression
	tests := []struct {
		name  string
		match *gwv1.GRPCMethodMatch
		want  *ir.PathMatch
		ok    bool
	}{
		{"no method match", nil, nil, true},
		{"service and method", &gwv1.GRPCMethodMatch{Service: ptr("pkg.Svc"), Method: ptr("Get")}, &ir.PathMatch{Type: ir.PathExact, Value: "/pkg.Svc/Get"}, true},
		{"service only", &gwv1.GRPCMethodMatch{Type: &exact, Service: ptr("pkg.Svc")}, &ir.PathMatch{Type: ir.PathPrefix, Value: "/pkg.Svc"}, true},
		{"method only", &gwv1.GRPCMethodMatch{Method: ptr("Get.All")}, &ir.PathMatch{Type: ir.PathRegex, Value: `/[^/]+/Get\.All`}, true},
		{"regex service", &gwv1.GRPCMethodMatch{Type: &regex, Service: ptr(`pkg\..*`)}, &ir.PathMatch{Type: ir.PathRegex, Value: `/(?:pkg\..*)/[^/]+`}, true},
		{"regex both", &gwv1.GRPCMethodMatch{Type: &regex, Service: ptr("a|b"), Method: ptr("Get.*")}, &ir.PathMatch{Type: ir.PathRegex, Value: "/(?:a|b)/(?:Get.*)"}, true},
		{"invalid regex", &gwv1.GRPCMethodMatch{Type: &regex, Method: ptr("(")}, nil, false},
		{"empty", &gwv1.GRPCMethodMatch{}, nil, false},
		{"slash in exact", &gwv1.GRPCMethodMatch{Service: ptr("a/b")}, nil, false},
		{"unknown type", &gwv1.GRPCMethodMatch{Type: ptr(gwv1.GRPCMethodMatchType("Prefix")), Service: ptr("a")}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, _, err := grpcMatch(&gwv1.GRPCRouteMatch{Method: tc.match})
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
			if !tc.ok {
				return
			}
			if (m.Path == nil) != (tc.want == nil) || (m.Path != nil && *m.Path != *tc.want) {
				t.Errorf("path = %+v, want %+v", m.Path, tc.want)
			}
		})
	}
}

func TestGRPCRouteTranslation(t *testing.T) {
	hdrType := gwv1.GRPCHeaderMatchExact
	svcRule := gwv1.GRPCRouteRule{
		Matches: []gwv1.GRPCRouteMatch{{Method: &gwv1.GRPCMethodMatch{Service: ptr("pkg.Svc")}}},
		Filters: []gwv1.GRPCRouteFilter{{Type: gwv1.GRPCRouteFilterRequestHeaderModifier,
			RequestHeaderModifier: &gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{{Name: "x-a", Value: "1"}}}}},
		BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: backend("grpc", 9000).BackendRef}},
	}
	methodRule := gwv1.GRPCRouteRule{
		Matches: []gwv1.GRPCRouteMatch{{
			Method:  &gwv1.GRPCMethodMatch{Service: ptr("pkg.Svc"), Method: ptr("Get")},
			Headers: []gwv1.GRPCHeaderMatch{{Type: &hdrType, Name: "x-v", Value: "1"}, {Name: "X-V", Value: "ignored"}},
		}},
		BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: backend("grpc", 9000).BackendRef}},
	}
	catchAll := gwv1.GRPCRouteRule{BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: backend("missing", 9000).BackendRef}}}
	r := grpcRoute("infra", "g", 0, []gwv1.ParentReference{parent("gw")}, nil, catchAll, svcRule, methodRule)
	res := translate(gateway("infra", "gw", httpL("http", 80, "")), r, service("infra", "grpc", 9000))
	p := routeParent(t, res, resource.KindGRPCRoute, "infra", "g", 0)
	wantCond(t, p.Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
	wantCond(t, p.Conditions, string(gwv1.RouteConditionResolvedRefs), metav1.ConditionFalse, string(gwv1.RouteReasonBackendNotFound))
	g := irGateway(t, res, "infra", "gw")
	v := vhost(t, irListener(t, g, "http-80"), "*")
	want := []string{"grpcroute/infra/g/rule/2/match/0", "grpcroute/infra/g/rule/1/match/0", "grpcroute/infra/g/rule/0/match/0"}
	if got := routeNames(v); !equalStrings(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
	if len(v.Routes[0].Match.Headers) != 1 {
		t.Errorf("duplicate header names not collapsed: %+v", v.Routes[0].Match.Headers)
	}
	if v.Routes[2].DirectResponse == nil || v.Routes[2].Match.Path != nil {
		t.Errorf("catch-all = %+v", v.Routes[2])
	}
	if len(g.Clusters) != 1 || g.Clusters[0].Protocol != ir.UpstreamHTTP2 {
		t.Errorf("clusters = %+v", g.Clusters)
	}
}
