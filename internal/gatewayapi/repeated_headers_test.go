package gatewayapi

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/resource"
)

// TestRepeatedHeaderNamesFirstWins states the API's HTTPHeader rule
// (apis/v1/httproute_types.go, HTTPHeader.Name): "Name matching MUST be
// case-insensitive ... If multiple entries specify equivalent header
// names, the first entry with an equivalent name MUST be considered ...
// Subsequent entries with an equivalent header name MUST be ignored." A
// header modifier repeating a name in another letter case keeps its route
// Accepted (no UnsupportedValue), its rule is not dropped, and only the
// first entry naming each header is applied: within set, add and remove,
// and across them in that order. Request and response modifiers, HTTPRoute
// and GRPCRoute alike.
func TestRepeatedHeaderNamesFirstWins(t *testing.T) {
	repeated := &gwv1.HTTPHeaderFilter{
		Set:    []gwv1.HTTPHeader{{Name: "X-A", Value: "first"}, {Name: "x-a", Value: "second"}},
		Add:    []gwv1.HTTPHeader{{Name: "x-b", Value: "1"}, {Name: "X-B", Value: "2"}, {Name: "X-a", Value: "ignored: set first"}},
		Remove: []string{"x-c", "X-C", "x-B"},
	}
	want := &ir.HeaderModifier{
		Set:    []ir.Header{{Name: "X-A", Value: "first"}},
		Add:    []ir.Header{{Name: "x-b", Value: "1"}},
		Remove: []string{"x-c"},
	}
	check := func(t *testing.T, res *Result, kind resource.Kind, name string, mod func(*ir.Route) *ir.HeaderModifier) {
		t.Helper()
		p := routeParent(t, res, kind, "infra", name, 0)
		wantCond(t, p.Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
		wantCond(t, p.Conditions, string(gwv1.RouteConditionResolvedRefs), metav1.ConditionTrue, string(gwv1.RouteReasonResolvedRefs))
		if hasCond(p.Conditions, string(gwv1.RouteConditionPartiallyInvalid)) {
			t.Error("PartiallyInvalid set: the rule must not be dropped")
		}
		v := vhost(t, irListener(t, irGateway(t, res, "infra", "gw"), "http-80"), "*")
		if len(v.Routes) != 1 || v.Routes[0].Forward == nil {
			t.Fatalf("routes = %v, want the rule forwarding", routeNames(v))
		}
		got := mod(v.Routes[0])
		if got == nil || !slices.Equal(got.Set, want.Set) || !slices.Equal(got.Add, want.Add) || !slices.Equal(got.Remove, want.Remove) {
			t.Errorf("modifier = %+v, want %+v", got, want)
		}
	}
	req := func(r *ir.Route) *ir.HeaderModifier { return r.RequestHeaders }
	resp := func(r *ir.Route) *ir.HeaderModifier { return r.ResponseHeaders }
	objs := func(route any) []any {
		return []any{gateway("infra", "gw", httpL("http", 80, "")), route, service("infra", "web", 80)}
	}

	t.Run("HTTPRoute request", func(t *testing.T) {
		r := httpRoute("infra", "r", []gwv1.ParentReference{parent("gw")}, nil, gwv1.HTTPRouteRule{
			Filters:     []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: repeated}},
			BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)},
		})
		check(t, translate(objs(r)...), resource.KindHTTPRoute, "r", req)
	})
	t.Run("HTTPRoute response", func(t *testing.T) {
		r := httpRoute("infra", "r", []gwv1.ParentReference{parent("gw")}, nil, gwv1.HTTPRouteRule{
			Filters:     []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: repeated}},
			BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)},
		})
		check(t, translate(objs(r)...), resource.KindHTTPRoute, "r", resp)
	})
	grpc := func(f gwv1.GRPCRouteFilter) *gwv1.GRPCRoute {
		return grpcRoute("infra", "g", 0, []gwv1.ParentReference{parent("gw")}, nil, gwv1.GRPCRouteRule{
			Filters:     []gwv1.GRPCRouteFilter{f},
			BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: backend("web", 80).BackendRef}},
		})
	}
	t.Run("GRPCRoute request", func(t *testing.T) {
		r := grpc(gwv1.GRPCRouteFilter{Type: gwv1.GRPCRouteFilterRequestHeaderModifier, RequestHeaderModifier: repeated})
		check(t, translate(objs(r)...), resource.KindGRPCRoute, "g", req)
	})
	t.Run("GRPCRoute response", func(t *testing.T) {
		r := grpc(gwv1.GRPCRouteFilter{Type: gwv1.GRPCRouteFilterResponseHeaderModifier, ResponseHeaderModifier: repeated})
		check(t, translate(objs(r)...), resource.KindGRPCRoute, "g", resp)
	})
}
