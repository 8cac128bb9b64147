package gatewayapi

import (
	"fmt"
	"slices"
	"strconv"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
)

// The rules of TLSRoutes, TCPRoutes and UDPRoutes: a rule forwards whole
// connections (datagrams, for UDP) to its backendRefs by weight. The CRDs
// allow one rule; a route read from files with more keeps the first and
// is PartiallyInvalid (the others are dropped, with a message).
//
// Choices where the specification leaves room:
//   - A backendRef that cannot be resolved keeps its weight: that share of
//     connections is closed at once (ir.WeightedBackend.Invalid), as the
//     500s of HTTPRoute; ResolvedRefs=False names it.
//   - A route without rules, or whose rule has no backendRefs, is Accepted
//     and its connections are closed.

// l4Rule is the compiled rule of a TLSRoute, TCPRoute or UDPRoute.
type l4Rule struct {
	// name is the rule's stable name, "<kind>/<ns>/<name>/rule/0".
	name     string
	backends []ir.WeightedBackend
	// clusters are the clusters of the valid backends.
	clusters []*clusterDef
}

// compileL4 compiles the rules of a TLSRoute, TCPRoute or UDPRoute, given
// as their backendRefs.
func (t *translator) compileL4(rs *routeState, rules [][]gwv1.BackendRef) {
	rs.rules.total = len(rules)
	r := &l4Rule{name: irRoutePrefix(rs.kind) + rs.meta.Namespace + "/" + rs.meta.Name + "/rule/0"}
	rs.rules.l4 = r
	if len(rules) == 0 {
		return
	}
	for i := 1; i < len(rules); i++ {
		rs.rules.drop(i, string(gwv1.RouteReasonUnsupportedValue), "a "+rs.kind.String()+" has one rule; this one is not used")
	}
	for k, b := range rules[0] {
		w := int32(1)
		if b.Weight != nil {
			w = min(max(*b.Weight, 0), maxWeight)
		}
		def, p := t.resolveBackend(rs, b.BackendObjectReference)
		if p != nil {
			rs.rules.unresolvedRef(p.reason, fmt.Sprintf("backendRefs[%d]: %s", k, p.message))
			r.backends = append(r.backends, ir.WeightedBackend{Weight: uint32(w), Invalid: true})
			continue
		}
		r.backends = append(r.backends, ir.WeightedBackend{Cluster: def.name, Weight: uint32(w)})
		r.clusters = append(r.clusters, def)
	}
}

// l4Route is the IR of an l4Rule.
func (r *l4Rule) tcpRoute() *ir.TCPForward {
	return &ir.TCPForward{Name: r.name, Backends: r.backends}
}

// l4Uses are the cluster uses of an l4Rule, for the IR's cluster counts.
func (r *l4Rule) uses() []clusterUse {
	out := make([]clusterUse, 0, len(r.clusters))
	for _, def := range r.clusters {
		u := clusterUse{def: def, l4: true}
		if !slices.Contains(out, u) {
			out = append(out, u)
		}
	}
	return out
}

// chainName names an IR filter chain of a TLS listener's route: the
// listener's IR name, its mode and the SNI hostname.
func chainName(listener string, l *listener, host string) string {
	mode := "terminate"
	if l.passthrough {
		mode = "passthrough"
	}
	return listener + "/" + mode + "/" + vhostName(host)
}

func portName(prefix string, port int32) string { return prefix + "-" + strconv.Itoa(int(port)) }
