package status

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/resource"
)

const ours = gwv1.GatewayController("portico.dev/gateway-controller")

var (
	t0 = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 = metav1.NewTime(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC))
)

func cond(typ string, st metav1.ConditionStatus, at metav1.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: st, Reason: typ, LastTransitionTime: at, ObservedGeneration: 1}
}

func parent(ctrl gwv1.GatewayController, gw string, conds ...metav1.Condition) gwv1.RouteParentStatus {
	return gwv1.RouteParentStatus{
		ParentRef:      gwv1.ParentReference{Name: gwv1.ObjectName(gw)},
		ControllerName: ctrl,
		Conditions:     conds,
	}
}

func TestMergeRouteKeepsForeignAndReplacesOurs(t *testing.T) {
	foreign := parent("example.com/other", "theirs", cond("Accepted", "True", t0))
	live := gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{
		parent(ours, "gone", cond("Accepted", "True", t0)),
		foreign,
		parent(ours, "gw", cond("Accepted", "True", t0), cond("ResolvedRefs", "True", t0)),
	}}
	desired := &gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{
		parent("", "gw", cond("Accepted", "True", t1), cond("ResolvedRefs", "False", t1)),
	}}
	got := mergeRoute(live, desired, ours, t1)
	if len(got.Parents) != 2 {
		t.Fatalf("parents = %d, want foreign + gw: %+v", len(got.Parents), got.Parents)
	}
	if !equality.Semantic.DeepEqual(got.Parents[0], foreign) {
		t.Errorf("foreign entry changed: %+v", got.Parents[0])
	}
	p := got.Parents[1]
	if p.ControllerName != ours || p.ParentRef.Name != "gw" {
		t.Fatalf("our entry = %+v", p)
	}
	if *p.ParentRef.Group != gwv1.GroupName || *p.ParentRef.Kind != "Gateway" {
		t.Errorf("parentRef not defaulted like the CRD does: %+v", p.ParentRef)
	}
	if !p.Conditions[0].LastTransitionTime.Equal(&t0) {
		t.Errorf("unchanged Accepted lost its transition time: %v", p.Conditions[0].LastTransitionTime)
	}
	if !p.Conditions[1].LastTransitionTime.Equal(&t1) {
		t.Errorf("changed ResolvedRefs kept the old transition time")
	}

	// Merging again onto the result changes nothing: no write ping-pong.
	again := mergeRoute(got, desired, ours, metav1.NewTime(t1.Add(time.Hour)))
	if !equality.Semantic.DeepEqual(got, again) {
		t.Errorf("second merge differs:\n%+v\n%+v", got, again)
	}

	// A nil desired removes only our entries.
	cleared := mergeRoute(got, nil, ours, t1)
	if len(cleared.Parents) != 1 || cleared.Parents[0].ControllerName != "example.com/other" {
		t.Errorf("clearing ours: %+v", cleared.Parents)
	}
}

func TestApplyDesiredSkipsNoOp(t *testing.T) {
	gw := &gwv1.Gateway{}
	gw.Generation = 1
	desired := &gatewayapi.Status{Kind: resource.KindGateway, Gateway: &gwv1.GatewayStatus{
		Conditions: []metav1.Condition{cond("Accepted", "True", t1)},
		Listeners: []gwv1.ListenerStatus{{
			Name: "http", SupportedKinds: []gwv1.RouteGroupKind{{Kind: "HTTPRoute"}},
			Conditions: []metav1.Condition{cond("Programmed", "True", t1)},
		}},
		Addresses: []gwv1.GatewayStatusAddress{{Value: "10.0.0.1"}},
	}}
	if !applyDesired(gw, desired, ours, t1) {
		t.Fatal("first apply reported no change")
	}
	if gw.Status.Listeners[0].SupportedKinds[0].Group == nil || gw.Status.Addresses[0].Type == nil {
		t.Errorf("CRD defaults not applied: %+v", gw.Status)
	}
	// Same desired status computed later (new time) is a no-op.
	later := metav1.NewTime(t1.Add(time.Hour))
	desired.Gateway.Conditions[0].LastTransitionTime = later
	if applyDesired(gw, desired, ours, later) {
		t.Error("re-applying an equal status reported a change")
	}
	// A real change is not.
	desired.Gateway.Conditions[0].Status = metav1.ConditionFalse
	if !applyDesired(gw, desired, ours, later) {
		t.Error("a changed condition was not applied")
	}
	if !gw.Status.Conditions[0].LastTransitionTime.Equal(&later) {
		t.Error("a changed condition kept its old transition time")
	}
}

