package gatewayapi

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/resource"
)

// ruleValidity translates a one-rule route and returns the Accepted
// condition of its parent and whether the Gateway got configuration for it.
func ruleValidity(t *testing.T, rule gwv1.HTTPRouteRule) (metav1.Condition, *ir.Route) {
	t.Helper()
	r := httpRoute("infra", "r", []gwv1.ParentReference{parent("gw")}, nil, rule)
	res := translate(gateway("infra", "gw", httpL("http", 80, "")), r, service("infra", "web", 80))
	p := routeParent(t, res, resource.KindHTTPRoute, "infra", "r", 0)
	c := cond(t, p.Conditions, string(gwv1.RouteConditionAccepted))
	rc := irListener(t, irGateway(t, res, "infra", "gw"), "http-80").FilterChains[0].RouteConfig
	if c.Status == metav1.ConditionFalse {
		if len(rc.VirtualHosts) != 0 {
			t.Errorf("a route that is not accepted produced configuration")
		}
		return c, nil
	}
	return c, rc.VirtualHosts[0].Routes[0]
}

func TestRuleValidation(t *testing.T) {
	hdr := func(typ gwv1.HeaderMatchType, name, value string) gwv1.HTTPRouteMatch {
		m := prefixMatch("/")
		m.Headers = []gwv1.HTTPHeaderMatch{{Type: &typ, Name: gwv1.HTTPHeaderName(name), Value: value}}
		return m
	}
	query := func(typ gwv1.QueryParamMatchType, value string) gwv1.HTTPRouteMatch {
		m := prefixMatch("/")
		m.QueryParams = []gwv1.HTTPQueryParamMatch{{Type: &typ, Name: "q", Value: value}}
		return m
	}
	method := func(m string) gwv1.HTTPRouteMatch {
		x := prefixMatch("/")
		x.Method = ptr(gwv1.HTTPMethod(m))
		return x
	}
	redirectF := gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Hostname: ptr(gwv1.PreciseHostname("example.com"))}}
	rewriteF := gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwv1.HTTPURLRewriteFilter{Hostname: ptr(gwv1.PreciseHostname("example.com"))}}
	prefixRewrite := gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwv1.HTTPURLRewriteFilter{
		Path: &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr("/v2")}}}
	dupHeader := gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gwv1.HTTPHeaderFilter{
		Set: []gwv1.HTTPHeader{{Name: "X-A", Value: "1"}}, Remove: []string{"x-a"}}}
	status := func(code int) gwv1.HTTPRouteFilter {
		return gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gwv1.HTTPRequestRedirectFilter{StatusCode: &code}}
	}
	backends := []gwv1.HTTPBackendRef{backend("web", 80)}

	unsupported := string(gwv1.RouteReasonUnsupportedValue)
	tests := []struct {
		name   string
		rule   gwv1.HTTPRouteRule
		reason string // Accepted reason
	}{
		{"valid regex path", gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{regexMatch(`/api/v[0-9]+/.*`)}}, string(gwv1.RouteReasonAccepted)},
		{"invalid regex path", gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{regexMatch(`/api/(`)}}, unsupported},
		{"Perl lookahead is not RE2", gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{regexMatch(`/(?=a)`)}}, unsupported},
		{"path without slash", gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("api")}}, unsupported},
		{"path with //", gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{exactMatch("/a//b")}}, unsupported},
		{"unknown path type", gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr(gwv1.PathMatchType("Glob")), Value: ptr("/")}}}}, unsupported},
		{"header regex valid", gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{hdr(gwv1.HeaderMatchRegularExpression, "x-v", "v[0-9]")}}, string(gwv1.RouteReasonAccepted)},
		{"header regex invalid", gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{hdr(gwv1.HeaderMatchRegularExpression, "x-v", "[")}}, unsupported},
		{"header match type unknown", gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{hdr("Prefix", "x-v", "a")}}, unsupported},
		{"header name invalid", gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{hdr(gwv1.HeaderMatchExact, ":path", "a")}}, unsupported},
		{"query regex with a literal brace", gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{query(gwv1.QueryParamMatchRegularExpression, "a{2")}}, string(gwv1.RouteReasonAccepted)},
		{"query regex really invalid", gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{query(gwv1.QueryParamMatchRegularExpression, "(?P<>a)")}}, unsupported},
		{"method known", gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{method("PATCH")}}, string(gwv1.RouteReasonAccepted)},
		{"method unknown", gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{method("BREW")}}, unsupported},
		{"redirect and rewrite", gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{redirectF, rewriteF}}, string(gwv1.RouteReasonIncompatibleFilters)},
		{"two rewrites", gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{rewriteF, rewriteF}, BackendRefs: backends}, unsupported},
		{"ReplacePrefixMatch with prefix match", gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/v1")}, Filters: []gwv1.HTTPRouteFilter{prefixRewrite}, BackendRefs: backends}, string(gwv1.RouteReasonAccepted)},
		{"ReplacePrefixMatch with default match", gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{prefixRewrite}, BackendRefs: backends}, string(gwv1.RouteReasonAccepted)},
		{"ReplacePrefixMatch with exact match", gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{exactMatch("/v1")}, Filters: []gwv1.HTTPRouteFilter{prefixRewrite}, BackendRefs: backends}, unsupported},
		{"ReplacePrefixMatch with one exact of two", gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/a"), exactMatch("/v1")}, Filters: []gwv1.HTTPRouteFilter{prefixRewrite}, BackendRefs: backends}, unsupported},
		{"header set and removed: the first entry counts", gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{dupHeader}, BackendRefs: backends}, string(gwv1.RouteReasonAccepted)},
		{"redirect 308", gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{status(308)}}, string(gwv1.RouteReasonAccepted)},
		{"redirect 200", gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{status(200)}}, unsupported},
		{"redirect scheme ftp", gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestRedirect,
			RequestRedirect: &gwv1.HTTPRequestRedirectFilter{Scheme: ptr("ftp")}}}}, unsupported},
		{"filter without its field", gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestHeaderModifier}}, BackendRefs: backends}, unsupported},
		{"retry", gwv1.HTTPRouteRule{Retry: &gwv1.HTTPRouteRetry{Codes: []gwv1.HTTPRouteRetryStatusCode{500}, Attempts: ptr(2), Backoff: ptr(gwv1.Duration("100ms"))}, BackendRefs: backends}, string(gwv1.RouteReasonAccepted)},
		{"retry attempts 0", gwv1.HTTPRouteRule{Retry: &gwv1.HTTPRouteRetry{Attempts: ptr(0)}, BackendRefs: backends}, string(gwv1.RouteReasonAccepted)},
		{"retry negative attempts", gwv1.HTTPRouteRule{Retry: &gwv1.HTTPRouteRetry{Attempts: ptr(-1)}, BackendRefs: backends}, unsupported},
		{"retry code out of range", gwv1.HTTPRouteRule{Retry: &gwv1.HTTPRouteRetry{Codes: []gwv1.HTTPRouteRetryStatusCode{200}}, BackendRefs: backends}, unsupported},
		{"retry backoff invalid", gwv1.HTTPRouteRule{Retry: &gwv1.HTTPRouteRetry{Backoff: ptr(gwv1.Duration("soon"))}, BackendRefs: backends}, unsupported},
		{"session persistence", gwv1.HTTPRouteRule{SessionPersistence: &gwv1.SessionPersistence{}, BackendRefs: backends}, unsupported},
		{"timeouts valid", gwv1.HTTPRouteRule{Timeouts: &gwv1.HTTPRouteTimeouts{Request: ptr(gwv1.Duration("10s")), BackendRequest: ptr(gwv1.Duration("2s500ms"))}, BackendRefs: backends}, string(gwv1.RouteReasonAccepted)},
		{"timeout invalid", gwv1.HTTPRouteRule{Timeouts: &gwv1.HTTPRouteTimeouts{Request: ptr(gwv1.Duration("1.5s"))}, BackendRefs: backends}, unsupported},
		{"backend timeout above request", gwv1.HTTPRouteRule{Timeouts: &gwv1.HTTPRouteTimeouts{Request: ptr(gwv1.Duration("1s")), BackendRequest: ptr(gwv1.Duration("2s"))}, BackendRefs: backends}, unsupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := ruleValidity(t, tc.rule)
			if c.Reason != tc.reason {
				t.Errorf("Accepted = %s/%s (%s), want reason %s", c.Status, c.Reason, c.Message, tc.reason)
			}
			if c.Status == metav1.ConditionFalse && !strings.Contains(c.Message, "rule 0") {
				t.Errorf("message %q does not name the rule", c.Message)
			}
		})
	}
}

