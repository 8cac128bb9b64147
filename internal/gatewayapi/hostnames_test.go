package gatewayapi

import (
	"strings"
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestHostnameMatches(t *testing.T) {
	tests := []struct {
		host, pattern string
		want          bool
	}{
		{"foo.example.com", "", true},
		{"foo.example.com", "foo.example.com", true},
		{"foo.example.com", "bar.example.com", false},
		{"foo.example.com", "*.example.com", true},
		{"foo.bar.example.com", "*.example.com", true},
		{"example.com", "*.example.com", false},
		{"fooexample.com", "*.example.com", false},
		{"*.example.com", "*.example.com", true},
		{"*.foo.example.com", "*.example.com", true},
		{"*.example.com", "*.foo.example.com", false},
		{"*.example.com", "foo.example.com", false},
	}
	for _, tc := range tests {
		if got := hostnameMatches(tc.host, tc.pattern); got != tc.want {
			t.Errorf("hostnameMatches(%q, %q) = %v, want %v", tc.host, tc.pattern, got, tc.want)
		}
	}
}

func TestEffectiveHostnames(t *testing.T) {
	tests := []struct {
		listener string
		route    []string
		want     []string
	}{
		{"", nil, []string{""}},
		{"foo.example.com", nil, []string{"foo.example.com"}},
		{"", []string{"b.example.com", "a.example.com", "a.example.com"}, []string{"a.example.com", "b.example.com"}},
		// The spec's examples: route hostnames not matching the listener
		// are ignored.
		{"*.example.com", []string{"test.example.com", "test.example.net"}, []string{"test.example.com"}},
		{"test.example.com", []string{"*.example.com"}, []string{"test.example.com"}},
		{"*.example.com", []string{"*.foo.example.com", "*.example.com", "foo.bar.example.com"}, []string{"*.example.com", "*.foo.example.com", "foo.bar.example.com"}},
		{"*.foo.example.com", []string{"*.example.com"}, []string{"*.foo.example.com"}},
		{"*.example.com", []string{"example.com"}, nil},
		{"foo.example.com", []string{"bar.example.com"}, nil},
	}
	for _, tc := range tests {
		got := effectiveHostnames(tc.listener, tc.route)
		if !equalStrings(got, tc.want) {
			t.Errorf("effectiveHostnames(%q, %v) = %q, want %q", tc.listener, tc.route, got, tc.want)
		}
	}
}

func TestNormalizeHostname(t *testing.T) {
	for h, want := range map[string]bool{
		"foo.example.com": true, "FOO.Example.com": true, "*.example.com": true, "localhost": true,
		"": false, "10.1.2.3": false, "::1": false, "*": false, "foo.*.com": false, "-a.com": false,
		"a..com": false, "a_b.com": false, strings.Repeat("a", 64) + ".com": false,
	} {
		if _, got := normalizeHostname(h); got != want {
			t.Errorf("normalizeHostname(%q) valid = %v, want %v", h, got, want)
		}
	}
}

// TestVirtualHostsFromHostnames checks virtual hosts on a merged HTTP port:
// one per effective hostname, holding the routes of the most specific
// listener covering it whose hostnames cover it, most specific first.
func TestVirtualHostsFromHostnames(t *testing.T) {
	gw := gateway("infra", "gw", httpL("any", 80, ""), httpL("wild", 80, "*.example.com"))
	a := httpRoute("infra", "a", []gwv1.ParentReference{parent("gw")}, []string{"a.example.com", "a.example.org"}, simpleRule())
	b := httpRoute("infra", "b", []gwv1.ParentReference{parent("gw")}, nil, simpleRule())
	res := translate(gw, a, b, service("infra", "web", 80))
	l := irListener(t, irGateway(t, res, "infra", "gw"), "http-80")
	if len(l.FilterChains) != 1 || len(l.FilterChains[0].ServerNames) != 0 {
		t.Fatalf("HTTP listener chains = %+v", l.FilterChains)
	}
	var names []string
	for _, v := range l.FilterChains[0].RouteConfig.VirtualHosts {
		names = append(names, v.Name+"="+strings.Join(routeNames(v), ","))
		if v.Hostname != v.Name {
			t.Errorf("vhost %s has hostname %s", v.Name, v.Hostname)
		}
	}
	want := []string{
		"*=httproute/infra/b/rule/0/match/0",
		"*.example.com=httproute/infra/b/rule/0/match/0",
		// a.example.com comes from both listeners and belongs to "wild":
		// its route a (exact hostname), then b (wildcard) as fallback.
		"a.example.com=httproute/infra/a/rule/0/match/0,httproute/infra/b/rule/0/match/0",
		// a.example.org belongs to "any": a, then b (no hostname).
		"a.example.org=httproute/infra/a/rule/0/match/0,httproute/infra/b/rule/0/match/0",
	}
	if !equalStrings(names, want) {
		t.Errorf("virtual hosts\n got %q\nwant %q", names, want)
	}
	if rc := l.FilterChains[0].RouteConfig.Name; rc != "infra/gw/http-80" {
		t.Errorf("route config name %q", rc)
	}
}