func TestPublishCoalescesAndClearsRoutes(t *testing.T) {
	w := New(Config{ControllerName: string(ours)})
	t.Cleanup(w.queue.ShutDown)
	route := gatewayapi.Status{Kind: resource.KindHTTPRoute, Namespace: "ns", Name: "r", Generation: 1,
		Route: &gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{parent(ours, "gw", cond("Accepted", "True", t0))}}}
	gc := gatewayapi.Status{Kind: resource.KindGatewayClass, Name: "c", Generation: 1,
		GatewayClass: &gwv1.GatewayClassStatus{Conditions: []metav1.Condition{cond("Accepted", "True", t0)}}}
	w.Publish(setOf(route, gc))
	if n := w.Pending(); n != 2 {
		t.Fatalf("pending = %d, want 2", n)
	}
	// The same statuses, recomputed at another time, enqueue nothing new
	// and many publishes of one object keep one queue entry.
	for i := range 10 {
		route.Route.Parents[0].Conditions[0].LastTransitionTime = metav1.NewTime(t1.Add(time.Duration(i) * time.Second))
		w.Publish(setOf(route, gc))
	}
	if n := w.Pending(); n != 2 {
		t.Fatalf("pending = %d after re-publishing, want 2", n)
	}
	// The route loses its parents: its entry stays, asking to clear ours.
	w.Publish(setOf(gc))
	w.mu.Lock()
	e := w.desired[route.Key()]
	_, gcKept := w.desired[gc.Key()]
	w.mu.Unlock()
	if e == nil || e.status.Route != nil || !gcKept {
		t.Fatalf("route entry = %+v, want one with a nil Route; class kept = %v", e, gcKept)
	}
}

// Another controller may put its entry before or after ours; merging our
// unchanged entries onto either order changes nothing.
func TestMergeRouteKeepsLiveOrder(t *testing.T) {
	foreign := parent("example.com/other", "theirs", cond("Accepted", "True", t0))
	mine := parent(ours, "gw", cond("Accepted", "True", t0))
	desired := &gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{parent("", "gw", cond("Accepted", "True", t1))}}
	for _, order := range [][]gwv1.RouteParentStatus{{mine, foreign}, {foreign, mine}} {
		live := gwv1.RouteStatus{Parents: order}
		first := mergeRoute(live, desired, ours, t1)
		second := mergeRoute(first, desired, ours, t1)
		if !equality.Semantic.DeepEqual(first, second) {
			t.Errorf("merge is not idempotent for order %v", order)
		}
		if first.Parents[0].ControllerName != order[0].ControllerName {
			t.Errorf("merge reordered the entries: %v", first.Parents)
		}
	}
}

