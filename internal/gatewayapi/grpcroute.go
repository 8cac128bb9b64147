package gatewayapi

import (
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
	compileRules(rs, rules, gwv1.GRPCRouteRule{}, func(r *gwv1.GRPCRouteRule) *gwv1.SectionName { return r.Name }, t.compileGRPCRule)
}

func (t *translator) compileGRPCRule(rs *routeState, idx int, rule *gwv1.GRPCRouteRule) {
	var mbuf [2]ir.Match
	var kbuf [2]precedence
	irMatches, keys, ok := compileMatches(rs, idx, rule.Matches, grpcMatch, mbuf[:], kbuf[:])
	if !ok {
		return
	}
	var fs ruleFilters
	for i := range rule.Filters {
		f := &rule.Filters[i]
		err := t.applyFilter(rs, &fs, filterFields{string(f.Type), f.RequestHeaderModifier, f.ResponseHeaderModifier, f.RequestMirror, f.ExtensionRef, nil})
		if err != nil {
			rs.rules.drop(idx, err.reason, err.msg)
			return
		}
	}
	if rule.SessionPersistence != nil {
		rs.rules.drop(idx, string(gwv1.RouteReasonUnsupportedValue), "sessionPersistence is not supported")
		return
	}
	set := ruleBackends(t, rs, rule.BackendRefs, false, func(b *gwv1.GRPCBackendRef) (gwv1.BackendRef, []filterFields) {
		return b.BackendRef, grpcBackendFilters(b)
	})

	tmpl := ir.Route{RequestHeaders: fs.reqHdr, ResponseHeaders: fs.respHdr}
	clusters := fs.clusters
	fwd := set.forward()
	switch {
	case fs.blocked || fwd == nil:
		tmpl.DirectResponse = &ir.DirectResponse{Status: 500}
		clusters = nil
	default:
		fwd.Mirrors = fs.mirrors
		if fs.hostRewrite != nil {
			fwd.URLRewrite = &ir.URLRewrite{Hostname: fs.hostRewrite}
		}
		tmpl.Forward = fwd
		if len(clusters) == 0 {
			clusters = set.clusters
		} else {
			clusters = append(clusters, set.clusters...)
		}
	}
	rs.addRoutes(idx, tmpl, irMatches, keys, clusters)
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
