package gatewayapi

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/resource"
)

// compiledRoute is one match of one valid rule, ready to be placed in
// virtual hosts.
type compiledRoute struct {
	route    *ir.Route // &ir, allocated with the compiledRoute
	ir       ir.Route
	key      precedence
	clusters []*clusterDef // backends and mirrors
	// withPort is route with the redirect port of portOf (see
	// withListenerPort), made once.
	withPort *ir.Route
	portOf   uint32
}

// irRouteName is the ir.Route name of match j of rule idx of a route:
// "<kind>/<ns>/<name>/rule/<idx>/match/<j>".
func irRouteName(rs *routeState, idx, j int) string {
	return irRoutePrefix(rs.kind) + rs.meta.Namespace + "/" + rs.meta.Name + "/rule/" + strconv.Itoa(idx) + "/match/" + strconv.Itoa(j)
}

// defaultHTTPRule is the rule the API server defaults an HTTPRoute without
// rules to.
var defaultHTTPRule = gwv1.HTTPRouteRule{}

// compileHTTPRoute translates the rules of an HTTPRoute. Invalid rules are
// dropped with a message; backend problems are recorded for ResolvedRefs.
func (t *translator) compileHTTPRoute(rs *routeState, rules []gwv1.HTTPRouteRule) {
	if len(rules) == 0 {
		rules = []gwv1.HTTPRouteRule{defaultHTTPRule}
	}
	rs.rules.total = len(rules)
	names := ruleNames{}
	for i := range rules {
		if names.duplicate(rs, i, rules[i].Name) {
			continue
		}
		t.compileHTTPRule(rs, i, &rules[i])
	}
}

// ruleNames finds rule names used twice in a route. The Standard CRDs
// reject such a route (v1.7.0); standalone input is not validated by an
// API server, so the later rule of a name is dropped with UnsupportedValue
// and the route is PartiallyInvalid, as an invalid rule makes it.
type ruleNames map[gwv1.SectionName]int

func (n ruleNames) duplicate(rs *routeState, idx int, name *gwv1.SectionName) bool {
	if name == nil {
		return false
	}
	if first, ok := n[*name]; ok {
		rs.rules.drop(idx, string(gwv1.RouteReasonUnsupportedValue),
			fmt.Sprintf("rule name %q is already used by rule %d; rule names must be unique", *name, first))
		return true
	}
	n[*name] = idx
	return false
}

