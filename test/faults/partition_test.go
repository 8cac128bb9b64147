package faults

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/portico-dev/portico/test/faults/faultproxy"
)

// The leader is cut off the API server (its proxy black-holes everything)
// while status writes are in flight. It stops leading within the renew
// deadline, its in-flight writes are cancelled and it writes nothing more;
// it keeps serving xDS from its last good configuration; the follower takes
// over and brings every status up to date, including changes made during
// the partition. After the partition heals the old leader stays a follower.
func TestPartitionedLeader(t *testing.T) {
	w := newWorld(t)
	w.gateway("gw", nil)
	w.service("web", "10.0.0.1")
	routes := names("r", 10)
	for _, n := range routes {
		w.route(n, "gw", "web")
	}
	rs := w.startReplicas(t, 2)
	leader := waitLeader(t, 30*time.Second, rs...)
	follower := others(leader, rs)[0]
	eventually(t, 60*time.Second, "Gateway programmed and routes accepted", func() error {
		return errors.Join(w.gatewayProgrammed("gw", 10), w.routesCorrect(routes...))
	})
	secret := w.clientSecret("gw")
	before, err := dialADS(t, leader.xds, w.ns+"/gw", secret, typeCDS).waitFor(10*time.Second, hasClusters)
	if err != nil {
		t.Fatal(err)
	}

	// Give the leader writes in flight: hold its status writes, create
	// routes, and partition it while they hang.
	hold, err := leader.proxy.Add(faultproxy.Rule{Method: "^(PUT|PATCH)$", Path: "/status$", Action: faultproxy.Hang})
	if err != nil {
		t.Fatal(err)
	}
	for i := 10; i < 15; i++ {
		routes = append(routes, fmt.Sprintf("r%d", i))
		w.route(routes[len(routes)-1], "gw", "web")
	}
	inflight := func() int { return leader.statusWrites(func(r *faultproxy.Record) bool { return r.InFlight() }) }
	eventually(t, 10*time.Second, "status writes in flight on the leader", func() error {
		if inflight() == 0 {
			return errors.New("none")
		}
		return nil
	})
	leader.proxy.Partition(faultproxy.Blackhole)
	start := time.Now()
	hold.Remove() // the held writes now sit in the partition
	inflightAtPartition := inflight()
	figure(t, "writes_in_flight_at_partition", inflightAtPartition)

	// Changes during the partition: a new route and a spec change.
	routes = append(routes, "r15")
	w.route("r15", "gw", "web")
	w.setPath("r0", "/r0-v2")

	// Watch both replicas and the statuses, noting when the old leader
	// stopped leading, when the follower took over and when every status
	// was correct.
	var stepDown, takeover, converged time.Duration
	eventually(t, 2*renewDeadline+leaseDuration+15*time.Second, "step-down, takeover and every status correct", func() error {
		if stepDown == 0 {
			if l, err := leader.isLeader(); err == nil && !l {
				stepDown = time.Since(start)
			}
		}
		if takeover == 0 {
			if l, err := follower.isLeader(); err == nil && l {
				takeover = time.Since(start)
			}
		}
		if converged == 0 && errors.Join(w.routesCorrect(routes...), w.gatewayProgrammed("gw", int32(len(routes)))) == nil {
			converged = time.Since(start)
		}
		if stepDown == 0 || takeover == 0 || converged == 0 {
			return fmt.Errorf("old leader stepped down after %s, follower leads after %s, statuses correct after %s (0: not yet)", stepDown, takeover, converged)
		}
		return nil
	})
	steppedDown := start.Add(stepDown)
	figure(t, "step_down", stepDown)
	figure(t, "takeover", takeover)
	figure(t, "two_leaders_overlap", max(0, stepDown-takeover))
	if limit := renewDeadline + retryPeriod + time.Second; stepDown > limit {
		t.Errorf("the partitioned leader stopped leading (and writing) after %s, want within the renew deadline + retry period (+1s) = %s", stepDown, limit)
	}
	if stepDown > takeover {
		t.Errorf("two leaders for %s: the follower led after %s, the partitioned leader stopped only after %s", stepDown-takeover, takeover, stepDown)
	}
	if limit := leaseDuration + retryPeriod + 2*time.Second; takeover > limit {
		t.Errorf("takeover took %s, want within lease duration + retry period (+2s) = %s", takeover, limit)
	}
	// Its in-flight writes are cancelled (the client gives up), not left
	// to land when the partition heals.
	eventually(t, 2*time.Second, "the old leader's in-flight writes cancelled", func() error {
		if n := inflight(); n > 0 {
			return fmt.Errorf("%d status writes still in flight", n)
		}
		return nil
	})

	// It still serves xDS, from its last good configuration.
	got, err := dialADS(t, leader.xds, w.ns+"/gw", secret, typeCDS).waitFor(5*time.Second, hasClusters)
	if err != nil {
		t.Fatalf("the partitioned replica stopped serving xDS: %v", err)
	}
	if !slices.Equal(clusterNames(got.DiscoveryResponse), clusterNames(before.DiscoveryResponse)) {
		t.Errorf("partitioned replica serves clusters %v, had %v", clusterNames(got.DiscoveryResponse), clusterNames(before.DiscoveryResponse))
	}
	figure(t, "all_statuses_correct", converged)

	// Heal: the old leader catches up as a follower and writes nothing.
	leader.proxy.Heal()
	healed := time.Now()
	eventually(t, 10*time.Second, "the old leader back in touch with the API server", func() error {
		n := leader.proxy.Count(func(r *faultproxy.Record) bool {
			return r.Class == faultproxy.ClassLeaseRead && r.OK() && r.Start.After(healed)
		})
		if n == 0 {
			return errors.New("no Lease read since the partition healed")
		}
		return nil
	})
	eventually(t, 10*time.Second, "the old leader serving the new configuration", func() error {
		// r15 was created during the partition; the old leader's
		// /debug/status shows it once its informers caught up.
		b, err := leader.get("/debug/status")
		if err != nil {
			return err
		}
		if !bytes.Contains(b, []byte(`"r15"`)) {
			return errors.New("r15 not seen yet")
		}
		return nil
	})
	if l, err := leaderOf(rs...); err != nil || l != follower {
		t.Errorf("after healing: leader %v (%v), want %s", l, err, follower.name)
	}
	late := leader.statusWrites(func(r *faultproxy.Record) bool {
		return r.Start.After(steppedDown) || r.Forwarded.After(steppedDown)
	})
	figure(t, "old_leader_writes_after_step_down", late)
	if late != 0 {
		t.Errorf("the old leader sent %d status writes after it stopped leading", late)
	}
	if err := w.routesCorrect(routes...); err != nil {
		t.Errorf("after healing: %v", err)
	}
}

func hasClusters(r *discoveryv3.DiscoveryResponse) bool { return len(r.Resources) > 0 }
