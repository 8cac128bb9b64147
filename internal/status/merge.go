package status

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/refs"
)

// The merge functions build the status to write from the desired status and
// the live object's status. They never modify their arguments. Conditions
// keep the live lastTransitionTime when their status did not change, so a
// desired status that only differs by the time it was computed is a no-op.
//
// Conditions of types Portico is not responsible for are kept as they are,
// after ours, in their live order: a type with a domain prefix
// ("example.com/Audited") that is not Portico's own belongs to another
// writer (the spec: implementations must not remove or modify conditions
// whose type they are not responsible for). Unprefixed types are the
// Gateway API's, which the implementation owns: one Portico no longer sets
// is removed.

// ownConditionPrefix is the domain of Portico's own condition types.
const ownConditionPrefix = "portico.dev/"

// foreignCondition reports whether typ belongs to another writer.
func foreignCondition(typ string) bool {
	return strings.Contains(typ, "/") && !strings.HasPrefix(typ, ownConditionPrefix)
}

// keepTransitionTimes stamps the LastTransitionTime of every condition of
// next and returns next. A condition keeps the LastTransitionTime of the
// condition of the same Type in live when that one has the same Status;
// otherwise (the condition is new, or its status changed) it gets now.
// This is apimachinery's meta.SetStatusCondition rule applied to a whole
// desired list: the translator computes conditions without times, and this
// is the one place they get them.
func keepTransitionTimes(live, next []metav1.Condition, now metav1.Time) []metav1.Condition {
	for i := range next {
		next[i].LastTransitionTime = now
		for j := range live {
			if live[j].Type == next[i].Type {
				if live[j].Status == next[i].Status && !live[j].LastTransitionTime.IsZero() {
					next[i].LastTransitionTime = live[j].LastTransitionTime
				}
				break
			}
		}
	}
	return next
}

func mergeConditions(live, desired []metav1.Condition, now metav1.Time) []metav1.Condition {
	var out []metav1.Condition
	if desired != nil {
		out = keepTransitionTimes(live, append([]metav1.Condition(nil), desired...), now)
	}
	for _, c := range live {
		if foreignCondition(c.Type) && !slices.ContainsFunc(out, func(o metav1.Condition) bool { return o.Type == c.Type }) {
			out = append(out, c)
		}
	}
	return out
}

func mergeGatewayClass(live gwv1.GatewayClassStatus, desired *gwv1.GatewayClassStatus, now metav1.Time) gwv1.GatewayClassStatus {
	out := *desired.DeepCopy()
	out.Conditions = mergeConditions(live.Conditions, desired.Conditions, now)
	return out
}

func mergeGateway(live gwv1.GatewayStatus, desired *gwv1.GatewayStatus, now metav1.Time) gwv1.GatewayStatus {
	out := mergeWithListeners(&live, desired, now, defaultGatewayStatus, gatewayParts, gatewayListener)
	keepPrunedRoutability(live.Addresses, out.Addresses)
	return out
}

// keepPrunedRoutability: status.addresses[].routability is a field of the
// experimental CRDs only, and the standard ones prune it. A live address
// without routability that otherwise equals the desired one at the same
// place keeps none, or every comparison would differ and every write
// repeat. (With the experimental CRDs an address is written with its
// routability the first time; only one written before Portico reported
// routability stays without it until it changes.)
func keepPrunedRoutability(live, out []gwv1.GatewayStatusAddress) {
	if len(live) != len(out) {
		return
	}
	for i := range out {
		l := live[i]
		if l.Routability == nil && l.Value == out[i].Value && l.Type != nil && out[i].Type != nil && *l.Type == *out[i].Type {
			out[i].Routability = nil
		}
	}
}

func mergeListenerSet(live gwv1.ListenerSetStatus, desired *gwv1.ListenerSetStatus, now metav1.Time) gwv1.ListenerSetStatus {
	return mergeWithListeners(&live, desired, now, defaultListenerSetStatus, listenerSetParts, listenerSetListener)
}

// statusPointer is a pointer to a status S that deep-copies it.
type statusPointer[S any] interface {
	*S
	DeepCopy() *S
}