// A condition of a type Portico is not responsible for (domain-prefixed,
// not portico.dev/) survives every merge unchanged, on the Gateway and on
// its listeners; a Gateway API type Portico no longer sets is removed.
func TestMergeGatewayKeepsForeignConditions(t *testing.T) {
	foreign := metav1.Condition{Type: "example.com/Audited", Status: "True", Reason: "Seeded", LastTransitionTime: t0, ObservedGeneration: 1}
	live := gwv1.GatewayStatus{
		Conditions: []metav1.Condition{cond("Accepted", "True", t0), foreign, cond("Ready", "True", t0)},
		Listeners:  []gwv1.ListenerStatus{{Name: "http", Conditions: []metav1.Condition{foreign, cond("Programmed", "True", t0)}}},
	}
	desired := &gwv1.GatewayStatus{
		Conditions: []metav1.Condition{cond("Accepted", "True", t1), cond("Programmed", "False", t1)},
		Listeners:  []gwv1.ListenerStatus{{Name: "http", Conditions: []metav1.Condition{cond("Programmed", "True", t1)}}},
	}
	got := mergeGateway(live, desired, t1)
	var types []string
	for _, c := range got.Conditions {
		types = append(types, c.Type)
	}
	if want := []string{"Accepted", "Programmed", "example.com/Audited"}; !equality.Semantic.DeepEqual(types, want) {
		t.Fatalf("Gateway condition types = %v, want %v (Ready is Gateway API's and no longer set)", types, want)
	}
	if !equality.Semantic.DeepEqual(got.Conditions[2], foreign) {
		t.Errorf("foreign Gateway condition modified: %+v", got.Conditions[2])
	}
	lc := got.Listeners[0].Conditions
	if len(lc) != 2 || !equality.Semantic.DeepEqual(lc[1], foreign) || !lc[0].LastTransitionTime.Equal(&t0) {
		t.Errorf("listener conditions = %+v, want Programmed (time kept) then the foreign one unchanged", lc)
	}
	if again := mergeGateway(got, desired, metav1.NewTime(t1.Add(time.Hour))); !equality.Semantic.DeepEqual(got, again) {
		t.Errorf("second merge differs:\n%+v\n%+v", got, again)
	}
	if !foreignCondition("example.com/X") || foreignCondition("Accepted") || foreignCondition("portico.dev/Provisioned") {
		t.Error("foreignCondition misclassifies")
	}
}

// A ListenerSet's listeners are merged by name, whatever their live order:
// a listener keeps the transition times of the live listener of its name,
// a new one gets now; desired gets the schema's defaults and is not
// modified.
func TestMergeListenerSetMatchesListenersByName(t *testing.T) {
	live := gwv1.ListenerSetStatus{
		Conditions: []metav1.Condition{cond("Accepted", "True", t0)},
		Listeners: []gwv1.ListenerEntryStatus{
			{Name: "b", Conditions: []metav1.Condition{cond("Programmed", "False", t0)}},
			{Name: "a", Conditions: []metav1.Condition{cond("Programmed", "True", t0)}},
		},
	}
	desired := &gwv1.ListenerSetStatus{
		Conditions: []metav1.Condition{cond("Accepted", "True", t1)},
		Listeners: []gwv1.ListenerEntryStatus{
			{Name: "a", SupportedKinds: []gwv1.RouteGroupKind{{Kind: "HTTPRoute"}}, Conditions: []metav1.Condition{cond("Programmed", "True", t1)}},
			{Name: "b", Conditions: []metav1.Condition{cond("Programmed", "True", t1)}},
			{Name: "c", Conditions: []metav1.Condition{cond("Programmed", "True", t1)}},
		},
	}
	before := desired.DeepCopy()
	got := mergeListenerSet(live, desired, t1)
	if !equality.Semantic.DeepEqual(desired, before) {
		t.Errorf("desired modified: %+v", desired)
	}
	if at := got.Conditions[0].LastTransitionTime; !at.Equal(&t0) {
		t.Errorf("ListenerSet Accepted at %v, want the live time %v", at, t0)
	}
	for i, want := range []metav1.Time{t0, t1, t1} {
		l := got.Listeners[i]
		if at := l.Conditions[0].LastTransitionTime; !at.Equal(&want) {
			t.Errorf("listener %s Programmed at %v, want %v", l.Name, at, want)
		}
	}
	if g := got.Listeners[0].SupportedKinds[0].Group; g == nil || *g != gwv1.GroupName {
		t.Errorf("supportedKinds group = %v, want the schema default %s", g, gwv1.GroupName)
	}
}

