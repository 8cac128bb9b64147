package gatewayapi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxConditionMessage is the longest message the API server accepts in a
// metav1.Condition.
const maxConditionMessage = 32768

// KeepTransitionTimes stamps the LastTransitionTime of every condition of
// next and returns next. A condition keeps the LastTransitionTime of the
// condition of the same Type in prev when that one has the same Status;
// otherwise (the condition is new, or its status changed) it gets now.
// prev is the status currently on the object (nil when it has none); it is
// not modified. This is the same rule as apimachinery's
// meta.SetStatusCondition, applied to a whole computed condition list, so
// that status writers can compare desired and current status and skip
// no-op updates.
func KeepTransitionTimes(prev, next []metav1.Condition, now metav1.Time) []metav1.Condition {
	for i := range next {
		next[i].LastTransitionTime = now
		for j := range prev {
			if prev[j].Type == next[i].Type {
				if prev[j].Status == next[i].Status && !prev[j].LastTransitionTime.IsZero() {
					next[i].LastTransitionTime = prev[j].LastTransitionTime
				}
				break
			}
		}
	}
	return next
}

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

// done stamps transition times against prev and returns the list.
func (c *conditions) done(prev []metav1.Condition, now metav1.Time) []metav1.Condition {
	return KeepTransitionTimes(prev, c.list, now)
}

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
