package faults

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

const churnRoutes = 500

// The leader process is killed (SIGKILL: no Lease release, no goodbye)
// while 500 routes churn — created at 100/s, then updated at 50/s. Within the
// lease duration + 5 s of the kill every route's status is correct
// (Accepted, ResolvedRefs, observedGeneration = generation): no status is
// lost in the hand-over.
func TestLeaderKilledDuringChurn(t *testing.T) {
	w := newWorld(t)
	w.gateway("gw", nil)
	w.service("web", "10.0.0.1")
	// Default flags: 4 status workers, 50 QPS towards the API server.
	rs := w.startReplicas(t, 2)
	leader := waitLeader(t, 30*time.Second, rs...)
	survivor := others(leader, rs)[0]
	eventually(t, 60*time.Second, "Gateway programmed", func() error { return w.gatewayProgrammed("gw", 0) })

	// Churn: 16 writers create the routes (100/s in all), then keep
	// changing their paths (50/s in all). The rates are fixed so the load
	// does not depend on how fast this machine is.
	const writers, createRate, updateRate = 16, 100, 50
	var created, updates, conflicts, failures atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for k := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second * writers / createRate)
			defer tick.Stop()
			for i := k; i < churnRoutes; i += writers {
				<-tick.C
				r := w.newRoute(fmt.Sprintf("c%03d", i), "gw", "web")
				if err := kubeClient().Create(w.ctx, r); err != nil {
					failures.Add(1)
					t.Errorf("creating %s: %v", r.Name, err)
					return
				}
				created.Add(1)
			}
			tick.Reset(time.Second * writers / updateRate)
			rng := rand.New(rand.NewPCG(uint64(k), 1))
			for v := 1; ; v++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				i := k + writers*rng.IntN((churnRoutes-k+writers-1)/writers)
				var r gwv1.HTTPRoute
				if err := kubeClient().Get(w.ctx, w.key(fmt.Sprintf("c%03d", i)), &r); err != nil {
					failures.Add(1)
					continue
				}
				r.Spec.Rules[0].Matches[0].Path.Value = ptr.To(fmt.Sprintf("/c%03d/v%d", i, v))
				switch err := kubeClient().Update(w.ctx, &r); {
				case err == nil:
					updates.Add(1)
				case apierrors.IsConflict(err):
					conflicts.Add(1)
				default:
					failures.Add(1)
				}
			}
		}()
	}
	stopChurn := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopChurn()

	churnStart := time.Now()
	eventually(t, 60*time.Second, "all routes created", func() error {
		if n := created.Load(); n < churnRoutes {
			return fmt.Errorf("%d/%d", n, churnRoutes)
		}
		return nil
	})
	figure(t, "create_500_routes", time.Since(churnStart))
	// Let updates run for a second, then kill the leader mid-churn; the
	// churn goes on for two more seconds, into the hand-over.
	time.Sleep(time.Second)
	leader.kill(t)
	killed := time.Now()
	time.Sleep(2 * time.Second)
	stopChurn()
	figure(t, "churn_after_kill", time.Since(killed))
	figure(t, "routes", churnRoutes)
	figure(t, "updates", updates.Load())
	figure(t, "update_conflicts_between_writers", conflicts.Load())
	if n := failures.Load(); n > 0 {
		t.Errorf("%d churn requests failed", n)
	}

	var takeover time.Duration
	deadline := leaseDuration + 5*time.Second
	_, err := poll(deadline-time.Since(killed), func() error {
		if takeover == 0 {
			if l, err := survivor.isLeader(); err == nil && l {
				takeover = time.Since(killed)
			}
		}
		return w.routesCorrect()
	})
	converged := time.Since(killed)
	if takeover > 0 {
		figure(t, "takeover_after_kill", takeover)
	}
	if err == nil {
		figure(t, "all_correct_after_kill", converged)
		figure(t, "late_statuses", 0)
		figure(t, "lost_statuses", 0)
		return
	}
	// Not within the deadline: how many were late, and how many never
	// converge (give them another 60 s)?
	bad, _ := w.badRoutes()
	figure(t, "late_statuses", len(bad))
	t.Errorf("%d route statuses not correct %s after the kill (lease duration + 5s): %s", len(bad), deadline, join(bad, 5))
	d, err := poll(60*time.Second, func() error { return w.routesCorrect() })
	bad, _ = w.badRoutes()
	figure(t, "lost_statuses", len(bad))
	if err != nil {
		t.Errorf("lost statuses: %d routes never became correct: %s", len(bad), join(bad, 5))
	} else {
		figure(t, "all_correct_after_kill", time.Since(killed))
		t.Logf("all statuses correct %s after the deadline", d)
	}
}