// Our entries are found by parentRef as the API server stores it
// (refs.EntryOf): a live entry with the schema's defaults written out is
// the desired entry without them, while a parentRef that names the
// route's namespace explicitly is another entry than one that leaves it
// unset (the CRD accepts both on one route).
func TestMergeRouteFindsEntriesByStoredParentRef(t *testing.T) {
	group, kind := gwv1.Group(gwv1.GroupName), gwv1.Kind("Gateway")
	ns := gwv1.Namespace("apps")
	stored := parent(ours, "gw", cond("Accepted", "True", t0))
	stored.ParentRef.Group, stored.ParentRef.Kind = &group, &kind
	explicit := parent(ours, "gw", cond("Accepted", "True", t0))
	explicit.ParentRef.Namespace = &ns
	live := gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{explicit, stored}}

	implicit := parent("", "gw", cond("Accepted", "True", t1))
	got := mergeRoute(live, &gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{implicit}}, ours, t1)
	if len(got.Parents) != 1 {
		t.Fatalf("parents = %+v, want the one entry without namespace", got.Parents)
	}
	p := got.Parents[0]
	if p.ParentRef.Namespace != nil || p.ParentRef.Group == nil || p.ParentRef.Kind == nil {
		t.Errorf("entry = %+v, want the stored form of the desired parentRef", p.ParentRef)
	}
	if !p.Conditions[0].LastTransitionTime.Equal(&t0) {
		t.Errorf("the live entry was not found: transition time %v", p.Conditions[0].LastTransitionTime)
	}

	both := &gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{implicit, parent("", "gw", cond("Accepted", "False", t1))}}
	both.Parents[1].ParentRef.Namespace = &ns
	got = mergeRoute(live, both, ours, t1)
	if len(got.Parents) != 2 || got.Parents[0].ParentRef.Namespace == nil || got.Parents[1].ParentRef.Namespace != nil {
		t.Fatalf("parents = %+v, want both entries in their live order", got.Parents)
	}
	if got.Parents[0].Conditions[0].Status != "False" || !got.Parents[0].Conditions[0].LastTransitionTime.Equal(&t1) ||
		!got.Parents[1].Conditions[0].LastTransitionTime.Equal(&t0) {
		t.Errorf("entries mixed up: %+v", got.Parents)
	}
}

func TestKeepTransitionTimes(t *testing.T) {
	live := []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionTrue, LastTransitionTime: t0},
		{Type: "Programmed", Status: metav1.ConditionTrue, LastTransitionTime: t0},
		{Type: "ResolvedRefs", Status: metav1.ConditionTrue},
	}
	next := []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Changed"}, // same status: keeps time
		{Type: "Programmed", Status: metav1.ConditionFalse},                 // flipped
		{Type: "ResolvedRefs", Status: metav1.ConditionTrue},                // live had no time
		{Type: "Conflicted", Status: metav1.ConditionFalse},                 // new
	}
	got := keepTransitionTimes(live, next, t1)
	want := []metav1.Time{t0, t1, t1, t1}
	for i := range got {
		if !got[i].LastTransitionTime.Equal(&want[i]) {
			t.Errorf("%s: lastTransitionTime %v, want %v", got[i].Type, got[i].LastTransitionTime, want[i])
		}
	}
	if !live[1].LastTransitionTime.Equal(&t0) {
		t.Error("live was modified")
	}
	if keepTransitionTimes(nil, nil, t1) != nil {
		t.Error("nil in, non-nil out")
	}
}