func (t *translator) compileHTTPRule(rs *routeState, idx int, rule *gwv1.HTTPRouteRule) {
	matches := rule.Matches
	if len(matches) == 0 {
		matches = []gwv1.HTTPRouteMatch{{}}
	}
	irMatches := make([]ir.Match, len(matches))
	keys := make([]precedence, len(matches))
	prefixOnly := true
	for j := range matches {
		m, k, err := httpMatch(&matches[j])
		if err != nil {
			rs.rules.drop(idx, err.reason, fmt.Sprintf("match %d: %s", j, err.msg))
			return
		}
		irMatches[j], keys[j] = m, k
		prefixOnly = prefixOnly && m.Path != nil && m.Path.Type == ir.PathPrefix
	}

	var (
		reqHdr, respHdr *ir.HeaderModifier
		hostRewrite     *string // Host set by the RequestHeaderModifier
		redir           *ir.Redirect
		rewrite         *ir.URLRewrite
		mirrors         []*ir.Mirror
		clusters        []*clusterDef
		blocked         bool // a filter cannot be applied: answer 500
		err             *ruleError
	)
	for _, f := range rule.Filters {
		switch f.Type {
		case gwv1.HTTPRouteFilterRequestHeaderModifier:
			if reqHdr != nil {
				err = unsupported("RequestHeaderModifier may be used once per rule")
				break
			}
			reqHdr, hostRewrite, err = headerModifier(f.RequestHeaderModifier, "RequestHeaderModifier", true)
		case gwv1.HTTPRouteFilterResponseHeaderModifier:
			if respHdr != nil {
				err = unsupported("ResponseHeaderModifier may be used once per rule")
				break
			}
			respHdr, _, err = headerModifier(f.ResponseHeaderModifier, "ResponseHeaderModifier", false)
		case gwv1.HTTPRouteFilterRequestRedirect:
			if redir != nil {
				err = unsupported("RequestRedirect may be used once per rule")
				break
			}
			redir, err = redirect(f.RequestRedirect, prefixOnly)
		case gwv1.HTTPRouteFilterURLRewrite:
			if rewrite != nil {
				err = unsupported("URLRewrite may be used once per rule")
				break
			}
			rewrite, err = urlRewrite(f.URLRewrite, prefixOnly)
		case gwv1.HTTPRouteFilterRequestMirror:
			var m *ir.Mirror
			var def *clusterDef
			if m, def, err = t.mirror(rs, f.RequestMirror); m != nil {
				mirrors = append(mirrors, m)
				clusters = append(clusters, def)
			}
		case gwv1.HTTPRouteFilterExtensionRef:
			blocked = true
			rs.rules.unresolvedRef(string(gwv1.RouteReasonInvalidKind), extensionMessage(f.ExtensionRef))
		default:
			// CORS, ExternalAuth and types unknown to Portico.
			blocked = true
			rs.rules.unresolvedRef(string(gwv1.RouteReasonInvalidKind), unsupportedFilterMessage(string(f.Type)))
		}
		if err != nil {
			rs.rules.drop(idx, err.reason, err.msg)
			return
		}
	}
	if redir != nil && rewrite != nil {
		rs.rules.drop(idx, string(gwv1.RouteReasonIncompatibleFilters), "RequestRedirect and URLRewrite cannot be used in the same rule")
		return
	}
	if redir != nil && len(mirrors) > 0 {
		rs.rules.drop(idx, string(gwv1.RouteReasonIncompatibleFilters), "RequestMirror and RequestRedirect cannot be used in the same rule: a redirected request is not forwarded, so nothing would be mirrored")
		return
	}
	if hostRewrite != nil && redir == nil {
		if rewrite != nil && rewrite.Hostname != nil {
			rs.rules.drop(idx, string(gwv1.RouteReasonIncompatibleFilters), "the Host header is set by both RequestHeaderModifier and URLRewrite.hostname")
			return
		}
		if rewrite == nil {
			rewrite = &ir.URLRewrite{}
		}
		rewrite.Hostname = hostRewrite
	}
	retry, rerr := retryPolicy(rule.Retry)
	if rerr != nil {
		rs.rules.drop(idx, rerr.reason, rerr.msg)
		return
	}
	if rule.SessionPersistence != nil {
		rs.rules.drop(idx, string(gwv1.RouteReasonUnsupportedValue), "sessionPersistence is not supported")
		return
	}
	reqTimeout, backendTimeout, terr := timeouts(rule.Timeouts)
	if terr != nil {
		rs.rules.drop(idx, terr.reason, terr.msg)
		return
	}
	var set backendSet
	for k, br := range rule.BackendRefs {
		set.add(t.ruleBackend(rs, k, br.BackendObjectReference, len(br.Filters) > 0), br.Weight)
	}

	tmpl := ir.Route{RequestHeaders: reqHdr, ResponseHeaders: respHdr}
	switch {
	case blocked:
		tmpl.DirectResponse = &ir.DirectResponse{Status: 500}
		clusters = nil
	case redir != nil:
		tmpl.Redirect = redir
		clusters = nil
	default:
		if fwd := set.forward(); fwd != nil {
			fwd.URLRewrite, fwd.Mirrors = rewrite, mirrors
			fwd.Timeout, fwd.BackendTimeout, fwd.Retry = reqTimeout, backendTimeout, retry
			tmpl.Forward = fwd
			clusters = append(clusters, set.clusters...)
		} else {
			tmpl.DirectResponse = &ir.DirectResponse{Status: 500}
			clusters = nil
		}
	}
	for j := range irMatches {
		cr := &compiledRoute{ir: tmpl, key: keys[j], clusters: clusters}
		cr.route = &cr.ir
		cr.ir.Name = irRouteName(rs, idx, j)
		cr.ir.Match = irMatches[j]
		cr.key.setRoute(rs, idx, j)
		rs.rules.routes = append(rs.rules.routes, cr)
	}
}

