package gatewayapi

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// routeStatuses emits the status of every route with a parentRef of ours;
// other routes get none. The translator never reads a route's status: the
// entries of ours left on a route that no longer names our parents are the
// status writer's to remove (it knows the live object).
func (t *translator) routeStatuses() {
	t.statuses = slices.Grow(t.statuses, len(t.routes))
	for _, rs := range t.routes {
		if len(rs.parents) == 0 {
			continue
		}
		var st *gwv1.RouteStatus
		var conds []metav1.Condition // three per parent, allocated with the status
		if len(rs.parents) == 1 {
			one := &oneParentStatus{}
			st, conds = &one.status, one.conds[:]
			st.Parents = one.parents[:0]
		} else {
			st = &gwv1.RouteStatus{Parents: make([]gwv1.RouteParentStatus, 0, len(rs.parents))}
			conds = make([]metav1.Condition, 3*len(rs.parents))
		}
		gen := rs.meta.Generation
		for i, ps := range rs.parents {
			// Accepted, ResolvedRefs and at most PartiallyInvalid.
			c := conditions{gen: gen, list: conds[3*i : 3*i : 3*i+3]}
			if ps.fail != nil {
				c.set(string(gwv1.RouteConditionAccepted), false, ps.fail.reason, ps.fail.message)
			} else {
				c.set(string(gwv1.RouteConditionAccepted), true, string(gwv1.RouteReasonAccepted), acceptedMessage(ps))
			}
			if len(rs.rules.unresolved) > 0 {
				c.set(string(gwv1.RouteConditionResolvedRefs), false, rs.rules.unresolvedReason, joinUnique(rs.rules.unresolved))
			} else {
				c.set(string(gwv1.RouteConditionResolvedRefs), true, string(gwv1.RouteReasonResolvedRefs), "all references are resolved")
			}
			if ps.fail == nil && len(rs.rules.dropped) > 0 {
				c.set(string(gwv1.RouteConditionPartiallyInvalid), true, string(gwv1.RouteReasonUnsupportedValue),
					"Dropped Rule(s): "+joinUnique(rs.rules.dropped))
			}
			st.Parents = append(st.Parents, gwv1.RouteParentStatus{
				ParentRef:      *ps.ref.DeepCopy(),
				ControllerName: gwv1.GatewayController(t.opts.ControllerName),
				Conditions:     c.done(),
			})
		}
		t.statuses = append(t.statuses, Status{
			Kind: rs.kind, Namespace: rs.meta.Namespace, Name: rs.meta.Name, Generation: gen, Route: st,
		})
	}
}

// oneParentStatus is the status of a route with one parent, allocated
// together.
type oneParentStatus struct {
	status  gwv1.RouteStatus
	parents [1]gwv1.RouteParentStatus
	conds   [3]metav1.Condition
}

// acceptedMessage is the message of an accepted parent. Attachment does
// not depend on the status of the Gateway or listeners (the specification
// of AttachedRoutes), so a route attached to a Gateway that is not accepted
// is Accepted; the message says that it is not served.
func acceptedMessage(ps *parentState) string {
	for _, a := range ps.atts {
		if a.listener.programmed() {
			return "the route is attached"
		}
	}
	if len(ps.atts) > 0 && !ps.atts[0].listener.gw.accepted {
		g := ps.atts[0].listener.gw.obj
		return fmt.Sprintf("the route is attached, but Gateway %s/%s is not accepted: the route is not served", g.Namespace, g.Name)
	}
	return "the route is attached, but none of its listeners is programmed: the route is not served"
}

// joinUnique joins messages with "; ", each once, in first-seen order: a
// backend referenced by several rules is reported once.
func joinUnique(msgs []string) string {
	seen := make(map[string]bool, len(msgs))
	out := make([]string, 0, len(msgs))
	for _, m := range msgs {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return strings.Join(out, "; ")
}
