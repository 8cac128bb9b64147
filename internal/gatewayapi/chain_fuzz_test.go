package gatewayapi

import (
	"bytes"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	xdstranslate "github.com/portico-dev/portico/internal/xds/translate"
)

// FuzzChain is the property test of the whole chain (Gateway API stage,
// then xDS stage): for a Gateway shared by well-formed routes and one added
// route built from fuzzed filters, header modifiers, matches, redirects,
// rewrites, retries and timeouts,
//   - the xDS stage leaves nothing out (Resources.Problems is empty):
//     every check it makes, the Gateway API stage made first, and reported
//     on the route's status;
//   - the Envoy route of every other route is byte-identical to the
//     translation without the added route, and none disappears.
func FuzzChain(f *testing.F) {
	f.Add("X-Tenant", "a", "/api", "^/v[0-9]+$", "ok.example", "/new", uint8(0), uint8(0))
	f.Add("Host", "backend", "/h", "(", "*.example", "", uint8(1), uint8(1))
	f.Add("host", "", "//", "/[a-z]{1000}", "", "/x?y", uint8(2), uint8(2))
	f.Add(":path", "a\nb", "/", ".*", "UPPER.example", "/", uint8(3), uint8(3))
	f.Add("x-big", string(bytes.Repeat([]byte("v"), 17000)), "/big", "a{2,3}", "a..b", "/p", uint8(4), uint8(5))
	f.Add("Content-Length", "12", "/cl", `\p{L}+`, "x.example", "/r", uint8(6), uint8(7))
	f.Fuzz(func(t *testing.T, hname, hvalue, path, regex, hostname, rewrite string, filters, matches uint8) {
		base := chainBase()
		without := chainXDS(t, base)
		with := chainXDS(t, append(base, fuzzedRoute(hname, hvalue, path, regex, hostname, rewrite, filters, matches)))
		for key, want := range without {
			got, ok := with[key]
			if !ok {
				t.Fatalf("route %s disappeared when another route was added", key)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("route %s changed when another route was added", key)
			}
		}
	})
}

// chainBase is a Gateway with HTTP and HTTPS listeners and routes of two
// tenants, created before the fuzzed one.
func chainBase() []any {
	gw := gateway("infra", "shared", allowAll(httpL("http", 80, "")), allowAll(httpsL("https", 443, "*.example", "cert")))
	gw.CreationTimestamp = at(0)
	a := httpRoute("team-a", "a", []gwv1.ParentReference{{Name: "shared", Namespace: ptr(gwv1.Namespace("infra"))}}, []string{"a.example"},
		gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/")}, BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)},
			Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gwv1.HTTPHeaderFilter{
				Set: []gwv1.HTTPHeader{{Name: "X-Team", Value: "a"}}}}}},
		gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{regexMatch("/v[0-9]+/.*")}, BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)}})
	a.CreationTimestamp = at(1)
	b := httpRoute("team-b", "b", []gwv1.ParentReference{{Name: "shared", Namespace: ptr(gwv1.Namespace("infra"))}}, nil,
		gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/b")}, BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)}})
	b.CreationTimestamp = at(2)
	return []any{gw, a, b,
		service("team-a", "web", 80), slice("team-a", "web", "web-1", 80, "10.0.0.1"),
		service("team-b", "web", 80), slice("team-b", "web", "web-1", 80, "10.0.0.2"),
		service("team-c", "web", 80), slice("team-c", "web", "web-1", 80, "10.0.0.3"),
		tlsSecret("infra", "cert")}
}

