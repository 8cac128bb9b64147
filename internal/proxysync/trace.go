package proxysync

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// # Tracing a NACK to routes
//
// A proxy rejects resources, not routes; the tenant who owns the route
// behind a rejected resource should see the rejection on the route too,
// on its parent entry for the Gateway. TraceRoutes asks a Tracer (which
// knows the Gateway's configuration: the controller's, from the IR) which
// routes stand behind the rejected resources of each NACK, and makes a
// ConditionType condition for each route's entry of that Gateway. What
// is traced:
//
//   - resources named in the proxy's error text (Envoy names the clusters
//     and listeners it fails to add), else, for delta xDS, the resources
//     the rejected responses changed; a state-of-the-world response
//     carries every resource of its type, so without a name in the error
//     it blames no route;
//   - route names (ir.Route names, "httproute/<ns>/<name>/rule/…") in the
//     error text: Envoy's route validation errors quote them.
//
// A rejected route configuration or virtual host whose error names no
// route is reported on the Gateway only: it holds many tenants' routes,
// and blaming them all would be wrong. Routes are given a condition only
// while a proxy rejects something of theirs; a route with none has no
// ConditionType condition at all, so that the condition costs no write
// of the many routes that are fine.

// RouteRef names a route: Kind is its kind ("HTTPRoute").
type RouteRef struct {
	Kind, Namespace, Name string
}

func (r RouteRef) String() string { return r.Kind + "/" + r.Namespace + "/" + r.Name }

// Tracer returns the routes of the Gateway ("ns/name") behind the
// rejected resources of type typ (a short type, "CDS") and the error text
// of the rejection. It is called only for Gateways with a NACK.
type Tracer func(gateway, typ string, resources []string, errText string) []RouteRef

// RouteCondition is the condition of a route's parent entries for one
// Gateway.
type RouteCondition struct {
	Gateway   types.NamespacedName
	Condition metav1.Condition
}

// MaxTracedRoutes bounds the routes one round gives a condition: a
// rejected cluster shared by ten thousand routes does not cost ten
// thousand writes at once (the Gateway's condition says it all).
const MaxTracedRoutes = 1000

// TraceRoutes returns the conditions of the routes traced from the NACKs
// of sums (Aggregate's), by route; nil when there is none. The first NACK
// (by node id) of a Gateway that traces to a route names it.
func TraceRoutes(sums map[string]*Summary, trace Tracer) map[RouteRef][]RouteCondition {
	if trace == nil {
		return nil
	}
	gws := make([]string, 0, len(sums))
	for gw, s := range sums {
		if len(s.Nacked) > 0 {
			gws = append(gws, gw)
		}
	}
	sort.Strings(gws)
	var out map[RouteRef][]RouteCondition
	n := 0
	for _, gw := range gws {
		ns, name, ok := strings.Cut(gw, "/")
		if !ok {
			continue
		}
		nn := types.NamespacedName{Namespace: ns, Name: name}
		done := map[RouteRef]bool{}
		for _, i := range sums[gw].Nacked {
			if i.Nack == nil {
				continue
			}
			named := mentioned(i.Resources, i.Nack.Error)
			if len(named) == 0 && i.Delta {
				named = i.Resources
			}
			for _, r := range trace(gw, i.Type, named, i.Nack.Error) {
				if done[r] || n >= MaxTracedRoutes {
					continue
				}
				done[r] = true
				n++
				if out == nil {
					out = map[RouteRef][]RouteCondition{}
				}
				out[r] = append(out[r], RouteCondition{Gateway: nn, Condition: metav1.Condition{
					Type:   ConditionType,
					Status: metav1.ConditionFalse,
					Reason: ReasonRejected,
					Message: truncate(fmt.Sprintf("Proxy %s (replica %s) of Gateway %s rejected %s version %s, which carries this route's configuration: %s",
						i.NodeID, i.Replica, gw, i.Type, i.Nack.Version, i.Nack.Error)),
				}})
			}
		}
	}
	return out
}

// mentioned returns the names of resources that occur in text.
func mentioned(resources []string, text string) []string {
	var out []string
	for _, r := range resources {
		if Mentions(text, r) {
			out = append(out, r)
		}
	}
	return out
}

// Mentions reports whether text names the resource name as a whole word:
// "ns/api/80" is in "cluster(s) ns/api/80: …" but not in "ns/api/8080".
func Mentions(text, name string) bool {
	if name == "" {
		return false
	}
	for i := 0; ; {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(name)
		if (start == 0 || !nameByte(text[start-1])) && (end == len(text) || !nameByte(text[end])) {
			return true
		}
		i = start + 1
	}
}

// nameByte reports whether b may be part of a resource name.
func nameByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_' || b == '.' || b == '/'
}

// truncate bounds a condition message to the API's 32,768 bytes.
func truncate(m string) string {
	const maxMessage = 32768
	if len(m) > maxMessage {
		return strings.ToValidUTF8(m[:maxMessage-3], "") + "..."
	}
	return m
}
