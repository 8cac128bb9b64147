package status

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
)

// stripTimes returns a copy of s with every condition's lastTransitionTime
// zeroed, for comparisons that must ignore when a status was computed.
func stripTimes(s *gatewayapi.Status) gatewayapi.Status {
	out := *s
	zero := func(cs []metav1.Condition) []metav1.Condition {
		if cs == nil {
			return nil
		}
		c := append([]metav1.Condition(nil), cs...)
		for i := range c {
			c[i].LastTransitionTime = metav1.Time{}
		}
		return c
	}
	if s.GatewayClass != nil {
		gc := *s.GatewayClass.DeepCopy()
		gc.Conditions = zero(gc.Conditions)
		out.GatewayClass = &gc
	}
	if s.Gateway != nil {
		g := *s.Gateway.DeepCopy()
		g.Conditions = zero(g.Conditions)
		for i := range g.Listeners {
			g.Listeners[i].Conditions = zero(g.Listeners[i].Conditions)
		}
		out.Gateway = &g
	}
	if s.ListenerSet != nil {
		l := *s.ListenerSet.DeepCopy()
		l.Conditions = zero(l.Conditions)
		for i := range l.Listeners {
			l.Listeners[i].Conditions = zero(l.Listeners[i].Conditions)
		}
		out.ListenerSet = &l
	}
	if s.Route != nil {
		r := *s.Route.DeepCopy()
		for i := range r.Parents {
			r.Parents[i].Conditions = zero(r.Parents[i].Conditions)
		}
		out.Route = &r
	}
	return out
}
