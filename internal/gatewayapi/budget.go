package gatewayapi

import (
	"fmt"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Budgets: what one object may expand into.
//
// A route is small and its Envoy configuration need not be: every match
// of every rule is one Envoy route in every virtual host of every listener
// it attaches to. 32 parentRefs × 16 hostnames × 128 matches is 65,536
// Envoy routes from one 10 kB object, and thirty of them took standalone
// Portico to 412 MB. So a route whose direct expansion (the sum over its
// accepted listeners of its effective hostnames there, times its compiled
// matches) exceeds Options.MaxRouteExpansion is not attached anywhere: each
// of its parents gets Accepted=False, reason UnsupportedValue, with the
// figures. The check looks at the route alone, so it does not depend on
// which other routes exist or on translation order, and every replica
// decides alike. Copies made by hostname fallback (a wildcard route is also
// served in the more specific virtual hosts of other routes) are not
// counted: they are bounded by the other routes' own budgets.

// DefaultMaxRouteExpansion is the default Options.MaxRouteExpansion: far
// above what a route written by hand reaches (a route with 16 hostnames,
// 8 rules of 8 matches and 2 parents is 2,048), far below what makes a
// proxy's configuration a problem.
const DefaultMaxRouteExpansion = 4096

// expansion is the number of Envoy routes rs's attachments make.
func (rs *routeState) expansion() int {
	matches := len(rs.rules.routes)
	n := 0
	for _, ps := range rs.parents {
		for _, a := range ps.atts {
			n += len(a.hostnames) * matches
		}
	}
	return n
}

// enforceBudget detaches rs when it expands beyond the limit (0 means
// DefaultMaxRouteExpansion, negative no limit).
func (t *translator) enforceBudget(rs *routeState) {
	limit := t.opts.MaxRouteExpansion
	if limit == 0 {
		limit = DefaultMaxRouteExpansion
	}
	if limit < 0 {
		return
	}
	n := rs.expansion()
	if n <= limit {
		return
	}
	msg := fmt.Sprintf("the route expands into %d Envoy routes (its matches × the hostnames of every listener it attaches to), more than the %d one route may (--max-route-expansion); it is not served: split it into smaller routes",
		n, limit)
	for _, ps := range rs.parents {
		if ps.fail == nil && len(ps.atts) > 0 {
			ps.fail = &problem{string(gwv1.RouteReasonUnsupportedValue), msg}
			ps.atts = nil
		}
	}
}
