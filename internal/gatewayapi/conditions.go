package gatewayapi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxConditionMessage is the longest message the API server accepts in a
// metav1.Condition.
const maxConditionMessage = 32768

// conditions accumulates the conditions of one status object, all with the
// same observedGeneration.
type conditions struct {
	gen  int64
	list []metav1.Condition
}

func newConditions(gen int64) *conditions { return &conditions{gen: gen} }

// set adds a condition, replacing any earlier one of the same type.
func (c *conditions) set(typ string, ok bool, reason, message string) {
	st := metav1.ConditionFalse
	if ok {
		st = metav1.ConditionTrue
	}
	if len(message) > maxConditionMessage {
		message = message[:maxConditionMessage-3] + "..."
	}
	cond := metav1.Condition{Type: typ, Status: st, Reason: reason, Message: message, ObservedGeneration: c.gen}
	for i := range c.list {
		if c.list[i].Type == typ {
			c.list[i] = cond
			return
		}
	}
	c.list = append(c.list, cond)
}

// done returns the list. Conditions carry no lastTransitionTime: the
// translator never reads the status it replaces; the status writer stamps
// times against the live object (package status).
func (c *conditions) done() []metav1.Condition { return c.list }

// problem is why a condition is False: a reason constant and a message.
type problem struct {
	reason  string
	message string
}

// groupKind names a kind in messages: "Kind" for the core group,
// "group/Kind" otherwise.
func groupKind(group, kind string) string {
	if group == "" {
		return kind
	}
	return group + "/" + kind
}