func TestPartiallyInvalidRoute(t *testing.T) {
	good := gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/ok")}, BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)}}
	bad := gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{regexMatch("/bad(")}, BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)}}
	r := httpRoute("infra", "r", []gwv1.ParentReference{parent("gw")}, nil, good, bad)
	res := translate(gateway("infra", "gw", httpL("http", 80, "")), r, service("infra", "web", 80))
	p := routeParent(t, res, resource.KindHTTPRoute, "infra", "r", 0)
	wantCond(t, p.Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
	pi := cond(t, p.Conditions, string(gwv1.RouteConditionPartiallyInvalid))
	if pi.Status != metav1.ConditionTrue || pi.Reason != string(gwv1.RouteReasonUnsupportedValue) || !strings.HasPrefix(pi.Message, "Dropped Rule") || !strings.Contains(pi.Message, "rule 1") {
		t.Errorf("PartiallyInvalid = %+v", pi)
	}
	v := vhost(t, irListener(t, irGateway(t, res, "infra", "gw"), "http-80"), "*")
	if got := routeNames(v); len(got) != 1 || got[0] != "httproute/infra/r/rule/0/match/0" {
		t.Errorf("routes = %v, want only rule 0", got)
	}
	// A fully valid route has no PartiallyInvalid condition.
	res = translate(gateway("infra", "gw", httpL("http", 80, "")), httpRoute("infra", "r", []gwv1.ParentReference{parent("gw")}, nil, good), service("infra", "web", 80))
	if hasCond(routeParent(t, res, resource.KindHTTPRoute, "infra", "r", 0).Conditions, string(gwv1.RouteConditionPartiallyInvalid)) {
		t.Error("PartiallyInvalid on a valid route")
	}
}

