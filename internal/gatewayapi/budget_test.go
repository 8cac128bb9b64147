package gatewayapi

import (
	"fmt"
	"github.com/portico-dev/portico/internal/resource"
	"runtime"
	"strings"
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	xdstranslate "github.com/portico-dev/portico/internal/xds/translate"
)

// TestRouteExpansionBudget: a route that expands into more Envoy routes
// than the budget is refused on every parent, whatever else exists; a
// route within it is served, and the limit can be lifted.
func TestRouteExpansionBudget(t *testing.T) {
	gw := gateway("infra", "gw", allowAll(httpL("a", 80, "")), allowAll(httpL("b", 8080, "")))
	parents := []gwv1.ParentReference{{Name: "gw", Namespace: ptr(gwv1.Namespace("infra"))}}
	rule := gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/x"), prefixMatch("/y")}, BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)}}
	// 2 listeners × 3 hostnames × 2 matches = 12 Envoy routes.
	big := httpRoute("apps", "big", parents, []string{"a.example", "b.example", "c.example"}, rule)
	// 2 × 1 × 2 = 4.
	small := httpRoute("apps", "small", parents, []string{"d.example"}, rule)
	objs := []any{gw, big, small, service("apps", "web", 80)}

	res := Translate(snapshot(objs...), Options{ControllerName: testController, MaxRouteExpansion: 10})
	p := routeParent(t, res, resource.KindHTTPRoute, "apps", "big", 0)
	c := cond(t, p.Conditions, "Accepted")
	if c.Status != "False" || c.Reason != string(gwv1.RouteReasonUnsupportedValue) || !strings.Contains(c.Message, "expands into 12 Envoy routes") || !strings.Contains(c.Message, "the 10 one route may") {
		t.Errorf("big: Accepted = %+v", c)
	}
	wantCond(t, routeParent(t, res, resource.KindHTTPRoute, "apps", "small", 0).Conditions, "Accepted", "True", "Accepted")
	g := irGateway(t, res, "infra", "gw")
	for _, l := range g.Listeners {
		for _, fc := range l.FilterChains {
			for _, vh := range fc.RouteConfig.VirtualHosts {
				for _, r := range vh.Routes {
					if strings.Contains(r.Name, "/big/") {
						t.Errorf("refused route served: %s", r.Name)
					}
				}
			}
		}
	}
	if got := listenerStatus(t, res, "infra", "gw", "a").AttachedRoutes; got != 1 {
		t.Errorf("attachedRoutes = %d, want 1 (the refused route is not attached)", got)
	}

	// No limit: both are served.
	res = Translate(snapshot(objs...), Options{ControllerName: testController, MaxRouteExpansion: -1})
	wantCond(t, routeParent(t, res, resource.KindHTTPRoute, "apps", "big", 0).Conditions, "Accepted", "True", "Accepted")
}

