package gatewayapi

import (
	"regexp"
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/resource"
)

// allowOrigins as the API defines them: a scheme and host with an optional
// port, the scheme's default port assumed when absent; "*" in the host is
// greedy to the left over any number of labels; "*" alone allows all.
// Origins are compared in any letter case. Envoy matches the expression
// against the whole Origin (RE2, as Go's regexp).
func TestCORSOriginMatch(t *testing.T) {
	cases := []struct {
		origin     string
		match, not []string
	}{
		{"https://www.foo.com", []string{"https://www.foo.com", "HTTPS://WWW.Foo.com", "https://www.foo.com:443"},
			[]string{"http://www.foo.com", "https://www.foo.com:8443", "https://xwww.foo.com", "https://www.foo.com.evil"}},
		{"https://*.bar.com", []string{"https://www.bar.com", "https://xpto.www.bar.com", "https://a.bar.com:443"},
			[]string{"https://bar.com", "https://www.bar.com:1", "https://evil.com/.bar.com", "http://www.bar.com"}},
		{"http://localhost:8080", []string{"http://localhost:8080"}, []string{"http://localhost", "http://localhost:80"}},
		{"http://a.example:80", []string{"http://a.example", "http://a.example:80"}, []string{"http://a.example:8080"}},
		{"*", []string{"https://foobar.com", "https://foobar.com:12345", "null"}, nil},
	}
	for _, c := range cases {
		m, err := originMatch(c.origin)
		if err != nil {
			t.Fatalf("%s: %s", c.origin, err.msg)
		}
		rx := regexp.MustCompile("^(?:" + m.Regex + ")$")
		for _, o := range c.match {
			if !rx.MatchString(o) {
				t.Errorf("%s does not allow %s (%s)", c.origin, o, m.Regex)
			}
		}
		for _, o := range c.not {
			if rx.MatchString(o) {
				t.Errorf("%s allows %s (%s)", c.origin, o, m.Regex)
			}
		}
	}
	for _, bad := range []string{"ftp://a.com", "https://", "https://a.com/path", "https://a.*.com", "https://a.com:x", "www.foo.com"} {
		if _, err := originMatch(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// A CORS filter becomes the policy of its rule's routes: maxAge defaults to
// 5, duplicates (headers in any case) are listed once, a second CORS filter
// in one rule drops the rule.
func TestCORSPolicy(t *testing.T) {
	f := &gwv1.HTTPCORSFilter{AllowOrigins: []gwv1.CORSOrigin{"https://a.example"}, AllowMethods: []gwv1.HTTPMethodWithWildcard{"GET", "GET", "PUT"},
		AllowHeaders: []gwv1.HTTPHeaderName{"X-A", "x-a"}, AllowCredentials: ptr(true)}
	p, err := corsPolicy(f)
	if err != nil {
		t.Fatal(err.msg)
	}
	if p.MaxAgeSeconds != 5 || len(p.AllowMethods) != 2 || len(p.AllowHeaders) != 1 || !p.AllowCredentials || len(p.AllowOrigins) != 1 {
		t.Errorf("policy %+v", p)
	}
	cors := gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterCORS, CORS: f}
	one := gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/one")}, Filters: []gwv1.HTTPRouteFilter{cors}, BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)}}
	two := gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/two")}, Filters: []gwv1.HTTPRouteFilter{cors, cors}, BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)}}
	r := httpRoute("infra", "r", []gwv1.ParentReference{parent("gw")}, nil, one, two)
	res := translate(gateway("infra", "gw", httpL("http", 80, "")), r, service("infra", "web", 80))
	v := vhost(t, irListener(t, irGateway(t, res, "infra", "gw"), "http-80"), "*")
	if len(v.Routes) != 1 || v.Routes[0].CORS == nil || v.Routes[0].Match.Path.Value != "/one" {
		t.Fatalf("routes %v, want /one with its policy (the rule with two CORS filters dropped)", routeNames(v))
	}
	p2 := routeParent(t, res, resource.KindHTTPRoute, "infra", "r", 0)
	if !hasCond(p2.Conditions, string(gwv1.RouteConditionPartiallyInvalid)) {
		t.Error("the rule with two CORS filters was not reported")
	}
}
