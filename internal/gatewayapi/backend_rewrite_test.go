package gatewayapi

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/resource"
)

func rewriteFilter(host string, path *gwv1.HTTPPathModifier) gwv1.HTTPRouteFilter {
	rw := &gwv1.HTTPURLRewriteFilter{Path: path}
	if host != "" {
		rw.Hostname = ptr(gwv1.PreciseHostname(host))
	}
	return gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterURLRewrite, URLRewrite: rw}
}

func replacePrefix(p string) *gwv1.HTTPPathModifier {
	return &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr(p)}
}

func replaceFull(p string) *gwv1.HTTPPathModifier {
	return &gwv1.HTTPPathModifier{Type: gwv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr(p)}
}

// The spec (HTTPBackendRef.filters): filters at this level "should be
// executed if and only if the request is being forwarded to the backend
// defined here". A backendRef's URLRewrite therefore rewrites only the
// requests its backend gets: backends that rewrite paths differently get
// routes of their own that divide the rule's requests in their weights
// (cumulative fractions, the last route taking the rest), each route
// carrying its path and the rule's hostname, and a backend's own hostname
// stays on that backend (and replaces the rule's).
func TestBackendURLRewriteSplitsByPath(t *testing.T) {
	blue := weighted(backend("blue", 80), 1)
	blue.Filters = []gwv1.HTTPRouteFilter{rewriteFilter("", replacePrefix("/blue"))}
	green := weighted(backend("green", 80), 3)
	green.Filters = []gwv1.HTTPRouteFilter{rewriteFilter("green.internal", replacePrefix("/green"))}
	plain := weighted(backend("plain", 80), 4) // the rule's rewrite
	rule := gwv1.HTTPRouteRule{
		Matches:     []gwv1.HTTPRouteMatch{prefixMatch("/split")},
		Filters:     []gwv1.HTTPRouteFilter{rewriteFilter("rule.example", replaceFull("/rule"))},
		BackendRefs: []gwv1.HTTPBackendRef{blue, green, plain},
	}
	r := httpRoute("apps", "r", []gwv1.ParentReference{parent("gw")}, nil, rule)
	res := translate(gateway("apps", "gw", httpL("http", 80, "")), r,
		service("apps", "blue", 80), service("apps", "green", 80), service("apps", "plain", 80))
	p := routeParent(t, res, resource.KindHTTPRoute, "apps", "r", 0)
	wantCond(t, p.Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
	wantCond(t, p.Conditions, string(gwv1.RouteConditionResolvedRefs), metav1.ConditionTrue, string(gwv1.RouteReasonResolvedRefs))

	v := vhost(t, irListener(t, irGateway(t, res, "apps", "gw"), "http-80"), "*")
	if len(v.Routes) != 3 {
		t.Fatalf("routes = %v, want one per path", routeNames(v))
	}
	want := []struct {
		fraction *uint32
		cluster  string
		path     ir.PathModifier
		ownHost  string
	}{
		{ptr(uint32(125_000)), "apps/blue/80", ir.PathModifier{Type: ir.PrefixMatchReplace, Value: "/blue"}, ""},
		{ptr(uint32(500_000)), "apps/green/80", ir.PathModifier{Type: ir.PrefixMatchReplace, Value: "/green"}, "green.internal"},
		{nil, "apps/plain/80", ir.PathModifier{Type: ir.FullPathReplace, Value: "/rule"}, ""},
	}
	for i, w := range want {
		rt := v.Routes[i]
		if !strings.HasSuffix(rt.Name, "/rule/0/match/0/path/"+string(rune('0'+i))) {
			t.Errorf("route %d name %q", i, rt.Name)
		}
		if (rt.Match.Fraction == nil) != (w.fraction == nil) || (w.fraction != nil && *rt.Match.Fraction != *w.fraction) {
			t.Errorf("route %d fraction %v, want %v", i, rt.Match.Fraction, w.fraction)
		}
		if rt.Match.Path == nil || rt.Match.Path.Value != "/split" {
			t.Errorf("route %d match %+v", i, rt.Match)
		}
		f := rt.Forward
		if f == nil || len(f.Backends) != 1 || f.Backends[0].Cluster != w.cluster {
			t.Fatalf("route %d forward %+v", i, f)
		}
		// The rule's hostname is the route's, unless the backend has its
		// own: Envoy would prefer the route's to the backend's.
		wantRouteHost := w.ownHost == ""
		if f.URLRewrite == nil || f.URLRewrite.Path == nil || *f.URLRewrite.Path != w.path ||
			(f.URLRewrite.Hostname != nil) != wantRouteHost || (wantRouteHost && *f.URLRewrite.Hostname != "rule.example") {
			t.Errorf("route %d rewrite %+v, want path %+v (and the rule's hostname: %v)", i, f.URLRewrite, w.path, wantRouteHost)
		}
		bf := f.Backends[0].Filters
		switch {
		case w.ownHost == "" && bf != nil:
			t.Errorf("route %d backend keeps filters %+v", i, bf)
		case w.ownHost != "" && (bf == nil || bf.URLRewrite == nil || bf.URLRewrite.Path != nil || *bf.URLRewrite.Hostname != w.ownHost):
			t.Errorf("route %d backend filters %+v, want only its hostname", i, bf)
		}
	}
}

// Backends that agree on the path (or rewrite only the hostname) keep one
// route; a ReplacePrefixMatch on a backend of a rule with a non-prefix
// match is that backend's invalid filter: its share answers 500.
func TestBackendURLRewriteOneRoute(t *testing.T) {
	a := backend("a", 80)
	a.Filters = []gwv1.HTTPRouteFilter{rewriteFilter("a.internal", nil)}
	b := backend("b", 80)
	b.Filters = []gwv1.HTTPRouteFilter{rewriteFilter("", replaceFull("/x"))}
	c := backend("c", 80)
	c.Filters = []gwv1.HTTPRouteFilter{rewriteFilter("", replaceFull("/x"))}
	bad := backend("a", 80)
	bad.Filters = []gwv1.HTTPRouteFilter{rewriteFilter("", replacePrefix("/p"))}
	rules := []gwv1.HTTPRouteRule{
		{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/host")}, BackendRefs: []gwv1.HTTPBackendRef{a, backend("b", 80)}},
		{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/same")}, BackendRefs: []gwv1.HTTPBackendRef{b, c}},
		{Matches: []gwv1.HTTPRouteMatch{exactMatch("/exact")}, BackendRefs: []gwv1.HTTPBackendRef{bad, backend("b", 80)}},
	}
	r := httpRoute("apps", "r", []gwv1.ParentReference{parent("gw")}, nil, rules...)
	res := translate(gateway("apps", "gw", httpL("http", 80, "")), r,
		service("apps", "a", 80), service("apps", "b", 80), service("apps", "c", 80))
	p := routeParent(t, res, resource.KindHTTPRoute, "apps", "r", 0)
	rr := cond(t, p.Conditions, string(gwv1.RouteConditionResolvedRefs))
	if rr.Status != metav1.ConditionFalse || rr.Reason != string(gwv1.RouteReasonUnsupportedValue) || !strings.Contains(rr.Message, "backendRefs[0]") {
		t.Errorf("ResolvedRefs %s/%s %q, want the prefix rewrite of rule 2's backendRefs[0] refused", rr.Status, rr.Reason, rr.Message)
	}
	v := vhost(t, irListener(t, irGateway(t, res, "apps", "gw"), "http-80"), "*")
	byPath := map[string]*ir.Route{}
	for _, rt := range v.Routes {
		if rt.Match.Fraction != nil {
			t.Errorf("route %s has a fraction", rt.Name)
		}
		byPath[rt.Match.Path.Value] = rt
	}
	if len(v.Routes) != 3 {
		t.Fatalf("routes = %v", routeNames(v))
	}
	host := byPath["/host"].Forward
	if host.URLRewrite != nil || len(host.Backends) != 2 || host.Backends[0].Filters == nil || *host.Backends[0].Filters.URLRewrite.Hostname != "a.internal" || host.Backends[1].Filters != nil {
		t.Errorf("/host forward %+v", host)
	}
	same := byPath["/same"].Forward
	if same.URLRewrite == nil || *same.URLRewrite.Path != (ir.PathModifier{Type: ir.FullPathReplace, Value: "/x"}) || same.Backends[0].Filters != nil || same.Backends[1].Filters != nil {
		t.Errorf("/same forward %+v", same)
	}
	exact := byPath["/exact"].Forward
	if len(exact.Backends) != 2 || !exact.Backends[1].Invalid || exact.Backends[0].Cluster != "apps/b/80" {
		t.Errorf("/exact forward backends %+v, want b and the invalid share", exact.Backends)
	}
}

// When one backend of a route has its own hostname, the rule's hostname is
// given to each other backend instead of the route (Envoy prefers a
// route's host_rewrite_literal to a weighted cluster's).
func TestBackendURLRewriteHostnames(t *testing.T) {
	own := backend("a", 80)
	own.Filters = []gwv1.HTTPRouteFilter{rewriteFilter("a.internal", nil)}
	rule := gwv1.HTTPRouteRule{
		Filters:     []gwv1.HTTPRouteFilter{rewriteFilter("rule.example", replaceFull("/r"))},
		BackendRefs: []gwv1.HTTPBackendRef{own, backend("b", 80), backend("missing", 80)},
	}
	r := httpRoute("apps", "r", []gwv1.ParentReference{parent("gw")}, nil, rule)
	res := translate(gateway("apps", "gw", httpL("http", 80, "")), r, service("apps", "a", 80), service("apps", "b", 80))
	v := vhost(t, irListener(t, irGateway(t, res, "apps", "gw"), "http-80"), "*")
	f := v.Routes[0].Forward
	if f.URLRewrite == nil || f.URLRewrite.Hostname != nil || f.URLRewrite.Path == nil || f.URLRewrite.Path.Value != "/r" {
		t.Fatalf("route rewrite %+v, want the path only", f.URLRewrite)
	}
	hosts := map[string]string{}
	for _, b := range f.Backends {
		if b.Invalid {
			continue
		}
		if b.Filters == nil || b.Filters.URLRewrite == nil || b.Filters.URLRewrite.Hostname == nil {
			t.Fatalf("backend %s has no hostname", b.Cluster)
		}
		hosts[b.Cluster] = *b.Filters.URLRewrite.Hostname
	}
	if hosts["apps/a/80"] != "a.internal" || hosts["apps/b/80"] != "rule.example" {
		t.Errorf("hostnames %v", hosts)
	}
}