// budgetInput is issue 15's input: routes of 32 parentRefs × 16 hostnames
// × 128 matches (65,536 Envoy routes each), and one ordinary route.
func budgetInput(n int) []any {
	var ls []gwv1.Listener
	var parents []gwv1.ParentReference
	for i := range 32 {
		name := fmt.Sprintf("l%d", i)
		ls = append(ls, allowAll(httpL(name, int32(8000+i), "")))
		parents = append(parents, gwv1.ParentReference{Name: "gw", Namespace: ptr(gwv1.Namespace("infra")), SectionName: ptr(gwv1.SectionName(name))})
	}
	objs := []any{gateway("infra", "gw", ls...), service("apps", "web", 80), slice("apps", "web", "web-1", 80, "10.0.0.1")}
	var hosts []string
	for h := range 16 {
		hosts = append(hosts, fmt.Sprintf("h%d.example", h))
	}
	for r := range n {
		var rules []gwv1.HTTPRouteRule
		for range 2 {
			var ms []gwv1.HTTPRouteMatch
			for m := range 64 {
				ms = append(ms, prefixMatch(fmt.Sprintf("/r%d/m%d", r, len(rules)*64+m)))
			}
			rules = append(rules, gwv1.HTTPRouteRule{Matches: ms, BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)}})
		}
		objs = append(objs, httpRoute("apps", fmt.Sprintf("huge-%d", r), parents, hosts, rules...))
	}
	return append(objs, httpRoute("apps", "ordinary", parents[:1], []string{"ok.example"},
		gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/")}, BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)}}))
}

// BenchmarkRouteExpansionBudget translates issue 15's input (30 routes of
// 65,536 Envoy routes each, and an ordinary one) through both stages with
// the default budget: the huge routes are refused, the ordinary one is
// served. Target: ≤ 2 s and ≤ 300 MB. Reports the heap in use after the
// translation (heap-MB) besides time and allocation.
//
//	go test ./internal/gatewayapi/ -run '^$' -bench RouteExpansionBudget -benchmem -benchtime 3x
func BenchmarkRouteExpansionBudget(b *testing.B) {
	snap := snapshot(budgetInput(30)...)
	b.ResetTimer()
	var heap uint64
	for b.Loop() {
		res := Translate(snap, Options{ControllerName: testController})
		served := 0
		for _, gw := range res.Gateways {
			x, err := xdstranslate.Translate(gw)
			if err != nil {
				b.Fatal(err)
			}
			served += len(x.Routes())
		}
		b.StopTimer()
		if s := res.StatusSet.Get(resource.KindHTTPRoute, "apps", "huge-0"); s == nil || s.Route.Parents[0].Conditions[0].Status != "False" {
			b.Fatalf("the huge route was not refused: %+v", s)
		}
		if s := res.StatusSet.Get(resource.KindHTTPRoute, "apps", "ordinary"); s == nil || s.Route.Parents[0].Conditions[0].Status != "True" {
			b.Fatalf("the ordinary route was not accepted: %+v", s)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap = max(heap, ms.HeapInuse)
		b.StartTimer()
	}
	b.ReportMetric(float64(heap)/(1<<20), "heap-MB")
}

// TestGatewayExpansionBudget: routes are admitted to a Gateway oldest
// first within its budget; a newer route that does not fit is refused with
// the figures, one that fits in what is left is still served, and an older
// route is never displaced by a newer one.
func TestGatewayExpansionBudget(t *testing.T) {
	gw := gateway("infra", "gw", allowAll(httpL("http", 80, "")))
	parents := []gwv1.ParentReference{{Name: "gw", Namespace: ptr(gwv1.Namespace("infra"))}}
	route := func(name string, created, matches int) *gwv1.HTTPRoute {
		var ms []gwv1.HTTPRouteMatch
		for i := range matches {
			ms = append(ms, prefixMatch(fmt.Sprintf("/%s/%d", name, i)))
		}
		r := httpRoute("apps", name, parents, []string{name + ".example"}, gwv1.HTTPRouteRule{Matches: ms, BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)}})
		r.CreationTimestamp = at(created)
		return r
	}
	objs := []any{gw, service("apps", "web", 80),
		route("newest", 3, 4), route("oldest", 1, 6), route("middle", 2, 6)}
	res := Translate(snapshot(objs...), Options{ControllerName: testController, MaxGatewayExpansion: 10})
	wantCond(t, routeParent(t, res, resource.KindHTTPRoute, "apps", "oldest", 0).Conditions, "Accepted", "True", "Accepted")
	c := cond(t, routeParent(t, res, resource.KindHTTPRoute, "apps", "middle", 0).Conditions, "Accepted")
	if c.Status != "False" || c.Reason != string(gwv1.RouteReasonUnsupportedValue) ||
		!strings.Contains(c.Message, "budget of 10 Envoy routes") || !strings.Contains(c.Message, "older routes (6), and this route needs 6 more") {
		t.Errorf("middle: Accepted = %+v", c)
	}
	wantCond(t, routeParent(t, res, resource.KindHTTPRoute, "apps", "newest", 0).Conditions, "Accepted", "True", "Accepted")
	if got := listenerStatus(t, res, "infra", "gw", "http").AttachedRoutes; got != 2 {
		t.Errorf("attachedRoutes = %d, want 2", got)
	}
	served := 0
	for _, fc := range irListener(t, irGateway(t, res, "infra", "gw"), "http-80").FilterChains {
		for _, vh := range fc.RouteConfig.VirtualHosts {
			for _, r := range vh.Routes {
				if strings.Contains(r.Name, "/middle/") {
					t.Errorf("refused route served: %s", r.Name)
				}
				served++
			}
		}
	}
	if served != 10 {
		t.Errorf("%d Envoy routes served, want the budget's 10", served)
	}
}
