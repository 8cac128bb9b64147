package gatewayapi

import (
	"fmt"
	"github.com/portico-dev/portico/internal/resource"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/refs"
)

// What is served, told back to status.
//
// The statuses of Translate say what the Gateway API objects ask for. The
// xDS stage may still leave a piece out (a route or listener Envoy would
// refuse, which the checks here should have caught), or fail a Gateway
// and keep serving its previous configuration. A status must never claim
// configuration that is not served, so the pipeline amends the statuses
// with ServedStatuses:
//   - a Gateway whose served configuration is not its current translation
//     (kept an earlier one, or serves nothing) gets Programmed=False,
//     reason Invalid, with the error;
//   - a Gateway with pieces left out gets Programmed=False, reason
//     Invalid, naming them: the rest is served, but not what was asked;
//   - a route with a match left out gets, on its parent entry for that
//     Gateway, PartiallyInvalid=True, reason UnsupportedValue, with what
//     Envoy would refuse; the rest of the route is served.

// XDSOutcome is what the xDS stage did with one Gateway's IR.
type XDSOutcome struct {
	// Failed is the error when the Gateway's configuration could not be
	// translated (the previous one, if any, is served).
	Failed string
	// Dropped are the pieces left out, by what they are ("route
	// httproute/ns/name/rule/0/match/1", "listener http-80") with why.
	Dropped []Dropped
}

// Dropped is one piece of a Gateway's IR left out of its configuration.
type Dropped struct {
	// Route is the IR route name ("<kind>/<ns>/<name>/rule/<i>/match/<j>"),
	// empty for a listener.
	Route    string
	Listener string
	Err      string
}

// maxListed bounds how many dropped pieces a message names.
const maxListed = 5

// ServedStatuses returns set amended with the outcomes of the xDS stage,
// by Gateway ("ns/name"); set itself is not modified. Gateways without an
// outcome, or with a clean one, keep their statuses.
func ServedStatuses(set StatusSet, outcomes map[string]XDSOutcome) StatusSet {
	var edits []Status
	gws := make([]string, 0, len(outcomes))
	for gw := range outcomes {
		gws = append(gws, gw)
	}
	sort.Strings(gws)
	routeEdits := map[string]*Status{}
	for _, key := range gws {
		o := outcomes[key]
		if o.Failed == "" && len(o.Dropped) == 0 {
			continue
		}
		ns, name, _ := strings.Cut(key, "/")
		if s := set.Get(resource.KindGateway, ns, name); s != nil && s.Gateway != nil {
			msg := "the configuration served is not the current one: " + o.Failed
			if o.Failed == "" {
				msg = fmt.Sprintf("%d piece(s) of the configuration cannot be served and are left out: %s", len(o.Dropped), listDropped(o.Dropped))
			}
			edit := *s
			edit.Gateway = s.Gateway.DeepCopy()
			setCondition(&edit.Gateway.Conditions, string(gwv1.GatewayConditionProgrammed), string(gwv1.GatewayReasonInvalid), msg, s.Generation)
			edits = append(edits, edit)
		}
		for _, d := range o.Dropped {
			kind, rns, rname, ok := routeOfIRName(d.Route)
			if !ok {
				continue
			}
			sk := kind.String() + "/" + rns + "/" + rname
			edit := routeEdits[sk]
			if edit == nil {
				s := set.Get(kind, rns, rname)
				if s == nil || s.Route == nil {
					continue
				}
				c := *s
				c.Route = s.Route.DeepCopy()
				edit = &c
				routeEdits[sk] = edit
			}
			for i := range edit.Route.Parents {
				p := &edit.Route.Parents[i]
				if !parentIsGateway(p.ParentRef, rns, ns, name) {
					continue
				}
				setCondition(&p.Conditions, string(gwv1.RouteConditionPartiallyInvalid), string(gwv1.RouteReasonUnsupportedValue),
					fmt.Sprintf("not served by Gateway %s: %s: %s", key, strings.TrimPrefix(d.Route, irRoutePrefix(kind)), d.Err), edit.Generation)
			}
		}
	}
	keys := make([]string, 0, len(routeEdits))
	for k := range routeEdits {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		edits = append(edits, *routeEdits[k])
	}
	if len(edits) == 0 {
		return set
	}
	return set.With(edits...)
}

func listDropped(ds []Dropped) string {
	var parts []string
	for i, d := range ds {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("and %d more", len(ds)-maxListed))
			break
		}
		what := "listener " + d.Listener
		if d.Route != "" {
			what = "route " + d.Route
		}
		parts = append(parts, what+" ("+d.Err+")")
	}
	return strings.Join(parts, "; ")
}

// routeOfIRName parses irRouteName's "<kind>/<ns>/<name>/rule/…".
func routeOfIRName(s string) (kind resource.Kind, ns, name string, ok bool) {
	parts := strings.SplitN(s, "/", 4)
	if len(parts) < 4 {
		return 0, "", "", false
	}
	for _, k := range resource.RouteKinds {
		if irRoutePrefix(k) == parts[0]+"/" {
			return k, parts[1], parts[2], true
		}
	}
	return 0, "", "", false
}

// parentIsGateway reports whether ref (of a route in routeNS) names the
// Gateway ns/name, or a ListenerSet (whose Gateway the status of the
// entry is about as well: its listeners are that Gateway's).
func parentIsGateway(ref gwv1.ParentReference, routeNS, ns, name string) bool {
	p := refs.ParentOf(routeNS, ref)
	if p.Kind == refs.KindListenerSet {
		return true
	}
	return p.Namespace == ns && p.Name == name
}

// setCondition replaces or appends the condition typ; the status writer
// keeps lastTransitionTime when the status does not change.
func setCondition(conds *[]metav1.Condition, typ, reason, msg string, gen int64) {
	c := metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: reason, Message: truncateMessage(msg), ObservedGeneration: gen}
	if typ == string(gwv1.RouteConditionPartiallyInvalid) {
		c.Status = metav1.ConditionTrue
	}
	for i := range *conds {
		if (*conds)[i].Type == typ {
			(*conds)[i] = c
			return
		}
	}
	*conds = append(*conds, c)
}

func truncateMessage(msg string) string {
	if len(msg) > maxConditionMessage {
		return msg[:maxConditionMessage-3] + "..."
	}
	return msg
}
