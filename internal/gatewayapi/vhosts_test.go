package gatewayapi

import (
	"strings"
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
)

// vhostTable renders the virtual hosts of a filter chain as
// "host=route,route" with route names shortened to "<route>/<rule>".
func vhostTable(fc *ir.FilterChain) []string {
	var out []string
	for _, v := range fc.RouteConfig.VirtualHosts {
		var names []string
		for _, r := range v.Routes {
			if r.Name == "misdirected-request" {
				names = append(names, "421!"+r.Match.Headers[0].Value)
				continue
			}
			// httproute/<ns>/<name>/rule/<i>/match/<j>
			p := strings.Split(r.Name, "/")
			names = append(names, p[2]+"/"+p[4])
		}
		out = append(out, v.Name+"="+strings.Join(names, ","))
	}
	return out
}

func prefixRule(path string) gwv1.HTTPRouteRule {
	return gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch(path)}, BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)}}
}

func sectionRef(gw, section string) gwv1.ParentReference {
	return gwv1.ParentReference{Name: gwv1.ObjectName(gw), SectionName: ptr(gwv1.SectionName(section))}
}

// TestHostnameFallback: a virtual host holds the routes of less specific
// hostnames covering it, after those of more specific hostnames, whatever
// their match precedence (golden case 73).
func TestHostnameFallback(t *testing.T) {
	gw := gateway("infra", "gw", httpL("http", 80, ""))
	refs := []gwv1.ParentReference{parent("gw")}
	exact := httpRoute("infra", "exact", refs, []string{"foo.example.com"}, prefixRule("/a"))
	// A deeper wildcard is more specific than *.example.com.
	deep := httpRoute("infra", "deep", refs, []string{"*.foo.example.com"}, prefixRule("/d"))
	wild := httpRoute("infra", "wild", refs, []string{"*.example.com", "other.org"}, prefixRule("/c"))
	// Longer paths than the exact route's: hostname specificity still wins.
	all := httpRoute("infra", "all", refs, nil, prefixRule("/a/b/c"), prefixRule("/"))
	res := translate(gw, exact, deep, wild, all, service("infra", "web", 80))
	fc := irListener(t, irGateway(t, res, "infra", "gw"), "http-80").FilterChains[0]
	want := []string{
		"*=all/0,all/1",
		"*.example.com=wild/0,all/0,all/1",
		"*.foo.example.com=deep/0,wild/0,all/0,all/1",
		"foo.example.com=exact/0,wild/0,all/0,all/1",
		"other.org=wild/0,all/0,all/1",
	}
	if got := vhostTable(fc); !equalStrings(got, want) {
		t.Errorf("virtual hosts\n got %q\nwant %q", got, want)
	}
}

// TestListenerIsolation: on an HTTP port shared by listeners, a host is
// served by the routes of the most specific listener covering it only, even
// when that listener has no route for it (conformance test
// GatewayHTTPListenerIsolation).
func TestListenerIsolation(t *testing.T) {
	gw := gateway("infra", "gw",
		httpL("empty", 80, ""),
		httpL("wild", 80, "*.example.com"),
		httpL("wild-foo", 80, "*.foo.example.com"),
		httpL("abc", 80, "abc.foo.example.com"),
	)
	hosts := []string{"bar.com", "*.example.com", "*.foo.example.com", "abc.foo.example.com"}
	rEmpty := httpRoute("infra", "r-empty", []gwv1.ParentReference{sectionRef("gw", "empty")}, hosts, prefixRule("/empty"))
	rWild := httpRoute("infra", "r-wild", []gwv1.ParentReference{sectionRef("gw", "wild")}, hosts, prefixRule("/wild"))
	rAny := httpRoute("infra", "r-any", []gwv1.ParentReference{sectionRef("gw", "empty")}, nil, prefixRule("/any"))
	res := translate(gw, rEmpty, rWild, rAny, service("infra", "web", 80))
	fc := irListener(t, irGateway(t, res, "infra", "gw"), "http-80").FilterChains[0]
	want := []string{
		"*=r-any/0",
		// Owned by "wild": r-empty's *.example.com never serves them.
		"*.example.com=r-wild/0",
		// Owned by "wild-foo", which has no route: empty, so that
		// bar.foo.example.com is not served by "wild" or "empty".
		"*.foo.example.com=",
		"abc.foo.example.com=",
		// Owned by "empty".
		"bar.com=r-empty/0,r-any/0",
	}
	if got := vhostTable(fc); !equalStrings(got, want) {
		t.Errorf("virtual hosts\n got %q\nwant %q", got, want)
	}
}

