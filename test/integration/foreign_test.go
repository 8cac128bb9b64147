package integration

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

const foreignController = "example.com/other-controller"

func foreignEntry() gwv1.RouteParentStatus {
	return gwv1.RouteParentStatus{
		ParentRef:      gwv1.ParentReference{Name: "their-gateway"},
		ControllerName: foreignController,
		Conditions: []metav1.Condition{{
			Type: string(gwv1.RouteConditionAccepted), Status: metav1.ConditionTrue,
			Reason: "Accepted", Message: "theirs", LastTransitionTime: metav1.Now(),
		}},
	}
}

func hasForeign(rs gwv1.RouteStatus) bool {
	for _, p := range rs.Parents {
		if p.ControllerName == foreignController {
			return true
		}
	}
	return false
}

// Another controller's status.parents entry survives our writes; our entry
// for a removed parentRef disappears; a manual edit of our condition is
// corrected; a concurrent writer causes retries, not lost updates, and no
// write ping-pong.
func TestSharedRouteStatus(t *testing.T) {
	f := newFixture(t)
	f.gateway("gw")
	f.gateway("gw2")
	f.service("web", "10.0.0.1")
	rt := f.route("shared", "gw", "web")
	// A second parentRef, to a Gateway that is ours too.
	update(f, rt, func(r *gwv1.HTTPRoute) {
		r.Spec.ParentRefs = append(r.Spec.ParentRefs, gwv1.ParentReference{Name: "gw2"})
	})
	// The foreign controller writes its entry first.
	updateStatus(f, rt, func(r *gwv1.HTTPRoute) { r.Status.Parents = append(r.Status.Parents, foreignEntry()) })
	rep := startReplica(t, "a", f.opts())
	eventually(t, 30*time.Second, "ours written next to the foreign entry", func() bool {
		var r gwv1.HTTPRoute
		if k8s.Get(f.ctx, f.key("shared"), &r) != nil {
			return false
		}
		ours := 0
		for _, p := range r.Status.Parents {
			if string(p.ControllerName) == f.controller {
				ours++
			}
		}
		return ours == 2 && hasForeign(r.Status.RouteStatus)
	})

	// Removing a parentRef removes our entry for it, and only it.
	update(f, rt, func(r *gwv1.HTTPRoute) { r.Spec.ParentRefs = r.Spec.ParentRefs[:1] })
	eventually(t, 10*time.Second, "entry of the removed parentRef gone", func() bool {
		var r gwv1.HTTPRoute
		if k8s.Get(f.ctx, f.key("shared"), &r) != nil {
			return false
		}
		return len(r.Status.Parents) == 2 && hasForeign(r.Status.RouteStatus) && f.routeAccepted("shared")
	})

	// A manual edit of our condition is corrected (drift self-heals).
	var r gwv1.HTTPRoute
	if err := k8s.Get(f.ctx, f.key("shared"), &r); err != nil {
		t.Fatal(err)
	}
	p := f.ourParent(r.Status.RouteStatus)
	meta.SetStatusCondition(&p.Conditions, metav1.Condition{Type: string(gwv1.RouteConditionAccepted), Status: metav1.ConditionFalse, Reason: "Tampered", Message: "edited by hand", ObservedGeneration: r.Generation})
	if err := k8s.Status().Update(f.ctx, &r); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "manual edit corrected", func() bool { return f.routeAccepted("shared") && hasForeignRoute(f) })

	// A concurrent writer keeps bumping resourceVersion by rewriting its
	// own entry. Meanwhile a spec change needs a new status from us. Our
	// update must land (conflicts retried), theirs must never be lost, and
	// our writes stay bounded.
	before := rep.faults.statusWrites.Load()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var theirWrites, theirConflicts atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var x gwv1.HTTPRoute
			if k8s.Get(f.ctx, f.key("shared"), &x) != nil {
				continue
			}
			for j := range x.Status.Parents {
				if x.Status.Parents[j].ControllerName == foreignController {
					x.Status.Parents[j].Conditions[0].Message = "theirs " + string(rune('a'+i%26))
				}
			}
			if err := k8s.Status().Update(f.ctx, &x); err == nil {
				theirWrites.Add(1)
			} else if apierrors.IsConflict(err) {
				theirConflicts.Add(1)
			}
			time.Sleep(5 * time.Millisecond) // pacing of the foreign writer, not a wait for our result
		}
	}()
	eventually(t, 10*time.Second, "the foreign writer running", func() bool { return theirWrites.Load() >= 5 })
	update(f, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "shared"}}, func(r *gwv1.HTTPRoute) {
		r.Spec.Hostnames = []gwv1.Hostname{"shared.example.com"}
	})
	eventually(t, 15*time.Second, "our update lands despite the concurrent writer", func() bool { return f.routeAccepted("shared") && hasForeignRoute(f) })
	// Keep the foreign writer going a while after our update: each of its
	// writes is an event we check, and none may make us write again.
	mark := theirWrites.Load()
	eventually(t, 10*time.Second, "more foreign writes after ours", func() bool { return theirWrites.Load() >= mark+20 })
	close(stop)
	wg.Wait()
	if !f.routeAccepted("shared") || !hasForeignRoute(f) {
		t.Fatal("after the concurrent writes, our or their entry is wrong")
	}
	ours := rep.faults.statusWrites.Load() - before
	t.Logf("concurrent writer: %d writes, %d conflicts; ours: %d writes", theirWrites.Load(), theirConflicts.Load(), ours)
	// One write per needed change (the spec change), plus none for the
	// foreign writer's changes: they do not touch our entries.
	if ours > 3 {
		t.Errorf("we wrote %d times for one change: write ping-pong with the other controller", ours)
	}
	// Quiet now: no further writes happen.
	quiet := rep.faults.statusWrites.Load()
	eventually(t, 5*time.Second, "status queue drained", func() bool { return rep.c.StatusPending() == 0 })
	if n := rep.faults.statusWrites.Load(); n != quiet {
		t.Errorf("%d writes after the world became quiet", n-quiet)
	}
}

func hasForeignRoute(f *fixture) bool {
	var r gwv1.HTTPRoute
	return k8s.Get(f.ctx, f.key("shared"), &r) == nil && hasForeign(r.Status.RouteStatus)
}