// A routability the standard CRDs prune from status.addresses does not make
// every comparison differ: the pruned live address is equal; another value
// is a change, and a new address is written with its routability.
func TestApplyDesiredPrunedRoutability(t *testing.T) {
	gw := &gwv1.Gateway{}
	gw.Generation = 1
	ip := gwv1.IPAddressType
	cluster := gwv1.GatewayAddressRoutabilityCluster
	desired := &gatewayapi.Status{Kind: resource.KindGateway, Gateway: &gwv1.GatewayStatus{
		Conditions: []metav1.Condition{cond("Accepted", "True", t1)},
		Addresses:  []gwv1.GatewayStatusAddress{{Type: &ip, Value: "10.96.0.1", Routability: &cluster}},
	}}
	if !applyDesired(gw, desired, ours, t1) || gw.Status.Addresses[0].Routability == nil {
		t.Fatalf("first apply: %+v", gw.Status.Addresses)
	}
	gw.Status.Addresses[0].Routability = nil // pruned by the API server
	if applyDesired(gw, desired, ours, t1) {
		t.Error("a pruned routability made an equal status differ")
	}
	desired.Gateway.Addresses[0].Value = "10.96.0.2"
	if !applyDesired(gw, desired, ours, t1) || gw.Status.Addresses[0].Value != "10.96.0.2" || gw.Status.Addresses[0].Routability == nil {
		t.Errorf("a changed address: %+v", gw.Status.Addresses)
	}
}

func ancestor(ctrl gwv1.GatewayController, gw string, conds ...metav1.Condition) gwv1.PolicyAncestorStatus {
	return gwv1.PolicyAncestorStatus{AncestorRef: gwv1.ParentReference{Name: gwv1.ObjectName(gw)}, ControllerName: ctrl, Conditions: conds}
}

// A BackendTLSPolicy's ancestors: other controllers' entries are kept as
// they are (times included), ours replaced in place, stale ones of ours
// removed, new ones appended up to the CRD's 16; applying the result
// again changes nothing; a nil desired removes ours.
func TestMergePolicyKeepsForeignAncestors(t *testing.T) {
	foreign := ancestor("example.com/other", "unmanaged", cond("Accepted", "True", t0))
	live := gwv1.PolicyStatus{Ancestors: []gwv1.PolicyAncestorStatus{
		ancestor(ours, "gone", cond("Accepted", "True", t0)),
		foreign,
		ancestor(ours, "gw", cond("Accepted", "True", t0)),
	}}
	desired := &gwv1.PolicyStatus{Ancestors: []gwv1.PolicyAncestorStatus{
		ancestor("", "gw", cond("Accepted", "False", metav1.Time{})),
		ancestor("", "new", cond("Accepted", "True", metav1.Time{})),
	}}
	got := mergePolicy(live, desired, ours, t1)
	if len(got.Ancestors) != 3 || !equality.Semantic.DeepEqual(got.Ancestors[0], foreign) {
		t.Fatalf("ancestors %+v", got.Ancestors)
	}
	gw, nw := got.Ancestors[1], got.Ancestors[2]
	if gw.AncestorRef.Name != "gw" || gw.Conditions[0].Status != "False" || !gw.Conditions[0].LastTransitionTime.Equal(&t1) || gw.ControllerName != ours ||
		gw.AncestorRef.Kind == nil || *gw.AncestorRef.Kind != "Gateway" {
		t.Errorf("our entry %+v", gw)
	}
	if nw.AncestorRef.Name != "new" || !nw.Conditions[0].LastTransitionTime.Equal(&t1) {
		t.Errorf("new entry %+v", nw)
	}
	obj := &gwv1.BackendTLSPolicy{Status: got}
	if applyDesired(obj, &gatewayapi.Status{Kind: resource.KindBackendTLSPolicy, Policy: desired}, ours, t1) {
		t.Error("applying the merged status again changed it")
	}
	if removed := mergePolicy(got, nil, ours, t1); len(removed.Ancestors) != 1 || removed.Ancestors[0].ControllerName != "example.com/other" {
		t.Errorf("removal left %+v", removed.Ancestors)
	}
	// A full list takes no more of ours.
	var full gwv1.PolicyStatus
	for i := range 16 {
		full.Ancestors = append(full.Ancestors, ancestor("example.com/other", fmt.Sprint("gw", i), cond("Accepted", "True", t0)))
	}
	if n := len(mergePolicy(full, desired, ours, t1).Ancestors); n != 16 {
		t.Errorf("%d ancestors, want 16", n)
	}
}