func TestFilterTranslation(t *testing.T) {
	redirectRule := gwv1.HTTPRouteRule{
		Matches: []gwv1.HTTPRouteMatch{prefixMatch("/old")},
		Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gwv1.HTTPRequestRedirectFilter{
			Scheme: ptr("https"), Hostname: ptr(gwv1.PreciseHostname("New.Example.com")), Port: ptr(int32(8443)), StatusCode: ptr(301),
			Path: &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr("/new")},
		}}},
		BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)},
	}
	_, r := ruleValidity(t, redirectRule)
	rd := r.Redirect
	if rd == nil || r.Forward != nil || *rd.Scheme != "https" || *rd.Hostname != "new.example.com" || *rd.Port != 8443 || rd.StatusCode != 301 ||
		rd.Path.Type != ir.PrefixMatchReplace || rd.Path.Value != "/new" {
		t.Errorf("redirect = %+v", r)
	}
	_, r = ruleValidity(t, gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gwv1.HTTPRequestRedirectFilter{}}}})
	// Neither scheme nor port: the listener's port (80).
	if r.Redirect == nil || r.Redirect.StatusCode != 302 || r.Redirect.Scheme != nil || r.Redirect.Port == nil || *r.Redirect.Port != 80 {
		t.Errorf("default redirect = %+v", r.Redirect)
	}

	rewriteRule := gwv1.HTTPRouteRule{
		Filters: []gwv1.HTTPRouteFilter{
			{Type: gwv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwv1.HTTPURLRewriteFilter{
				Hostname: ptr(gwv1.PreciseHostname("internal.example.com")),
				Path:     &gwv1.HTTPPathModifier{Type: gwv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr("/index.html")}}},
			{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gwv1.HTTPHeaderFilter{
				Set: []gwv1.HTTPHeader{{Name: "X-Set", Value: "1"}}, Add: []gwv1.HTTPHeader{{Name: "X-Add", Value: "2"}}, Remove: []string{"X-Gone"}}},
			{Type: gwv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gwv1.HTTPHeaderFilter{Add: []gwv1.HTTPHeader{{Name: "X-Resp", Value: "3"}}}},
		},
		// Zero disables both timeouts.
		Timeouts:    &gwv1.HTTPRouteTimeouts{Request: ptr(gwv1.Duration("0s")), BackendRequest: ptr(gwv1.Duration("0s"))},
		BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)},
	}
	_, r = ruleValidity(t, rewriteRule)
	f := r.Forward
	if f == nil || *f.URLRewrite.Hostname != "internal.example.com" || f.URLRewrite.Path.Type != ir.FullPathReplace || f.URLRewrite.Path.Value != "/index.html" {
		t.Fatalf("rewrite = %+v", f)
	}
	if *f.Timeout != 0 || *f.BackendTimeout != 0 {
		t.Errorf("timeouts = %v %v", *f.Timeout, *f.BackendTimeout)
	}
	if r.RequestHeaders.Set[0] != (ir.Header{Name: "X-Set", Value: "1"}) || r.RequestHeaders.Add[0] != (ir.Header{Name: "X-Add", Value: "2"}) ||
		r.RequestHeaders.Remove[0] != "X-Gone" || r.ResponseHeaders.Add[0] != (ir.Header{Name: "X-Resp", Value: "3"}) {
		t.Errorf("headers = %+v %+v", r.RequestHeaders, r.ResponseHeaders)
	}

	// ExtensionRef: accepted, unresolved, answered with 500.
	ext := gwv1.HTTPRouteRule{Filters: []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterExtensionRef,
		ExtensionRef: &gwv1.LocalObjectReference{Group: "example.com", Kind: "Auth", Name: "a"}}},
		BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)}}
	rt := httpRoute("infra", "r", []gwv1.ParentReference{parent("gw")}, nil, ext)
	res := translate(gateway("infra", "gw", httpL("http", 80, "")), rt, service("infra", "web", 80))
	p := routeParent(t, res, resource.KindHTTPRoute, "infra", "r", 0)
	wantCond(t, p.Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
	wantCond(t, p.Conditions, string(gwv1.RouteConditionResolvedRefs), metav1.ConditionFalse, string(gwv1.RouteReasonInvalidKind))
	ir0 := vhost(t, irListener(t, irGateway(t, res, "infra", "gw"), "http-80"), "*").Routes[0]
	if ir0.DirectResponse == nil || ir0.DirectResponse.Status != 500 {
		t.Errorf("ExtensionRef rule = %+v, want a direct 500", ir0)
	}
}

func TestParseDuration(t *testing.T) {
	ok := map[string]time.Duration{
		"0s": 0, "1h": time.Hour, "1h30m": 90 * time.Minute, "500ms": 500 * time.Millisecond,
		"99999h": 99999 * time.Hour, "1h2m3s4ms": time.Hour + 2*time.Minute + 3*time.Second + 4*time.Millisecond,
	}
	for s, want := range ok {
		if got, err := parseDuration(s); err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "1", "s", "1.5s", "-1s", "100000s", "1us", "1h1m1s1ms1s", "1d", " 1s"} {
		if _, err := parseDuration(s); err == nil {
			t.Errorf("parseDuration(%q) succeeded", s)
		}
	}
}