// mergeWithListeners is the merge of a status S that has conditions of its
// own and listeners L with conditions of theirs: a Gateway's
// (GatewayStatus, ListenerStatus) or a ListenerSet's (ListenerSetStatus,
// ListenerEntryStatus). The result is desired with the API server's
// defaults, the object's conditions merged with the live ones and each
// listener's with those of the live listener of the same name. parts gives
// the conditions and listeners of a status, listener the name and
// conditions of a listener.
func mergeWithListeners[S any, P statusPointer[S], L any](live, desired P, now metav1.Time, defaults func(P),
	parts func(P) (*[]metav1.Condition, []L), listener func(*L) (gwv1.SectionName, *[]metav1.Condition)) S {
	var out P = desired.DeepCopy()
	defaults(out)
	liveConditions, liveListeners := parts(live)
	wantConditions, wantListeners := parts(desired)
	conditions, listeners := parts(out)
	*conditions = mergeConditions(*liveConditions, *wantConditions, now)
	for i := range listeners {
		name, c := listener(&listeners[i])
		var prev []metav1.Condition
		for j := range liveListeners {
			if n, lc := listener(&liveListeners[j]); n == name {
				prev = *lc
				break
			}
		}
		_, want := listener(&wantListeners[i])
		*c = mergeConditions(prev, *want, now)
	}
	return *out
}

// What mergeWithListeners merges of the status of a Gateway and of a
// ListenerSet.

func gatewayParts(s *gwv1.GatewayStatus) (*[]metav1.Condition, []gwv1.ListenerStatus) {
	return &s.Conditions, s.Listeners
}

func gatewayListener(l *gwv1.ListenerStatus) (gwv1.SectionName, *[]metav1.Condition) {
	return l.Name, &l.Conditions
}

func listenerSetParts(s *gwv1.ListenerSetStatus) (*[]metav1.Condition, []gwv1.ListenerEntryStatus) {
	return &s.Conditions, s.Listeners
}

func listenerSetListener(l *gwv1.ListenerEntryStatus) (gwv1.SectionName, *[]metav1.Condition) {
	return l.Name, &l.Conditions
}

// mergeRoute replaces this controller's entries of status.parents with the
// desired ones and keeps every other controller's entries untouched. An
// entry is identified by its parentRef as refs.EntryOf does (the CRD's
// defaults applied, namespace as written). The live order is kept: our
// entry for a parentRef stays where it is, entries for new parentRefs are
// appended, entries for parentRefs we no longer serve are removed. So a
// merge onto a status that already holds our desired entries changes
// nothing, wherever another controller put its own. A nil desired removes
// all of our entries.
func mergeRoute(live gwv1.RouteStatus, desired *gwv1.RouteStatus, controller gwv1.GatewayController, now metav1.Time) gwv1.RouteStatus {
	var want []gwv1.RouteParentStatus
	if desired != nil {
		want = desired.Parents
	}
	return gwv1.RouteStatus{Parents: mergeEntries(live.Parents, want, routeParentFields, controller, now, 0)}
}

// entryFields are the fields of a status entry of type E (a route's
// parent, a policy's ancestor) that mergeEntries reads and sets.
type entryFields[E any] struct {
	ref        func(*E) *gwv1.ParentReference
	controller func(*E) *gwv1.GatewayController
	conditions func(*E) *[]metav1.Condition
	deepCopy   func(*E) *E
}

var routeParentFields = entryFields[gwv1.RouteParentStatus]{
	ref:        func(e *gwv1.RouteParentStatus) *gwv1.ParentReference { return &e.ParentRef },
	controller: func(e *gwv1.RouteParentStatus) *gwv1.GatewayController { return &e.ControllerName },
	conditions: func(e *gwv1.RouteParentStatus) *[]metav1.Condition { return &e.Conditions },
	deepCopy:   (*gwv1.RouteParentStatus).DeepCopy,
}

var policyAncestorFields = entryFields[gwv1.PolicyAncestorStatus]{
	ref:        func(e *gwv1.PolicyAncestorStatus) *gwv1.ParentReference { return &e.AncestorRef },
	controller: func(e *gwv1.PolicyAncestorStatus) *gwv1.GatewayController { return &e.ControllerName },
	conditions: func(e *gwv1.PolicyAncestorStatus) *[]metav1.Condition { return &e.Conditions },
	deepCopy:   (*gwv1.PolicyAncestorStatus).DeepCopy,
}

