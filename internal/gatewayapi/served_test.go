package gatewayapi

import (
	"strings"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/resource"
)

func TestServedStatuses(t *testing.T) {
	accepted := []metav1.Condition{{Type: "Accepted", Status: "True", Reason: "Accepted"}, {Type: "Programmed", Status: "True", Reason: "Programmed"}}
	gw := func(ns, name string) Status {
		return Status{Kind: resource.KindGateway, Namespace: ns, Name: name, Generation: 3, Gateway: &gwv1.GatewayStatus{Conditions: append([]metav1.Condition(nil), accepted...)}}
	}
	route := Status{Kind: resource.KindHTTPRoute, Namespace: "team", Name: "r", Generation: 7, Route: &gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{
		{ParentRef: gwv1.ParentReference{Name: "shared", Namespace: ptr(gwv1.Namespace("infra"))}, Conditions: append([]metav1.Condition(nil), accepted[:1]...)},
		{ParentRef: gwv1.ParentReference{Name: "other", Namespace: ptr(gwv1.Namespace("infra"))}, Conditions: append([]metav1.Condition(nil), accepted[:1]...)},
	}}}
	set := NewStatusSet([]Status{gw("infra", "shared"), gw("infra", "other"), gw("infra", "stale"), route})
	out := ServedStatuses(set, map[string]XDSOutcome{
		"infra/shared": {Dropped: []Dropped{{Route: "httproute/team/r/rule/1/match/0", Err: "Envoy would refuse it"}}},
		"infra/stale":  {Failed: "translate gateway infra/stale: boom"},
		"infra/other":  {},
	})

	c := apimeta.FindStatusCondition(out.Get(resource.KindGateway, "infra", "shared").Gateway.Conditions, "Programmed")
	if c.Status != metav1.ConditionFalse || c.Reason != "Invalid" || !strings.Contains(c.Message, "route httproute/team/r/rule/1/match/0 (Envoy would refuse it)") || c.ObservedGeneration != 3 {
		t.Errorf("shared Programmed = %+v", c)
	}
	c = apimeta.FindStatusCondition(out.Get(resource.KindGateway, "infra", "stale").Gateway.Conditions, "Programmed")
	if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "not the current one: translate gateway infra/stale: boom") {
		t.Errorf("stale Programmed = %+v", c)
	}
	if c := apimeta.FindStatusCondition(out.Get(resource.KindGateway, "infra", "other").Gateway.Conditions, "Programmed"); c.Status != metav1.ConditionTrue {
		t.Errorf("a clean outcome amended: %+v", c)
	}
	r := out.Get(resource.KindHTTPRoute, "team", "r").Route
	pi := apimeta.FindStatusCondition(r.Parents[0].Conditions, string(gwv1.RouteConditionPartiallyInvalid))
	if pi == nil || pi.Status != metav1.ConditionTrue || pi.Reason != "UnsupportedValue" || !strings.Contains(pi.Message, "r/rule/1/match/0: Envoy would refuse it") || pi.ObservedGeneration != 7 {
		t.Errorf("route's entry for the Gateway = %+v", r.Parents[0].Conditions)
	}
	if len(r.Parents[1].Conditions) != 1 {
		t.Errorf("route's entry for another Gateway amended: %+v", r.Parents[1].Conditions)
	}
	// The input is not modified.
	if c := apimeta.FindStatusCondition(set.Get(resource.KindGateway, "infra", "shared").Gateway.Conditions, "Programmed"); c.Status != metav1.ConditionTrue {
		t.Error("ServedStatuses modified its input")
	}
	if len(set.Get(resource.KindHTTPRoute, "team", "r").Route.Parents[0].Conditions) != 1 {
		t.Error("ServedStatuses modified the input route")
	}
	if same := ServedStatuses(set, nil); same.Len() != set.Len() {
		t.Error("no outcomes changed the set")
	}
}
