package integration

import (
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
)

// Statuses written by the controller match what the translator computes for
// the same objects, with observedGeneration, after kubectl-apply-style
// creates.
func TestStatusesMatchTranslator(t *testing.T) {
	f := newFixture(t)
	f.gateway("gw")
	f.service("web", "10.0.0.1")
	f.route("r1", "gw", "web")
	f.create(&gwv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "extra"},
		Spec: gwv1.ListenerSetSpec{
			ParentRef: gwv1.ParentGatewayReference{Name: "gw"},
			Listeners: []gwv1.ListenerEntry{{Name: "alt", Port: 8080, Protocol: gwv1.HTTPProtocolType}},
		},
	})
	r := startReplica(t, "solo", f.opts())

	eventually(t, 30*time.Second, "route accepted and gateway programmed", func() bool {
		return f.routeAccepted("r1") && f.gatewayProgrammed("gw", 1)
	})
	eventually(t, 10*time.Second, "listenerset accepted", func() bool {
		var ls gwv1.ListenerSet
		if err := k8s.Get(f.ctx, f.key("extra"), &ls); err != nil {
			return false
		}
		return condIs(ls.Status.Conditions, string(gwv1.ListenerSetConditionAccepted), metav1.ConditionTrue, ls.Generation)
	})

	// Translate the replica's own snapshot and compare with what was written.
	snap, err := r.c.Snapshot(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := gatewayapi.Translate(snap, gatewayapi.Options{ControllerName: f.controller})
	byKey := map[string]gatewayapi.Status{}
	for _, s := range want.Statuses {
		byKey[s.Key()] = s
	}
	eventually(t, 10*time.Second, "written statuses equal the translator's", func() bool {
		var gw gwv1.Gateway
		var ls gwv1.ListenerSet
		var rt gwv1.HTTPRoute
		var gc gwv1.GatewayClass
		if k8s.Get(f.ctx, f.key("gw"), &gw) != nil || k8s.Get(f.ctx, f.key("extra"), &ls) != nil ||
			k8s.Get(f.ctx, f.key("r1"), &rt) != nil || k8s.Get(f.ctx, f.key(f.class), &gc) != nil {
			return false
		}
		g := byKey["Gateway/"+f.ns+"/gw"]
		l := byKey["ListenerSet/"+f.ns+"/extra"]
		h := byKey["HTTPRoute/"+f.ns+"/r1"]
		c := byKey["GatewayClass/"+f.class]
		if g.Gateway == nil || l.ListenerSet == nil || h.Route == nil || c.GatewayClass == nil {
			t.Fatalf("translator computed no status for some object: %v", byKey)
		}
		return sameConds(gw.Status.Conditions, g.Gateway.Conditions) &&
			gw.Status.AttachedListenerSets != nil && *gw.Status.AttachedListenerSets == 1 &&
			len(gw.Status.Listeners) == len(g.Gateway.Listeners) &&
			sameConds(ls.Status.Conditions, l.ListenerSet.Conditions) &&
			len(ls.Status.Listeners) == 1 && ls.Status.Listeners[0].Name == "alt" &&
			len(rt.Status.Parents) == 1 && sameConds(rt.Status.Parents[0].Conditions, h.Route.Parents[0].Conditions) &&
			sameConds(gc.Status.Conditions, c.GatewayClass.Conditions) &&
			reflect.DeepEqual(gc.Status.SupportedFeatures, c.GatewayClass.SupportedFeatures)
	})

	// A spec change bumps the generation; the status follows it.
	update(f, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "r1"}}, func(r *gwv1.HTTPRoute) {
		r.Spec.Rules[0].Matches[0].Path.Value = ptr.To("/changed")
	})
	eventually(t, 10*time.Second, "observedGeneration follows a spec change", func() bool { return f.routeAccepted("r1") })
}

// sameConds compares conditions by type, status, reason, message and
// observedGeneration (lastTransitionTime is the writer's to keep).
func sameConds(live, want []metav1.Condition) bool {
	if len(live) != len(want) {
		return false
	}
	for _, w := range want {
		l := meta.FindStatusCondition(live, w.Type)
		if l == nil || l.Status != w.Status || l.Reason != w.Reason || l.Message != w.Message || l.ObservedGeneration != w.ObservedGeneration {
			return false
		}
	}
	return true
}

// The translator never reads status. Entries of ours left on a route that
// no longer names our Gateways while no replica ran are found by the
// writer when it starts leading: it removes them and keeps the other
// controllers' entries.
func TestStaleEntriesRemovedAtStart(t *testing.T) {
	f := newFixture(t)
	f.gateway("gw")
	f.service("web", "10.0.0.1")
	f.route("served", "gw", "web")
	stale := f.route("stale", "elsewhere", "web")
	cond := []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: metav1.Now()}}
	updateStatus(f, stale, func(r *gwv1.HTTPRoute) {
		r.Status.Parents = []gwv1.RouteParentStatus{
			{ParentRef: gwv1.ParentReference{Name: "gw"}, ControllerName: gwv1.GatewayController(f.controller), Conditions: cond},
			{ParentRef: gwv1.ParentReference{Name: "elsewhere"}, ControllerName: "example.com/other", Conditions: cond},
		}
	})
	startReplica(t, "solo", f.opts())

	eventually(t, 30*time.Second, "route served accepted", func() bool { return f.routeAccepted("served") })
	eventually(t, 10*time.Second, "our stale entry removed, the other controller's kept", func() bool {
		var r gwv1.HTTPRoute
		if err := k8s.Get(f.ctx, f.key("stale"), &r); err != nil {
			return false
		}
		return f.ourParent(r.Status.RouteStatus) == nil && len(r.Status.Parents) == 1 &&
			r.Status.Parents[0].ControllerName == "example.com/other"
	})
}
