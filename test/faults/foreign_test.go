package faults

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/test/faults/faultproxy"
)

const foreignController = "example.com/foreign-controller"

// A second controller shares the routes: it keeps rewriting its own entry
// in status.parents (optimistic concurrency, like any controller) while the
// routes' specs change twice and Portico must write new statuses. On half
// the routes it updates its entry in place; on the other half it does what
// many controllers do — drops its entries and appends fresh ones, so its
// entry moves to the end. None of the foreign controller's writes is lost
// — every route ends with exactly the entry it wrote last — and Portico
// writes each route's status once per change of its own desired status,
// conflicts and the other controller's ordering notwithstanding.
func TestForeignControllerStatus(t *testing.T) {
	const nRoutes, specChanges = 20, 2
	w := newWorld(t)
	w.gateway("gw", nil)
	w.service("web", "10.0.0.1")
	routes := names("f", nRoutes)
	for _, n := range routes {
		w.route(n, "gw", "web")
	}
	rs := w.startReplicas(t, 2)
	waitLeader(t, 30*time.Second, rs...)
	eventually(t, 60*time.Second, "routes accepted", func() error { return w.routesCorrect(routes...) })
	ourWrites := func(route string) int {
		n := 0
		for _, r := range rs {
			n += r.statusWrites(func(rec *faultproxy.Record) bool {
				return rec.OK() && rec.Resource == "httproutes" && rec.Name == route
			})
		}
		return n
	}
	ourAttempts := func() int {
		n := 0
		for _, r := range rs {
			n += r.statusWrites(func(rec *faultproxy.Record) bool { return rec.Resource == "httproutes" })
		}
		return n
	}
	before := map[string]int{}
	for _, n := range routes {
		before[n] = ourWrites(n)
	}
	attemptsBefore := ourAttempts()
	conflictsBefore := 0.0
	for _, r := range rs {
		n, _ := r.metric("portico_status_writes_total", map[string]string{"kind": "HTTPRoute", "result": "conflict"})
		conflictsBefore += n
	}

	// The foreign controller: 4 writers, 5 routes each, rewriting their
	// entry as fast as they can.
	var mu sync.Mutex
	last := map[string]string{} // route → message of the foreign entry last written
	var theirWrites, theirConflicts, theirErrors atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for k := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := 0; ; seq++ {
				for i := k; i < nRoutes; i += 4 {
					select {
					case <-stop:
						return
					default:
					}
					name := routes[i]
					var r gwv1.HTTPRoute
					if err := kubeClient().Get(w.ctx, w.key(name), &r); err != nil {
						theirErrors.Add(1)
						continue
					}
					msg := fmt.Sprintf("theirs %d", seq)
					setForeign(&r, msg, i%2 == 0)
					switch err := kubeClient().Status().Update(w.ctx, &r); {
					case err == nil:
						theirWrites.Add(1)
						mu.Lock()
						last[name] = msg
						mu.Unlock()
					case apierrors.IsConflict(err):
						theirConflicts.Add(1)
					default:
						theirErrors.Add(1)
					}
				}
			}
		}()
	}
	stopForeign := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopForeign()

	// Once every route carries the foreign entry, and our status queue is
	// empty, the foreign entries' arrival has cost what it costs.
	leader := waitLeader(t, 10*time.Second, rs...)
	eventually(t, 20*time.Second, "foreign entries on every route", func() error {
		var list gwv1.HTTPRouteList
		if err := kubeClient().List(w.ctx, &list, client.InNamespace(w.ns)); err != nil {
			return err
		}
		for _, r := range list.Items {
			if !slices.ContainsFunc(r.Status.Parents, func(p gwv1.RouteParentStatus) bool { return p.ControllerName == foreignController }) {
				return fmt.Errorf("%s has no foreign entry yet", r.Name)
			}
		}
		return nil
	})
	if _, err := poll(5*time.Second, func() error {
		if n, err := leader.metric("portico_status_queue_depth", nil); err != nil || n > 0 {
			return fmt.Errorf("status queue depth %v (%v)", n, err)
		}
		return nil
	}); err != nil {
		t.Errorf("our status queue does not drain while the foreign controller writes (%v): we keep rewriting statuses", err)
	}
	arrival := 0
	for _, n := range routes {
		arrival += ourWrites(n) - before[n]
		before[n] = ourWrites(n)
	}
	figure(t, "our_writes_when_foreign_entries_appeared", arrival)
	if arrival > 0 {
		// Our desired statuses did not change: nothing to write.
		t.Errorf("the foreign entries' arrival cost %d writes of ours on %d routes", arrival, nRoutes)
	}

	// Meanwhile the routes change twice; each change needs a new status
	// from us (observedGeneration).
	for c := 1; c <= specChanges; c++ {
		for _, n := range routes {
			w.setPath(n, fmt.Sprintf("/%s-v%d", n, c))
		}
		eventually(t, 30*time.Second, fmt.Sprintf("our statuses after spec change %d", c), func() error {
			return w.routesCorrect(routes...)
		})
	}
	time.Sleep(time.Second)
	stopForeign()
	figure(t, "routes", nRoutes)
	figure(t, "their_writes", theirWrites.Load())
	figure(t, "their_conflicts", theirConflicts.Load())
	if n := theirErrors.Load(); n > 0 {
		t.Errorf("the foreign controller saw %d errors", n)
	}

	// Everything settles: ours correct, theirs exactly as they last wrote.
	var lost []string
	eventually(t, 30*time.Second, "our statuses correct after the foreign writer stopped", func() error {
		return w.routesCorrect(routes...)
	})
	var list gwv1.HTTPRouteList
	if err := kubeClient().List(w.ctx, &list); err != nil {
		t.Fatal(err)
	}
	for _, r := range list.Items {
		if r.Namespace != w.ns {
			continue
		}
		var msgs []string
		for _, p := range r.Status.Parents {
			if p.ControllerName == foreignController {
				msgs = append(msgs, p.Conditions[0].Message)
			}
		}
		mu.Lock()
		want := last[r.Name]
		mu.Unlock()
		if len(msgs) != 1 || msgs[0] != want {
			lost = append(lost, fmt.Sprintf("%s: foreign entries %q, last written %q", r.Name, msgs, want))
		}
	}
	figure(t, "lost_foreign_entries", len(lost))
	if len(lost) > 0 {
		t.Errorf("foreign status entries lost or stale: %s", join(lost, 5))
	}

	// Our writes: one per route per change of our desired status.
	per := map[bool][]int{} // in place → writes per route
	for i, n := range routes {
		per[i%2 == 0] = append(per[i%2 == 0], ourWrites(n)-before[n])
	}
	for _, inPlace := range []bool{true, false} {
		style := "appending"
		if inPlace {
			style = "in_place"
		}
		worst, sum := slices.Max(per[inPlace]), 0
		for _, x := range per[inPlace] {
			sum += x
		}
		figure(t, "our_writes_per_route_per_change_max_"+style, float64(worst)/specChanges)
		figure(t, "our_writes_per_route_per_change_mean_"+style, float64(sum)/float64(len(per[inPlace]))/specChanges)
		if worst > specChanges {
			t.Errorf("with a foreign controller updating %s, we wrote a route's status up to %d times for %d spec changes (per route: %v)",
				strings.ReplaceAll(style, "_", " "), worst, specChanges, per[inPlace])
		}
	}
	figure(t, "our_write_attempts_per_route_mean", float64(ourAttempts()-attemptsBefore)/nRoutes)
	conflicts := 0.0
	for _, r := range rs {
		n, _ := r.metric("portico_status_writes_total", map[string]string{"kind": "HTTPRoute", "result": "conflict"})
		conflicts += n
	}
	figure(t, "our_conflicts", int(conflicts-conflictsBefore))
}

// setForeign sets the foreign controller's entry in a route's status: in
// place, or (inPlace false) by dropping it and appending a new one.
func setForeign(r *gwv1.HTTPRoute, msg string, inPlace bool) {
	entry := gwv1.RouteParentStatus{
		ParentRef:      gwv1.ParentReference{Name: "their-gateway"},
		ControllerName: foreignController,
		Conditions: []metav1.Condition{{
			Type: string(gwv1.RouteConditionAccepted), Status: metav1.ConditionTrue,
			Reason: "Accepted", Message: msg, LastTransitionTime: metav1.Now(), ObservedGeneration: r.Generation,
		}},
	}
	if inPlace {
		for i := range r.Status.Parents {
			if r.Status.Parents[i].ControllerName == foreignController {
				r.Status.Parents[i] = entry
				return
			}
		}
	}
	r.Status.Parents = slices.DeleteFunc(r.Status.Parents, func(p gwv1.RouteParentStatus) bool {
		return p.ControllerName == foreignController
	})
	r.Status.Parents = append(r.Status.Parents, entry)
}