// unsupportedFilterMessage reports a filter type Portico does not
// implement. Like an unresolvable ExtensionRef, such a filter is never
// skipped: its rule answers 500.
func unsupportedFilterMessage(typ string) string {
	return fmt.Sprintf("filter type %q is not supported; requests matching its rule are answered with 500", typ)
}

// ruleBackend resolves one backendRef of a rule, recording problems for
// ResolvedRefs; nil stands for an invalid backend, whose share of requests
// is answered with 500. A backendRef with filters is such a backend:
// Portico does not implement per-backend filters and must not skip them.
func (t *translator) ruleBackend(rs *routeState, k int, ref gwv1.BackendObjectReference, filters bool) *clusterDef {
	def, p := t.resolveBackend(rs, ref)
	switch {
	case p != nil:
		rs.rules.unresolvedRef(p.reason, p.message)
		return nil
	case filters:
		rs.rules.unresolvedRef(string(gwv1.RouteReasonUnsupportedValue),
			fmt.Sprintf("backendRefs[%d]: filters on backendRefs are not supported; requests for this backend are answered with 500", k))
		return nil
	}
	return def
}

func extensionMessage(ref *gwv1.LocalObjectReference) string {
	if ref == nil {
		return "ExtensionRef filter without extensionRef; requests matching its rule are answered with 500"
	}
	return fmt.Sprintf("ExtensionRef filter %s %q is not supported; requests matching its rule are answered with 500", groupKind(string(ref.Group), string(ref.Kind)), ref.Name)
}

var httpMethods = map[gwv1.HTTPMethod]bool{
	gwv1.HTTPMethodGet: true, gwv1.HTTPMethodHead: true, gwv1.HTTPMethodPost: true,
	gwv1.HTTPMethodPut: true, gwv1.HTTPMethodDelete: true, gwv1.HTTPMethodConnect: true,
	gwv1.HTTPMethodOptions: true, gwv1.HTTPMethodTrace: true, gwv1.HTTPMethodPatch: true,
}

// httpMatch translates one HTTPRouteMatch and computes its precedence.
func httpMatch(m *gwv1.HTTPRouteMatch) (ir.Match, precedence, *ruleError) {
	var out ir.Match
	var key precedence
	typ, value := gwv1.PathMatchPathPrefix, "/"
	if m.Path != nil {
		if m.Path.Type != nil {
			typ = *m.Path.Type
		}
		if m.Path.Value != nil {
			value = *m.Path.Value
		}
	}
	switch typ {
	case gwv1.PathMatchExact, gwv1.PathMatchPathPrefix:
		if err := checkPath(value); err != nil {
			return out, key, unsupported("path %q: %v", value, err)
		}
		pt := ir.PathExact
		key.pathRank = rankExact
		if typ == gwv1.PathMatchPathPrefix {
			pt = ir.PathPrefix
			key.pathRank = rankPrefix
			// A trailing "/" of a prefix is ignored.
			if len(value) > 1 {
				value = strings.TrimSuffix(value, "/")
			}
		}
		out.Path = &ir.PathMatch{Type: pt, Value: value}
	case gwv1.PathMatchRegularExpression:
		if err := validRegex(value); err != nil {
			return out, key, unsupported("path regular expression %q is invalid: %v", value, err)
		}
		out.Path = &ir.PathMatch{Type: ir.PathRegex, Value: value}
		key.pathRank = rankRegex
	default:
		return out, key, unsupported("path match type %q is not supported", typ)
	}
	key.pathLen = len(value)

	for _, h := range m.Headers {
		sm, err := stringMatch(string(h.Name), h.Value, (*string)(h.Type), "header")
		if err != nil {
			return out, key, err
		}
		// Only the first of equivalent (case-insensitive) names counts.
		if !slices.ContainsFunc(out.Headers, func(o ir.StringMatch) bool { return strings.EqualFold(o.Name, sm.Name) }) {
			out.Headers = append(out.Headers, sm)
		}
	}
	for _, q := range m.QueryParams {
		sm, err := stringMatch(string(q.Name), q.Value, (*string)(q.Type), "query parameter")
		if err != nil {
			return out, key, err
		}
		if !slices.ContainsFunc(out.QueryParams, func(o ir.StringMatch) bool { return o.Name == sm.Name }) {
			out.QueryParams = append(out.QueryParams, sm)
		}
	}
	if m.Method != nil {
		if !httpMethods[*m.Method] {
			return out, key, unsupported("method %q is not supported", *m.Method)
		}
		out.Method = string(*m.Method)
		key.method = true
	}
	key.headers, key.queries = len(out.Headers), len(out.QueryParams)
	return out, key, nil
}

