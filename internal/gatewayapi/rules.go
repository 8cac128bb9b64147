package gatewayapi

import (
	"fmt"
	"slices"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
)

// The compilation of rules that the HTTP and gRPC kinds of route share:
// the rules of a route (compileRules), the matches of a rule
// (compileMatches), the filters of the types both kinds have
// (applyFilter), the backendRefs of a rule (ruleBackends) and the routes
// of a valid rule, one per match (addRoutes). What is one kind's own stays
// in its file: HTTP redirects, rewrites, retries and timeouts
// (httproute.go), gRPC method matches (grpcroute.go).

// compileRules compiles the rules of a route of rule type R: a route
// without rules has the one rule none; a rule whose name an earlier rule
// has is dropped (ruleNames); compile compiles each other rule. name gives
// the name of a rule.
func compileRules[R any](rs *routeState, rules []R, none R, name func(*R) *gwv1.SectionName, compile func(rs *routeState, idx int, rule *R)) {
	if len(rules) == 0 {
		rules = []R{none}
	}
	rs.rules.total = len(rules)
	names := ruleNames{}
	for i := range rules {
		if names.duplicate(rs, i, name(&rules[i])) {
			continue
		}
		compile(rs, i, &rules[i])
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

// compileMatches translates the matches of rule idx with match; a rule
// without matches has one, the zero match M. It reports false, having
// dropped the rule, when a match is invalid.
//
// The lists are mbuf and kbuf when they have room (the caller's, on its
// stack: the routes copy the matches and keys they are made of).
func compileMatches[M any](rs *routeState, idx int, matches []M, match func(*M) (ir.Match, precedence, *ruleError), mbuf []ir.Match, kbuf []precedence) ([]ir.Match, []precedence, bool) {
	if len(matches) == 0 {
		var zero [1]M
		matches = zero[:]
	}
	irMatches, keys := mbuf[:0], kbuf[:0]
	if len(matches) > cap(mbuf) || len(matches) > cap(kbuf) {
		irMatches, keys = make([]ir.Match, 0, len(matches)), make([]precedence, 0, len(matches))
	}
	irMatches, keys = irMatches[:len(matches)], keys[:len(matches)]
	for j := range matches {
		m, k, err := match(&matches[j])
		if err != nil {
			rs.rules.drop(idx, err.reason, fmt.Sprintf("match %d: %s", j, err.msg))
			return nil, nil, false
		}
		irMatches[j], keys[j] = m, k
	}
	return irMatches, keys, true
}

// ruleFilters is what the filters of the types the HTTP and gRPC kinds
// share make of a rule, as applyFilter applies them in order.
type ruleFilters struct {
	reqHdr, respHdr *ir.HeaderModifier
	hostRewrite     *string // Host (:authority for gRPC) set by the RequestHeaderModifier
	mirrors         []*ir.Mirror
	clusters        []*clusterDef // of the mirrors
	blocked         bool          // a filter cannot be applied: answer 500
}

// filterFields are the fields of an HTTP or a gRPC route filter that the
// two kinds share: the type, as a string (the shared types have
// the same names in both), and the configuration of the shared types.
type filterFields struct {
	typ                                           string
	requestHeaderModifier, responseHeaderModifier *gwv1.HTTPHeaderFilter
	requestMirror                                 *gwv1.HTTPRequestMirrorFilter
	extensionRef                                  *gwv1.LocalObjectReference
	urlRewrite                                    *gwv1.HTTPURLRewriteFilter // HTTP backendRefs only
}

// applyFilter applies to fs a filter of route rs whose type is none of its
// kind's own: RequestHeaderModifier, ResponseHeaderModifier, RequestMirror,
// ExtensionRef (never resolved: the rule answers 500), or a type Portico
// does not implement (likewise). An error drops the rule.
func (t *translator) applyFilter(rs *routeState, fs *ruleFilters, f filterFields) *ruleError {
	var err *ruleError
	switch f.typ {
	case string(gwv1.HTTPRouteFilterRequestHeaderModifier):
		if fs.reqHdr != nil {
			return unsupported("RequestHeaderModifier may be used once per rule")
		}
		fs.reqHdr, fs.hostRewrite, err = headerModifier(f.requestHeaderModifier, "RequestHeaderModifier", true)
	case string(gwv1.HTTPRouteFilterResponseHeaderModifier):
		if fs.respHdr != nil {
			return unsupported("ResponseHeaderModifier may be used once per rule")
		}
		fs.respHdr, _, err = headerModifier(f.responseHeaderModifier, "ResponseHeaderModifier", false)
	case string(gwv1.HTTPRouteFilterRequestMirror):
		var m *ir.Mirror
		var def *clusterDef
		if m, def, err = t.mirror(rs, f.requestMirror); m != nil {
			fs.mirrors = append(fs.mirrors, m)
			fs.clusters = append(fs.clusters, def)
		}
	case string(gwv1.HTTPRouteFilterExtensionRef):
		fs.blocked = true
		rs.rules.unresolvedRef(string(gwv1.RouteReasonInvalidKind), extensionMessage(f.extensionRef))
	default:
		// ExternalAuth and types unknown to Portico (CORS is an HTTPRoute
		// filter: httproute.go).
		fs.blocked = true
		rs.rules.unresolvedRef(string(gwv1.RouteReasonInvalidKind), unsupportedFilterMessage(f.typ))
	}
	return err
}

// unsupportedFilterMessage reports a filter type Portico does not
// implement. Like an unresolvable ExtensionRef, such a filter is never
// skipped: its rule answers 500.
func unsupportedFilterMessage(typ string) string {
	return fmt.Sprintf("filter type %q is not supported; requests matching its rule are answered with 500", typ)
}

func extensionMessage(ref *gwv1.LocalObjectReference) string {
	if ref == nil {
		return "ExtensionRef filter without extensionRef; requests matching its rule are answered with 500"
	}
	return fmt.Sprintf("ExtensionRef filter %s %q is not supported; requests matching its rule are answered with 500", groupKind(string(ref.Group), string(ref.Kind)), ref.Name)
}

// ruleBackends resolves the backendRefs of a rule (ruleBackend) into its
// backend set; prefixOnly says whether every match of the rule is a
// PathPrefix (as a ReplacePrefixMatch rewrite needs); ref gives a backendRef's reference and weight and its
// filters (backend_filters.go).
func ruleBackends[B any](t *translator, rs *routeState, backendRefs []B, prefixOnly bool, ref func(*B) (gwv1.BackendRef, []filterFields)) backendSet {
	var set backendSet
	set.reserve(len(backendRefs))
	for k := range backendRefs {
		br, filters := ref(&backendRefs[k])
		def, headers := t.ruleBackend(rs, k, br.BackendObjectReference, filters, prefixOnly)
		set.add(def, br.Weight, headers)
	}
	return set
}

// addRoutes adds the routes of the valid rule idx: one per match, each
// tmpl with its name and match, needing clusters.
func (rs *routeState) addRoutes(idx int, tmpl ir.Route, matches []ir.Match, keys []precedence, clusters []*clusterDef) {
	crs := make([]compiledRoute, len(matches)) // one allocation per rule
	rs.rules.routes = slices.Grow(rs.rules.routes, len(matches))
	for j := range matches {
		cr := &crs[j]
		*cr = compiledRoute{ir: tmpl, key: keys[j], clusters: clusters}
		cr.route = &cr.ir
		cr.ir.Name = irRouteName(rs, idx, j)
		cr.ir.Match = matches[j]
		cr.key.setRoute(rs, idx, j)
		rs.rules.routes = append(rs.rules.routes, cr)
	}
}

// addSplitRoutes adds the routes of the valid rule idx whose backends
// rewrite paths differently (splitByPath): per match, one route per
// forward of fwds, in order, matching its fraction of the requests.
func (rs *routeState) addSplitRoutes(idx int, tmpl ir.Route, fwds []*ir.Forward, fractions []*uint32, matches []ir.Match, keys []precedence, clusters []*clusterDef) {
	for j := range matches {
		for g, fwd := range fwds {
			cr := &compiledRoute{ir: tmpl, key: keys[j], clusters: clusters}
			cr.route = &cr.ir
			cr.ir.Name = fmt.Sprintf("%s/path/%d", irRouteName(rs, idx, j), g)
			cr.ir.Match = matches[j]
			cr.ir.Match.Fraction = fractions[g]
			cr.ir.Forward = fwd
			cr.key.setRoute(rs, idx, j)
			cr.key.part = g
			rs.rules.routes = append(rs.rules.routes, cr)
		}
	}
}