// TestFallbackStaysInFilterChain: on HTTPS each listener has its own filter
// chain; a wildcard listener's routes never appear in the chain of a more
// specific listener, and routes of one port never on another.
func TestFallbackStaysInFilterChain(t *testing.T) {
	gw := gateway("infra", "gw",
		httpsL("foo", 443, "foo.example.com", "cert"),
		httpsL("wild", 443, "*.example.com", "cert"),
		httpL("plain", 8080, "foo.example.com"),
	)
	refs := []gwv1.ParentReference{parent("gw")}
	exact := httpRoute("infra", "exact", []gwv1.ParentReference{sectionRef("gw", "foo")}, nil, prefixRule("/a"))
	wild := httpRoute("infra", "wild", []gwv1.ParentReference{sectionRef("gw", "wild")}, nil, prefixRule("/c"))
	plain := httpRoute("infra", "plain", []gwv1.ParentReference{sectionRef("gw", "plain")}, nil, prefixRule("/p"))
	both := httpRoute("infra", "both", refs, []string{"*.example.com"}, prefixRule("/b"))
	res := translate(gw, exact, wild, plain, both, service("infra", "web", 80), tlsSecret("infra", "cert"))
	g := irGateway(t, res, "infra", "gw")
	var got []string
	for _, l := range g.Listeners {
		for _, fc := range l.FilterChains {
			got = append(got, fc.Name+": "+strings.Join(vhostTable(fc), " "))
		}
	}
	// On each listener "both" has the listener's hostname as effective
	// hostname, as the other route: ties, broken by name.
	want := []string{
		// The chains share one table whose virtual hosts answer 421 to
		// the other listener's chain (misdirected.go).
		"https-443/*.example.com: *.example.com=421!*.example.com,both/0,wild/0 foo.example.com=421!foo.example.com,both/0,exact/0",
		"https-443/foo.example.com: *.example.com=421!*.example.com,both/0,wild/0 foo.example.com=421!foo.example.com,both/0,exact/0",
		"http-8080: foo.example.com=both/0,plain/0",
	}
	if !equalStrings(got, want) {
		t.Errorf("filter chains\n got %q\nwant %q", got, want)
	}
}

// TestRedirectPort: a redirect without port uses the scheme's well-known
// port, or without scheme the port of each listener serving it.
func TestRedirectPort(t *testing.T) {
	redirectRule := func(path string, scheme *string, port *gwv1.PortNumber) gwv1.HTTPRouteRule {
		return gwv1.HTTPRouteRule{
			Matches: []gwv1.HTTPRouteMatch{exactMatch(path)},
			Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestRedirect,
				RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Scheme: scheme, Port: port}}},
		}
	}
	gw := gateway("infra", "gw", httpL("http", 80, ""), httpL("alt", 8080, ""))
	r := httpRoute("infra", "r", []gwv1.ParentReference{parent("gw")}, nil,
		redirectRule("/https", ptr("https"), nil),
		redirectRule("/http", ptr("http"), nil),
		redirectRule("/none", nil, nil),
		redirectRule("/explicit", ptr("https"), ptr(gwv1.PortNumber(8443))),
	)
	res := translate(gw, r)
	g := irGateway(t, res, "infra", "gw")
	for _, tc := range []struct {
		listener string
		want     map[string]uint32
	}{
		{"http-80", map[string]uint32{"/https": 443, "/http": 80, "/none": 80, "/explicit": 8443}},
		{"http-8080", map[string]uint32{"/https": 443, "/http": 80, "/none": 8080, "/explicit": 8443}},
	} {
		for _, rt := range vhost(t, irListener(t, g, tc.listener), "*").Routes {
			path := rt.Match.Path.Value
			if rt.Redirect == nil || rt.Redirect.Port == nil || *rt.Redirect.Port != tc.want[path] {
				t.Errorf("%s %s: redirect %+v, want port %d", tc.listener, path, rt.Redirect, tc.want[path])
			}
		}
	}
	// The compiled route is not modified: each listener gets its own copy.
	for _, cr := range res.Gateways[0].Listeners[0].FilterChains[0].RouteConfig.VirtualHosts[0].Routes {
		if cr.Match.Path.Value == "/none" && *cr.Redirect.Port != 80 {
			t.Errorf("port 80 listener's redirect changed to %d", *cr.Redirect.Port)
		}
	}
}

// TestCoveringHostnames: exactly the hostnames hostnameMatches accepts as
// patterns, most specific first.
func TestCoveringHostnames(t *testing.T) {
	for host, want := range map[string][]string{
		"a.b.example.com": {"a.b.example.com", "*.b.example.com", "*.example.com", "*.com", ""},
		"*.b.example.com": {"*.b.example.com", "*.example.com", "*.com", ""},
		"localhost":       {"localhost", ""},
		"":                {""},
	} {
		got := coveringHostnames(host)
		if !equalStrings(got, want) {
			t.Errorf("coveringHostnames(%q) = %q, want %q", host, got, want)
		}
		for i, p := range got {
			if !hostnameMatches(host, p) {
				t.Errorf("%q does not cover %q", p, host)
			}
			if i > 0 && !rankOf(got[i-1]).above(rankOf(p)) {
				t.Errorf("%q not ranked above %q", got[i-1], p)
			}
		}
	}
}
