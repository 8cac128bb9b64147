package gatewayapi

import (
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
	compileRules(rs, rules, defaultHTTPRule, func(r *gwv1.HTTPRouteRule) *gwv1.SectionName { return r.Name }, t.compileHTTPRule)
}

func (t *translator) compileHTTPRule(rs *routeState, idx int, rule *gwv1.HTTPRouteRule) {
	var mbuf [2]ir.Match
	var kbuf [2]precedence
	irMatches, keys, ok := compileMatches(rs, idx, rule.Matches, httpMatch, mbuf[:], kbuf[:])
	if !ok {
		return
	}
	prefixOnly := true
	for _, m := range irMatches {
		prefixOnly = prefixOnly && m.Path != nil && m.Path.Type == ir.PathPrefix
	}

	var (
		fs      ruleFilters
		redir   *ir.Redirect
		rewrite *ir.URLRewrite
		cors    *ir.CORS
	)
	for i := range rule.Filters {
		f := &rule.Filters[i]
		var err *ruleError
		switch f.Type {
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
		case gwv1.HTTPRouteFilterCORS:
			if cors != nil {
				err = unsupported("CORS may be used once per rule")
				break
			}
			cors, err = corsPolicy(f.CORS)
		default:
			err = t.applyFilter(rs, &fs, filterFields{string(f.Type), f.RequestHeaderModifier, f.ResponseHeaderModifier, f.RequestMirror, f.ExtensionRef, nil})
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
	if redir != nil && len(fs.mirrors) > 0 {
		rs.rules.drop(idx, string(gwv1.RouteReasonIncompatibleFilters), "RequestMirror and RequestRedirect cannot be used in the same rule: a redirected request is not forwarded, so nothing would be mirrored")
		return
	}
	if fs.hostRewrite != nil && redir == nil {
		if rewrite != nil && rewrite.Hostname != nil {
			rs.rules.drop(idx, string(gwv1.RouteReasonIncompatibleFilters), "the Host header is set by both RequestHeaderModifier and URLRewrite.hostname")
			return
		}
		if rewrite == nil {
			rewrite = &ir.URLRewrite{}
		}
		rewrite.Hostname = fs.hostRewrite
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
	set := ruleBackends(t, rs, rule.BackendRefs, prefixOnly, func(b *gwv1.HTTPBackendRef) (gwv1.BackendRef, []filterFields) {
		return b.BackendRef, httpBackendFilters(b)
	})

	tmpl := ir.Route{RequestHeaders: fs.reqHdr, ResponseHeaders: fs.respHdr, CORS: cors}
	clusters := fs.clusters
	switch {
	case fs.blocked:
		tmpl.DirectResponse = &ir.DirectResponse{Status: 500}
		clusters = nil
	case redir != nil:
		tmpl.Redirect = redir
		clusters = nil
	default:
		if fwd := set.forward(); fwd != nil {
			fwd.URLRewrite, fwd.Mirrors = rewrite, fs.mirrors
			fwd.Timeout, fwd.BackendTimeout, fwd.Retry = reqTimeout, backendTimeout, retry
			tmpl.Forward = fwd
			if len(clusters) == 0 {
				clusters = set.clusters
			} else {
				clusters = append(clusters, set.clusters...)
			}
			fwds, fractions := splitByPath(fwd)
			if len(fwds) > 1 {
				rs.addSplitRoutes(idx, tmpl, fwds, fractions, irMatches, keys, clusters)
				return
			}
			tmpl.Forward = fwds[0]
		} else {
			tmpl.DirectResponse = &ir.DirectResponse{Status: 500}
			clusters = nil
		}
	}
	rs.addRoutes(idx, tmpl, irMatches, keys, clusters)
}

// ruleBackend resolves one backendRef of a rule with its filters
// (backendFilters), recording problems for ResolvedRefs; a nil cluster
// stands for an invalid backend, whose share of requests is answered with
// 500. A backendRef with a filter Portico cannot apply per backend is such
// a backend: the filter is never skipped.
func (t *translator) ruleBackend(rs *routeState, k int, ref gwv1.BackendObjectReference, filters []filterFields, prefixOnly bool) (*clusterDef, *ir.BackendFilters) {
	def, p := t.resolveBackend(rs, ref)
	if p != nil {
		rs.rules.unresolvedRef(p.reason, p.message)
		return nil, nil
	}
	headers, problem := backendFilters(k, filters, prefixOnly)
	if problem != "" {
		rs.rules.unresolvedRef(string(gwv1.RouteReasonUnsupportedValue), problem)
		return nil, nil
	}
	return def, headers
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
		features.SupportHTTPRouteBackendRequestHeaderModification,
		features.SupportHTTPRouteBackendURLRewrite,
		features.SupportHTTPRouteBackendProtocolWebSocket,
		features.SupportHTTPRouteBackendTimeout,
		features.SupportHTTPRouteCORS,
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
