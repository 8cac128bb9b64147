package gatewayapi

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestKeepTransitionTimes(t *testing.T) {
	old := at(100)
	prev := []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionTrue, LastTransitionTime: old},
		{Type: "Programmed", Status: metav1.ConditionTrue, LastTransitionTime: old},
		{Type: "ResolvedRefs", Status: metav1.ConditionTrue},
		{Type: "example.com/Other", Status: metav1.ConditionTrue, LastTransitionTime: old},
	}
	next := []metav1.Condition{
		{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Changed"}, // same status: keeps time
		{Type: "Programmed", Status: metav1.ConditionFalse},                 // flipped
		{Type: "ResolvedRefs", Status: metav1.ConditionTrue},                // previous had no time
		{Type: "Conflicted", Status: metav1.ConditionFalse},                 // new
	}
	got := KeepTransitionTimes(prev, next, testNow)
	want := []metav1.Time{old, testNow, testNow, testNow}
	for i := range got {
		if !got[i].LastTransitionTime.Equal(&want[i]) {
			t.Errorf("%s: lastTransitionTime %v, want %v", got[i].Type, got[i].LastTransitionTime, want[i])
		}
	}
	if !prev[1].LastTransitionTime.Equal(&old) {
		t.Error("prev was modified")
	}
	if KeepTransitionTimes(nil, nil, testNow) != nil {
		t.Error("nil in, non-nil out")
	}
}

// TestLastTransitionTimeFromObjects checks that Translate takes previous
// times from the objects' current status: whole-object conditions, listener
// conditions by listener name, and route conditions from our controller's
// entry for the same parentRef only.
func TestLastTransitionTimeFromObjects(t *testing.T) {
	old := at(100)
	gw := gateway("infra", "gw", httpL("http", 80, ""))
	gw.Status.Conditions = []metav1.Condition{
		{Type: string(gwv1.GatewayConditionAccepted), Status: metav1.ConditionTrue, LastTransitionTime: old},
		{Type: string(gwv1.GatewayConditionProgrammed), Status: metav1.ConditionFalse, LastTransitionTime: old},
	}
	gw.Status.Listeners = []gwv1.ListenerStatus{{Name: "http", Conditions: []metav1.Condition{
		{Type: string(gwv1.ListenerConditionAccepted), Status: metav1.ConditionTrue, LastTransitionTime: old},
	}}}
	r := httpRoute("infra", "r", []gwv1.ParentReference{parent("gw"), {Name: "gw", SectionName: ptr(gwv1.SectionName("http"))}}, nil, simpleRule())
	r.Status.Parents = []gwv1.RouteParentStatus{
		// Another controller's entry for the same parent is ignored.
		{ParentRef: parent("gw"), ControllerName: "example.com/other", Conditions: []metav1.Condition{
			{Type: string(gwv1.RouteConditionResolvedRefs), Status: metav1.ConditionTrue, LastTransitionTime: at(5)}}},
		// Ours, with the defaults spelled out: still the same parentRef.
		{ParentRef: gwv1.ParentReference{Group: ptr(gwv1.Group(gwv1.GroupName)), Kind: ptr(gwv1.Kind("Gateway")), Namespace: ptr(gwv1.Namespace("infra")), Name: "gw"},
			ControllerName: testController, Conditions: []metav1.Condition{
				{Type: string(gwv1.RouteConditionAccepted), Status: metav1.ConditionTrue, LastTransitionTime: old},
				{Type: string(gwv1.RouteConditionResolvedRefs), Status: metav1.ConditionFalse, LastTransitionTime: old},
			}},
	}
	gc := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "portico", Generation: 1}, Spec: gwv1.GatewayClassSpec{ControllerName: testController}}
	gc.Status.Conditions = []metav1.Condition{{Type: string(gwv1.GatewayClassConditionStatusAccepted), Status: metav1.ConditionTrue, LastTransitionTime: old}}
	res := translate(gc, gw, r, service("infra", "web", 80))

	check := func(what string, c metav1.Condition, want metav1.Time) {
		t.Helper()
		if !c.LastTransitionTime.Equal(&want) {
			t.Errorf("%s %s: lastTransitionTime %v, want %v", what, c.Type, c.LastTransitionTime, want)
		}
	}
	gcs := status(t, res, KindGatewayClass, "", "portico").GatewayClass
	check("class", cond(t, gcs.Conditions, string(gwv1.GatewayClassConditionStatusAccepted)), old)
	gst := status(t, res, KindGateway, "infra", "gw").Gateway
	check("gateway", cond(t, gst.Conditions, string(gwv1.GatewayConditionAccepted)), old)
	check("gateway", cond(t, gst.Conditions, string(gwv1.GatewayConditionProgrammed)), testNow)
	ls := listenerStatus(t, res, "infra", "gw", "http")
	check("listener", cond(t, ls.Conditions, string(gwv1.ListenerConditionAccepted)), old)
	check("listener", cond(t, ls.Conditions, string(gwv1.ListenerConditionProgrammed)), testNow)
	p0 := routeParent(t, res, KindHTTPRoute, "infra", "r", 0)
	check("route parent 0", cond(t, p0.Conditions, string(gwv1.RouteConditionAccepted)), old)
	check("route parent 0", cond(t, p0.Conditions, string(gwv1.RouteConditionResolvedRefs)), testNow)
	p1 := routeParent(t, res, KindHTTPRoute, "infra", "r", 1)
	check("route parent 1", cond(t, p1.Conditions, string(gwv1.RouteConditionAccepted)), testNow)

	// The status objects are new values: the input is not aliased.
	p0.ParentRef.Name = "changed"
	if r.Spec.ParentRefs[0].Name != "gw" {
		t.Error("route status aliases the spec")
	}
}

func TestConditionMessageTruncated(t *testing.T) {
	c := newConditions(1)
	c.set("Accepted", false, "Invalid", strings.Repeat("x", 2*maxConditionMessage))
	if n := len(c.list[0].Message); n != maxConditionMessage {
		t.Errorf("message length %d, want %d", n, maxConditionMessage)
	}
}