// mergeEntries is the merge of mergeRoute and mergePolicy: controller's
// live entries are replaced by the desired ones of the same reference
// (refs.EntryOf), in the live order, others' kept as they are, desired
// entries for new references appended while the list holds fewer than
// limit (0: no limit).
func mergeEntries[E any](live, desired []E, f entryFields[E], controller gwv1.GatewayController, now metav1.Time, limit int) []E {
	want := make([]E, len(desired))
	keys := make([]refs.Entry, len(desired))
	for i := range desired {
		d := f.deepCopy(&desired[i])
		*f.controller(d) = controller
		*f.ref(d) = refs.StoredParentRef(*f.ref(d))
		want[i], keys[i] = *d, refs.EntryOf(*f.ref(d))
	}
	used := make([]bool, len(want))
	find := func(ref gwv1.ParentReference) int {
		k := refs.EntryOf(ref)
		for i := range want {
			if !used[i] && keys[i] == k {
				return i
			}
		}
		return -1
	}
	var out []E
	for j := range live {
		e := &live[j]
		if *f.controller(e) != controller {
			out = append(out, *f.deepCopy(e))
			continue
		}
		i := find(*f.ref(e))
		if i < 0 {
			continue // a reference we no longer serve
		}
		used[i] = true
		d := want[i]
		*f.conditions(&d) = mergeConditions(*f.conditions(e), *f.conditions(&d), now)
		out = append(out, d)
	}
	for i, d := range want {
		if used[i] || (limit > 0 && len(out) >= limit) {
			continue
		}
		*f.conditions(&d) = mergeConditions(nil, *f.conditions(&d), now)
		out = append(out, d)
	}
	return out
}

// The API server applies the CRD schema's defaults to status too. Desired
// statuses get the same defaults before they are compared with live ones, or
// every comparison would differ and every write would repeat. Those of
// parentRefs are refs.StoredParentRef's.
var (
	defaultGroup       = gwv1.Group(gwv1.GroupName)
	defaultAddressType = gwv1.IPAddressType
)

func defaultKinds(kinds []gwv1.RouteGroupKind) {
	for i := range kinds {
		if kinds[i].Group == nil {
			g := defaultGroup
			kinds[i].Group = &g
		}
	}
}

func defaultGatewayStatus(s *gwv1.GatewayStatus) {
	for i := range s.Addresses {
		if s.Addresses[i].Type == nil {
			t := defaultAddressType
			s.Addresses[i].Type = &t
		}
	}
	for i := range s.Listeners {
		defaultKinds(s.Listeners[i].SupportedKinds)
	}
}

func defaultListenerSetStatus(s *gwv1.ListenerSetStatus) {
	for i := range s.Listeners {
		defaultKinds(s.Listeners[i].SupportedKinds)
	}
}

// maxAncestors is the most entries status.ancestors of a policy may hold
// (the CRD's limit, shared by every controller).
const maxAncestors = 16

// mergePolicy is mergeRoute for a policy's status.ancestors: this
// controller's entries are replaced by the desired ones (identified by
// ancestorRef as refs.EntryOf does), the live order kept, new ones
// appended, and every other controller's entry left exactly as it is. New
// entries that would take the list past the CRD's limit are left out (the
// spec: a full list takes no more). A nil desired removes all of ours.
func mergePolicy(live gwv1.PolicyStatus, desired *gwv1.PolicyStatus, controller gwv1.GatewayController, now metav1.Time) gwv1.PolicyStatus {
	var want []gwv1.PolicyAncestorStatus
	if desired != nil {
		want = desired.Ancestors
	}
	out := gwv1.PolicyStatus{Ancestors: mergeEntries(live.Ancestors, want, policyAncestorFields, controller, now, maxAncestors)}
	if out.Ancestors == nil {
		out.Ancestors = []gwv1.PolicyAncestorStatus{}
	}
	return out
}