// fuzzedRoute is team-c's route: its filters and matches are chosen by
// the bits of filters and matches, their values fuzzed.
func fuzzedRoute(hname, hvalue, path, regex, hostname, rewrite string, filters, matches uint8) any {
	h := gwv1.HTTPHeader{Name: gwv1.HTTPHeaderName(hname), Value: hvalue}
	var fs []gwv1.HTTPRouteFilter
	if filters&1 != 0 {
		fs = append(fs, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gwv1.HTTPHeaderFilter{
			Set: []gwv1.HTTPHeader{h}, Remove: []string{hvalue}}})
	}
	if filters&2 != 0 {
		fs = append(fs, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gwv1.HTTPHeaderFilter{
			Add: []gwv1.HTTPHeader{h}}})
	}
	if filters&4 != 0 {
		fs = append(fs, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gwv1.HTTPRequestRedirectFilter{
			Hostname: ptr(gwv1.PreciseHostname(hostname)), Path: &gwv1.HTTPPathModifier{Type: gwv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr(rewrite)}}})
	}
	if filters&8 != 0 {
		fs = append(fs, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwv1.HTTPURLRewriteFilter{
			Hostname: ptr(gwv1.PreciseHostname(hostname)), Path: &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr(rewrite)}}})
	}
	if filters&16 != 0 {
		fs = append(fs, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{
			BackendRef: gwv1.BackendObjectReference{Name: "web", Port: ptr(gwv1.PortNumber(80))}}})
	}
	m := gwv1.HTTPRouteMatch{Path: &gwv1.HTTPPathMatch{Type: ptr([]gwv1.PathMatchType{gwv1.PathMatchPathPrefix, gwv1.PathMatchExact, gwv1.PathMatchRegularExpression}[int(matches)%3]), Value: ptr(path)}}
	if matches&4 != 0 {
		m.Headers = []gwv1.HTTPHeaderMatch{{Type: ptr(gwv1.HeaderMatchRegularExpression), Name: gwv1.HTTPHeaderName(hname), Value: regex}}
	}
	if matches&8 != 0 {
		m.QueryParams = []gwv1.HTTPQueryParamMatch{{Name: gwv1.HTTPHeaderName(hname), Value: hvalue}}
	}
	if matches&16 != 0 {
		m.Method = ptr(gwv1.HTTPMethod(hvalue))
	}
	rule := gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{m, regexMatch(regex)}, Filters: fs, BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)}}
	if matches&32 != 0 {
		rule.Timeouts = &gwv1.HTTPRouteTimeouts{Request: ptr(gwv1.Duration(rewrite)), BackendRequest: ptr(gwv1.Duration(path))}
	}
	if matches&64 != 0 {
		rule.Retry = &gwv1.HTTPRouteRetry{Codes: []gwv1.HTTPRouteRetryStatusCode{gwv1.HTTPRouteRetryStatusCode(len(hvalue))}, Backoff: ptr(gwv1.Duration(rewrite))}
	}
	var hosts []string
	if hostname != "" {
		hosts = []string{hostname}
	}
	r := httpRoute("team-c", "c", []gwv1.ParentReference{{Name: "shared", Namespace: ptr(gwv1.Namespace("infra"))}}, hosts, rule)
	r.CreationTimestamp = at(3)
	return r
}

// chainXDS translates objs through both stages and returns the encoding
// of every Envoy route of team-a's and team-b's routes, by route config,
// virtual host and route name. The xDS stage must leave nothing out.
func chainXDS(t *testing.T, objs []any) map[string][]byte {
	t.Helper()
	res := Translate(snapshot(objs...), Options{ControllerName: testController})
	out := map[string][]byte{}
	for _, gw := range res.Gateways {
		x, err := xdstranslate.Translate(gw)
		if err != nil {
			t.Fatalf("the xDS stage failed the Gateway: %v", err)
		}
		if len(x.Problems) > 0 {
			t.Fatalf("the xDS stage left out %s (%s): the Gateway API stage let it through", x.Problems[0].What(), x.Problems[0].Err)
		}
		for _, r := range x.Routes() {
			d, err := xdstranslate.Decode(r)
			if err != nil {
				t.Fatal(err)
			}
			rc := d.(*routev3.RouteConfiguration)
			for _, vh := range rc.VirtualHosts {
				for _, route := range vh.Routes {
					if strings.HasPrefix(route.Name, "httproute/team-c/") {
						continue // the added route's own
					}
					b, err := proto.MarshalOptions{Deterministic: true}.Marshal(route)
					if err != nil {
						t.Fatal(err)
					}
					out[rc.Name+"|"+vh.Name+"|"+route.Name] = b
				}
			}
		}
	}
	return out
}
