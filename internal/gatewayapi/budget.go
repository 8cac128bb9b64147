package gatewayapi

import (
	"fmt"
	"slices"
	"sort"

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

// A Gateway has a budget too, Options.MaxGatewayExpansion: the Envoy
// routes of all the routes attached to it, admitted oldest first (by
// creation time, then namespace and name, as conflicts between routes are
// settled). A route that does not fit in what older routes left is not
// attached to that Gateway: its parent entry gets Accepted=False,
// UnsupportedValue, saying so. Older routes are never displaced by newer
// ones, so one tenant cannot push another's routes out by adding its own.
// The incremental engine's routes-only fast path does not apply budgets:
// it falls back to retranslating the Gateway whenever a budget could bind.

// DefaultMaxGatewayExpansion is the default Options.MaxGatewayExpansion,
// a configuration an Envoy serves in well under a second and about a
// hundred MiB (BENCHMARKS.md: 10,000 routes).
const DefaultMaxGatewayExpansion = 100000

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

func (t *translator) gatewayLimit() int {
	switch l := t.opts.MaxGatewayExpansion; {
	case l == 0:
		return DefaultMaxGatewayExpansion
	default:
		return l
	}
}

// onGateway is the expansion of rs's attachments to listeners of g.
func (rs *routeState) onGateway(g *gatewayState) int {
	matches := len(rs.rules.routes)
	n := 0
	for _, ps := range rs.parents {
		for _, a := range ps.atts {
			if !a.lost && a.listener.gw == g {
				n += len(a.hostnames) * matches
			}
		}
	}
	return n
}

// enforceGatewayBudgets admits the routes attached to each Gateway oldest
// first within its budget and detaches the rest from it; it records the
// Gateway's admitted total and whether a route was refused.
func (t *translator) enforceGatewayBudgets() {
	limit := t.gatewayLimit()
	byGW := map[*gatewayState][]*routeState{}
	for _, rs := range t.routes {
		seen := map[*gatewayState]bool{}
		for _, ps := range rs.parents {
			for _, a := range ps.atts {
				if g := a.listener.gw; !a.lost && !seen[g] {
					seen[g] = true
					byGW[g] = append(byGW[g], rs)
				}
			}
		}
	}
	refused := false
	for _, g := range t.gwOrder {
		routes := byGW[g]
		sort.SliceStable(routes, func(i, j int) bool {
			a, b := routes[i].meta, routes[j].meta
			return olderFirst(a.CreationTimestamp, b.CreationTimestamp, a.Namespace, a.Name, b.Namespace, b.Name)
		})
		total := 0
		g.budgetHit = false
		for _, rs := range routes {
			n := rs.onGateway(g)
			if limit < 0 || total+n <= limit {
				total += n
				continue
			}
			g.budgetHit, refused = true, true
			msg := fmt.Sprintf("not served by Gateway %s/%s: its budget of %d Envoy routes (--max-gateway-expansion) is used by older routes (%d), and this route needs %d more; older routes are never displaced",
				g.obj.Namespace, g.obj.Name, limit, total, n)
			for _, ps := range rs.parents {
				for _, a := range ps.atts {
					if a.listener.gw == g {
						a.lost = true
					}
				}
				if ps.fail == nil {
					live := ps.atts[:0]
					for _, a := range ps.atts {
						if !a.lost {
							live = append(live, a)
						}
					}
					if len(live) == 0 && len(ps.atts) > 0 {
						ps.fail = &problem{string(gwv1.RouteReasonUnsupportedValue), msg}
					}
					ps.atts = live
				}
			}
		}
		g.expansion = total
	}
	if refused {
		// Lost attachments leave the listeners' lists.
		for _, g := range t.gwOrder {
			for _, l := range g.merged {
				kept := l.attachments[:0]
				for _, a := range l.attachments {
					if !a.lost {
						kept = append(kept, a)
					}
				}
				l.attachments = kept
			}
		}
	}
}

// fastPathWithinBudgets reports whether replacing the old states of the
// changed routes by t.routes keeps every Gateway they touch within its
// budget with no route refused, so that the routes-only fast path gives
// what a retranslation would; it then records the Gateways' new totals.
func (t *translator) fastPathWithinBudgets(old set[*routeState]) bool {
	limit := t.gatewayLimit()
	if limit < 0 {
		return true
	}
	delta := map[*gatewayState]int{}
	for rs := range old {
		for _, g := range gatewaysOf(rs) {
			delta[g] -= rs.onGateway(g)
		}
	}
	for _, rs := range t.routes {
		for _, g := range gatewaysOf(rs) {
			delta[g] += rs.onGateway(g)
		}
	}
	for g, d := range delta {
		if g.budgetHit || g.expansion+d > limit {
			return false
		}
	}
	for g, d := range delta {
		g.expansion += d
	}
	return true
}

// gatewaysOf lists the Gateways rs is attached to, each once.
func gatewaysOf(rs *routeState) []*gatewayState {
	var out []*gatewayState
	for _, ps := range rs.parents {
		for _, a := range ps.atts {
			if g := a.listener.gw; !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	return out
}
