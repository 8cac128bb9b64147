package gatewayapi

import (
	"fmt"
	"regexp"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/resource"
)

// compileGRPCRoute translates the rules of a GRPCRoute. A GRPCRoute
// without rules is treated as one rule matching every request, with no
// backend.
func (t *translator) compileGRPCRoute(rs *routeState, rules []gwv1.GRPCRouteRule) {
	if len(rules) == 0 {
		rules = []gwv1.GRPCRouteRule{{}}
	}
	rs.rules.total = len(rules)
	names := ruleNames{}
	for i := range rules {
		if names.duplicate(rs, i, rules[i].Name) {
			continue
		}
		t.compileGRPCRule(rs, i, &rules[i])
	}
}

func (t *translator) compileGRPCRule(rs *routeState, idx int, rule *gwv1.GRPCRouteRule) {
	matches := rule.Matches
	if len(matches) == 0 {
		matches = []gwv1.GRPCRouteMatch{{}}
	}
	irMatches := make([]ir.Match, len(matches))
	keys := make([]precedence, len(matches))
	for j := range matches {
		m, k, err := grpcMatch(&matches[j])
		if err != nil {
			rs.rules.drop(idx, err.reason, fmt.Sprintf("match %d: %s", j, err.msg))
			return
		}
		irMatches[j], keys[j] = m, k
	}

	var (
		reqHdr, respHdr *ir.HeaderModifier
		hostRewrite     *string // Host (:authority) set by the RequestHeaderModifier
		mirrors         []*ir.Mirror
		clusters        []*clusterDef
		blocked         bool // a filter cannot be applied: answer 500
		err             *ruleError
	)
	for _, f := range rule.Filters {
		switch f.Type {
		case gwv1.GRPCRouteFilterRequestHeaderModifier:
			if reqHdr != nil {
				err = unsupported("RequestHeaderModifier may be used once per rule")
				break
			}
			reqHdr, hostRewrite, err = headerModifier(f.RequestHeaderModifier, "RequestHeaderModifier", true)
		case gwv1.GRPCRouteFilterResponseHeaderModifier:
			if respHdr != nil {
				err = unsupported("ResponseHeaderModifier may be used once per rule")
				break
			}
			respHdr, _, err = headerModifier(f.ResponseHeaderModifier, "ResponseHeaderModifier", false)
		case gwv1.GRPCRouteFilterRequestMirror:
			var m *ir.Mirror
			var def *clusterDef
			if m, def, err = t.mirror(rs, f.RequestMirror); m != nil {
				mirrors = append(mirrors, m)
				clusters = append(clusters, def)
			}
		case gwv1.GRPCRouteFilterExtensionRef:
			blocked = true
			rs.rules.unresolvedRef(string(gwv1.RouteReasonInvalidKind), extensionMessage(f.ExtensionRef))
		default:
			blocked = true
			rs.rules.unresolvedRef(string(gwv1.RouteReasonInvalidKind), unsupportedFilterMessage(string(f.Type)))
		}
		if err != nil {
			rs.rules.drop(idx, err.reason, err.msg)
			return
		}
	}
	if rule.SessionPersistence != nil {
		rs.rules.drop(idx, string(gwv1.RouteReasonUnsupportedValue), "sessionPersistence is not supported")
		return
	}
	var set backendSet
	for k, br := range rule.BackendRefs {
		set.add(t.ruleBackend(rs, k, br.BackendObjectReference, len(br.Filters) > 0), br.Weight)
	}

	tmpl := ir.Route{RequestHeaders: reqHdr, ResponseHeaders: respHdr}
	fwd := set.forward()
	switch {
	case blocked || fwd == nil:
		tmpl.DirectResponse = &ir.DirectResponse{Status: 500}
		clusters = nil
	default:
		fwd.Mirrors = mirrors
		if hostRewrite != nil {
			fwd.URLRewrite = &ir.URLRewrite{Hostname: hostRewrite}
		}
		tmpl.Forward = fwd
		clusters = append(clusters, set.clusters...)
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

// grpcMatch translates a GRPCRouteMatch into a path match on
// "/<service>/<method>":
//   - Exact service and method: Exact "/service/method";
//   - Exact service only: PathPrefix "/service" (whole segments);
//   - Exact method only, or any RegularExpression: a regular expression,
//     with "[^/]+" standing for an unset part;
//   - no method match: every path.
func grpcMatch(m *gwv1.GRPCRouteMatch) (ir.Match, precedence, *ruleError) {
	out := ir.Match{}
	key := precedence{grpc: true, pathRank: rankPrefix}
	if mm := m.Method; mm != nil {
		typ := gwv1.GRPCMethodMatchExact
		if mm.Type != nil {
			typ = *mm.Type
		}
		svc, meth := "", ""
		if mm.Service != nil {
			svc = *mm.Service
		}
		if mm.Method != nil {
			meth = *mm.Method
		}
		if svc == "" && meth == "" {
			return out, key, unsupported("method match needs a service or a method")
		}
		key.serviceLen, key.methodLen = len(svc), len(meth)
		switch typ {
		case gwv1.GRPCMethodMatchExact:
			for _, v := range []string{svc, meth} {
				if strings.ContainsAny(v, "/?#") || !printableASCII(v) {
					return out, key, unsupported("method match: %q is not a valid gRPC service or method name", v)
				}
			}
			switch {
			case svc != "" && meth != "":
				out.Path = &ir.PathMatch{Type: ir.PathExact, Value: "/" + svc + "/" + meth}
				key.pathRank = rankExact
			case svc != "":
				out.Path = &ir.PathMatch{Type: ir.PathPrefix, Value: "/" + svc}
			default:
				out.Path = &ir.PathMatch{Type: ir.PathRegex, Value: "/[^/]+/" + regexp.QuoteMeta(meth)}
				key.pathRank = rankRegex
			}
		case gwv1.GRPCMethodMatchRegularExpression:
			svcRe, methRe := "[^/]+", "[^/]+"
			if svc != "" {
				if err := validRegex(svc); err != nil {
					return out, key, unsupported("service regular expression %q is invalid: %v", svc, err)
				}
				svcRe = "(?:" + svc + ")"
			}
			if meth != "" {
				if err := validRegex(meth); err != nil {
					return out, key, unsupported("method regular expression %q is invalid: %v", meth, err)
				}
				methRe = "(?:" + meth + ")"
			}
			out.Path = &ir.PathMatch{Type: ir.PathRegex, Value: "/" + svcRe + "/" + methRe}
			key.pathRank = rankRegex
		default:
			return out, key, unsupported("method match type %q is not supported", typ)
		}
	}
	seen := map[string]bool{}
	for _, h := range m.Headers {
		sm, err := stringMatch(string(h.Name), h.Value, (*string)(h.Type), "header")
		if err != nil {
			return out, key, err
		}
		if k := strings.ToLower(sm.Name); !seen[k] {
			seen[k] = true
			out.Headers = append(out.Headers, sm)
		}
	}
	key.headers = len(out.Headers)
	return out, key, nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// grpcRouteKind registers GRPCRoutes (kinds.go).
var grpcRouteKind = routeKind{
	kind:      resource.KindGRPCRoute,
	protocols: []gwv1.ProtocolType{gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType},
	vhosts:    true,
	grpc:      true,
	upstream:  backendHTTP,
	features: []features.FeatureName{
		features.SupportGRPCRoute,
		features.SupportGRPCRouteNamedRouteRule,
		features.SupportGRPCRouteRequestHeaderModifier,
	},
	compile: func(t *translator, rs *routeState, obj any) { t.compileGRPCRoute(rs, obj.(*gwv1.GRPCRoute).Spec.Rules) },
}