// stringMatch translates a header or query parameter match. typ is nil for
// Exact.
func stringMatch(name, value string, typ *string, what string) (ir.StringMatch, *ruleError) {
	sm := ir.StringMatch{Name: name, Type: ir.StringExact, Value: value}
	if !validHeaderName(name) {
		return sm, unsupported("%s name %q is invalid", what, name)
	}
	t := "Exact"
	if typ != nil {
		t = *typ
	}
	switch t {
	case "Exact":
		if !validHeaderValue(value) {
			return sm, unsupported("%s %q: value contains control characters", what, name)
		}
	case "RegularExpression":
		if err := validRegex(value); err != nil {
			return sm, unsupported("%s %q: regular expression %q is invalid: %v", what, name, value, err)
		}
		sm.Type = ir.StringRegex
	default:
		return sm, unsupported("%s match type %q is not supported", what, t)
	}
	return sm, nil
}

// httpRouteKind registers HTTPRoutes (kinds.go).
var httpRouteKind = routeKind{
	kind:      resource.KindHTTPRoute,
	protocols: []gwv1.ProtocolType{gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType},
	vhosts:    true,
	upstream:  backendHTTP,
	features: []features.FeatureName{
		features.SupportHTTPRoute,
		features.SupportHTTPRoute303RedirectStatusCode,
		features.SupportHTTPRoute307RedirectStatusCode,
		features.SupportHTTPRoute308RedirectStatusCode,
		features.SupportHTTPRouteBackendProtocolH2C,
		features.SupportHTTPRouteBackendProtocolWebSocket,
		features.SupportHTTPRouteBackendTimeout,
		features.SupportHTTPRouteDestinationPortMatching,
		features.SupportHTTPRouteHostRewrite,
		features.SupportHTTPRouteMethodMatching,
		features.SupportHTTPRouteNamedRouteRule,
		features.SupportHTTPRouteParentRefPort,
		features.SupportHTTPRoutePathRedirect,
		features.SupportHTTPRoutePathRewrite,
		features.SupportHTTPRoutePortRedirect,
		features.SupportHTTPRouteQueryParamMatching,
		features.SupportHTTPRouteRequestMirror,
		features.SupportHTTPRouteRequestMultipleMirrors,
		features.SupportHTTPRouteRequestPercentageMirror,
		features.SupportHTTPRouteRequestTimeout,
		features.SupportHTTPRouteResponseHeaderModification,
		features.SupportHTTPRouteRetryCodes,
		features.SupportHTTPRouteRetryConnectionError,
		features.SupportHTTPRouteSchemeRedirect,
	},
	compile: func(t *translator, rs *routeState, obj any) { t.compileHTTPRoute(rs, obj.(*gwv1.HTTPRoute).Spec.Rules) },
}
