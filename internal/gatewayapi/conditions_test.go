package gatewayapi

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/resource"
)

// TestTranslationIgnoresStatus checks that the translator never reads the
// status it replaces: objects carrying any status translate exactly as
// without one, and no condition has a lastTransitionTime (the status writer
// stamps times against the live object).
func TestTranslationIgnoresStatus(t *testing.T) {
	old := at(100)
	objects := func(withStatus bool) []any {
		gw := gateway("infra", "gw", httpL("http", 80, ""))
		r := httpRoute("infra", "r", []gwv1.ParentReference{parent("gw"), {Name: "gw", SectionName: ptr(gwv1.SectionName("http"))}}, nil, simpleRule())
		gone := httpRoute("infra", "gone", []gwv1.ParentReference{parent("elsewhere")}, nil, simpleRule())
		gc := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "portico", Generation: 1}, Spec: gwv1.GatewayClassSpec{ControllerName: testController}}
		if withStatus {
			conds := []metav1.Condition{
				{Type: string(gwv1.GatewayConditionAccepted), Status: metav1.ConditionFalse, Reason: "Old", LastTransitionTime: old},
				{Type: "example.com/Other", Status: metav1.ConditionTrue, LastTransitionTime: old},
			}
			gc.Status.Conditions = conds
			gw.Status.Conditions = conds
			gw.Status.Listeners = []gwv1.ListenerStatus{{Name: "http", AttachedRoutes: 7, Conditions: conds}}
			parents := []gwv1.RouteParentStatus{{ParentRef: parent("gw"), ControllerName: testController, Conditions: conds}}
			r.Status.Parents = parents
			gone.Status.Parents = parents
		}
		return []any{gc, gw, r, gone, service("infra", "web", 80)}
	}
	with, without := translate(objects(true)...), translate(objects(false)...)
	if a, b := statusList(with), statusList(without); !reflect.DeepEqual(a, b) {
		t.Fatalf("statuses depend on the objects' status:\n%+v\n%+v", a, b)
	}
	for _, s := range statusList(without) {
		for _, c := range statusConditions(&s) {
			if !c.LastTransitionTime.IsZero() {
				t.Errorf("%s %s/%s %s has lastTransitionTime %v", s.Kind, s.Namespace, s.Name, c.Type, c.LastTransitionTime)
			}
		}
	}
	// A route naming no parent of ours gets no status, whatever its
	// status holds: removing our stale entries is the writer's.
	if s := without.StatusSet.Get(resource.KindHTTPRoute, "infra", "gone"); s != nil {
		t.Errorf("route without parents of ours has a status: %+v", s)
	}
	// The status objects are new values: the input is not aliased.
	objs := objects(false)
	res := translate(objs...)
	p0 := routeParent(t, res, resource.KindHTTPRoute, "infra", "r", 0)
	p0.ParentRef.Name = "changed"
	if r := objs[2].(*gwv1.HTTPRoute); r.Spec.ParentRefs[0].Name != "gw" {
		t.Error("route status aliases the spec")
	}
}

// statusConditions lists every condition of a status.
func statusConditions(s *Status) []metav1.Condition {
	var out []metav1.Condition
	switch {
	case s.GatewayClass != nil:
		out = append(out, s.GatewayClass.Conditions...)
	case s.Gateway != nil:
		out = append(out, s.Gateway.Conditions...)
		for _, l := range s.Gateway.Listeners {
			out = append(out, l.Conditions...)
		}
	case s.ListenerSet != nil:
		out = append(out, s.ListenerSet.Conditions...)
		for _, l := range s.ListenerSet.Listeners {
			out = append(out, l.Conditions...)
		}
	case s.Route != nil:
		for _, p := range s.Route.Parents {
			out = append(out, p.Conditions...)
		}
	}
	return out
}

func TestConditionMessageTruncated(t *testing.T) {
	c := newConditions(1)
	c.set("Accepted", false, "Invalid", strings.Repeat("x", 2*maxConditionMessage))
	if n := len(c.list[0].Message); n != maxConditionMessage {
		t.Errorf("message length %d, want %d", n, maxConditionMessage)
	}
}
