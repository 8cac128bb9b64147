package gatewayapi

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/resource"
)

// TestUnsupportedFiltersAnswer500: a filter Portico cannot apply is never
// skipped. Its rule stays, answers 500, and the route stays Accepted with
// ResolvedRefs=False naming the filter; traffic never falls through to a
// less specific rule that lacks the filter.
func TestUnsupportedFiltersAnswer500(t *testing.T) {
	withFilter := backend("web", 80)
	withFilter.Filters = []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestRedirect,
		RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Hostname: ptr(gwv1.PreciseHostname("x.example"))}}}
	redirectF := gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Scheme: ptr("https")}}
	backends := []gwv1.HTTPBackendRef{backend("web", 80)}
	tests := []struct {
		name    string
		filters []gwv1.HTTPRouteFilter
		refs    []gwv1.HTTPBackendRef
		reason  string
		message string
	}{
		{"ExternalAuth", []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterExternalAuth}}, backends, string(gwv1.RouteReasonInvalidKind), `filter type "ExternalAuth"`},
		{"unknown type", []gwv1.HTTPRouteFilter{{Type: "Compress"}}, backends, string(gwv1.RouteReasonInvalidKind), `filter type "Compress"`},
		{"ExternalAuth beats a redirect", []gwv1.HTTPRouteFilter{redirectF, {Type: gwv1.HTTPRouteFilterExternalAuth}}, nil, string(gwv1.RouteReasonInvalidKind), `"ExternalAuth"`},
		{"ExtensionRef beats a redirect", []gwv1.HTTPRouteFilter{redirectF, {Type: gwv1.HTTPRouteFilterExtensionRef,
			ExtensionRef: &gwv1.LocalObjectReference{Group: "example.com", Kind: "Auth", Name: "a"}}}, nil, string(gwv1.RouteReasonInvalidKind), "example.com/Auth"},
		{"backendRef filters", nil, []gwv1.HTTPBackendRef{withFilter}, string(gwv1.RouteReasonUnsupportedValue), `backendRefs[0]: filter type "RequestRedirect" is not supported on backendRefs`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			guarded := gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/admin")}, Filters: tc.filters, BackendRefs: tc.refs}
			open := gwv1.HTTPRouteRule{BackendRefs: backends}
			r := httpRoute("infra", "r", []gwv1.ParentReference{parent("gw")}, nil, guarded, open)
			res := translate(gateway("infra", "gw", httpL("http", 80, "")), r, service("infra", "web", 80))
			p := routeParent(t, res, resource.KindHTTPRoute, "infra", "r", 0)
			wantCond(t, p.Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
			rr := cond(t, p.Conditions, string(gwv1.RouteConditionResolvedRefs))
			if rr.Status != metav1.ConditionFalse || rr.Reason != tc.reason || !strings.Contains(rr.Message, tc.message) || !strings.Contains(rr.Message, "500") {
				t.Errorf("ResolvedRefs = %s/%s %q, want False/%s naming %q", rr.Status, rr.Reason, rr.Message, tc.reason, tc.message)
			}
			if hasCond(p.Conditions, string(gwv1.RouteConditionPartiallyInvalid)) {
				t.Error("PartiallyInvalid set: no rule is dropped")
			}
			v := vhost(t, irListener(t, irGateway(t, res, "infra", "gw"), "http-80"), "*")
			if len(v.Routes) != 2 || v.Routes[0].Match.Path.Value != "/admin" {
				t.Fatalf("routes = %v", routeNames(v))
			}
			if d := v.Routes[0].DirectResponse; d == nil || d.Status != 500 || v.Routes[0].Redirect != nil || v.Routes[0].Forward != nil {
				t.Errorf("guarded rule = %+v, want a direct 500", v.Routes[0])
			}
		})
	}
}

// TestBackendFilterShare: only the share of requests of a backendRef with
// filters is answered with 500.
func TestBackendFilterShare(t *testing.T) {
	withFilter := weighted(backend("other", 80), 3)
	withFilter.Filters = []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestMirror}}
	rule := gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{weighted(backend("web", 80), 1), withFilter}}
	r := httpRoute("infra", "r", []gwv1.ParentReference{parent("gw")}, nil, rule)
	res := translate(gateway("infra", "gw", httpL("http", 80, "")), r, service("infra", "web", 80), service("infra", "other", 80))
	f := vhost(t, irListener(t, irGateway(t, res, "infra", "gw"), "http-80"), "*").Routes[0].Forward
	want := []ir.WeightedBackend{{Cluster: "infra/web/80", Weight: 1}, {Weight: 3, Invalid: true}}
	if f == nil || len(f.Backends) != 2 || *f.Backends[0] != want[0] || *f.Backends[1] != want[1] {
		t.Fatalf("forward = %+v", f)
	}
	for _, c := range irGateway(t, res, "infra", "gw").Clusters {
		if c.ServiceName == "other" {
			t.Error("the filtered backend got a cluster")
		}
	}
}

// TestGRPCUnsupportedFilter: the same rule holds for GRPCRoutes.
func TestGRPCUnsupportedFilter(t *testing.T) {
	rule := gwv1.GRPCRouteRule{
		Filters:     []gwv1.GRPCRouteFilter{{Type: "Compress"}},
		BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: backend("grpc", 9000).BackendRef}},
	}
	r := &gwv1.GRPCRoute{ObjectMeta: meta("infra", "g")}
	r.Spec.ParentRefs = []gwv1.ParentReference{parent("gw")}
	r.Spec.Rules = []gwv1.GRPCRouteRule{rule}
	res := translate(gateway("infra", "gw", httpL("http", 80, "")), r, service("infra", "grpc", 9000))
	p := routeParent(t, res, resource.KindGRPCRoute, "infra", "g", 0)
	wantCond(t, p.Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
	wantCond(t, p.Conditions, string(gwv1.RouteConditionResolvedRefs), metav1.ConditionFalse, string(gwv1.RouteReasonInvalidKind))
	rt := vhost(t, irListener(t, irGateway(t, res, "infra", "gw"), "http-80"), "*").Routes[0]
	if rt.DirectResponse == nil || rt.DirectResponse.Status != 500 {
		t.Errorf("route = %+v, want a direct 500", rt)
	}
}
