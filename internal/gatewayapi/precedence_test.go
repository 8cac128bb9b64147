package gatewayapi

import (
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestHTTPRoutePrecedence(t *testing.T) {
	rule := func(m ...gwv1.HTTPRouteMatch) gwv1.HTTPRouteRule {
		return gwv1.HTTPRouteRule{Matches: m, BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)}}
	}
	withHeaders := func(m gwv1.HTTPRouteMatch, n int) gwv1.HTTPRouteMatch {
		for i := 0; i < n; i++ {
			m.Headers = append(m.Headers, gwv1.HTTPHeaderMatch{Name: gwv1.HTTPHeaderName("h" + string(rune('a'+i))), Value: "v"})
		}
		return m
	}
	withQuery := func(m gwv1.HTTPRouteMatch) gwv1.HTTPRouteMatch {
		m.QueryParams = []gwv1.HTTPQueryParamMatch{{Name: "q", Value: "v"}}
		return m
	}
	withMethod := func(m gwv1.HTTPRouteMatch) gwv1.HTTPRouteMatch {
		m.Method = ptr(gwv1.HTTPMethodGet)
		return m
	}
	parents := []gwv1.ParentReference{parent("gw")}

	// Route "old" is the oldest; "b" and "a" share a creation time.
	old := httpRoute("infra", "old", parents, nil,
		rule(prefixMatch("/")),                    // 0: shortest prefix
		rule(withHeaders(prefixMatch("/api"), 1)), // 1
	)
	old.CreationTimestamp = at(0)
	b := httpRoute("infra", "b", parents, nil,
		rule(withHeaders(prefixMatch("/api"), 1)), // tie with old/1: loses on age
		rule(exactMatch("/api")),
		rule(withMethod(prefixMatch("/api"))),
	)
	b.CreationTimestamp = at(5)
	a := httpRoute("infra", "a", parents, nil,
		rule(withHeaders(prefixMatch("/api"), 1)), // tie: wins over b by name
		rule(withHeaders(prefixMatch("/api"), 2)),
		rule(withQuery(prefixMatch("/api"))),
		rule(prefixMatch("/api/v1/")), // trailing slash ignored: length 7
		rule(regexMatch("/api/.*"), regexMatch("/x")),
		rule(prefixMatch("/api"), exactMatch("/z")), // rule/match order within a route
	)
	a.CreationTimestamp = at(5)
	res := translate(gateway("infra", "gw", httpL("http", 80, "")), old, b, a, service("infra", "web", 80))
	v := vhost(t, irListener(t, irGateway(t, res, "infra", "gw"), "http-80"), "*")
	want := []string{
		"httproute/infra/b/rule/1/match/0", // Exact, longest first
		"httproute/infra/a/rule/5/match/1",
		"httproute/infra/a/rule/4/match/0", // RegularExpression, longest first
		"httproute/infra/a/rule/4/match/1",
		"httproute/infra/a/rule/3/match/0", // longest prefix
		"httproute/infra/b/rule/2/match/0", // method
		"httproute/infra/a/rule/1/match/0", // 2 headers
		"httproute/infra/old/rule/1/match/0",
		"httproute/infra/a/rule/0/match/0",
		"httproute/infra/b/rule/0/match/0",
		"httproute/infra/a/rule/2/match/0", // query param
		"httproute/infra/a/rule/5/match/0", // plain /api
		"httproute/infra/old/rule/0/match/0",
	}
	if got := routeNames(v); !equalStrings(got, want) {
		t.Errorf("order\n got %q\nwant %q", got, want)
	}
	r := v.Routes[len(v.Routes)-1]
	if r.Match.Path == nil || r.Match.Path.Type != "PathPrefix" || r.Match.Path.Value != "/" {
		t.Errorf("default-ish match = %+v", r.Match.Path)
	}
	for _, r := range v.Routes {
		if r.Name == "httproute/infra/a/rule/3/match/0" && r.Match.Path.Value != "/api/v1" {
			t.Errorf("prefix with trailing slash = %q, want /api/v1", r.Match.Path.Value)
		}
	}
}

func TestDefaultMatchAndRules(t *testing.T) {
	// No rules: the API server default of one rule matching "/".
	r := httpRoute("infra", "r", []gwv1.ParentReference{parent("gw")}, nil)
	res := translate(gateway("infra", "gw", httpL("http", 80, "")), r)
	v := vhost(t, irListener(t, irGateway(t, res, "infra", "gw"), "http-80"), "*")
	if len(v.Routes) != 1 || v.Routes[0].Match.Path.Value != "/" || v.Routes[0].DirectResponse == nil || v.Routes[0].DirectResponse.Status != 500 {
		t.Errorf("route = %+v", v.Routes[0])
	}
}
