package faults

import (
	"errors"
	"testing"
	"time"

	"github.com/portico-dev/portico/test/faults/faultproxy"
)

// Status writes hang on the leader (its proxy holds every PUT/PATCH of a
// status subresource). An EndpointSlice change still reaches xDS on every
// replica within 1 s — translation never waits on the status writer — and
// once the writes are released every pending status lands.
func TestHungStatusWritesDoNotStallXDS(t *testing.T) {
	w := newWorld(t)
	w.gateway("gw", nil)
	w.service("web", "10.0.0.1")
	w.route("r0", "gw", "web")
	rs := w.startReplicas(t, 2)
	leader := waitLeader(t, 30*time.Second, rs...)
	eventually(t, 60*time.Second, "Gateway programmed and r0 accepted", func() error {
		return errors.Join(w.gatewayProgrammed("gw", 1), w.routesCorrect("r0"))
	})
	secret := w.clientSecret("gw")
	streams := map[*replica]*adsStream{}
	for _, r := range rs {
		s := dialADS(t, r.xds, w.ns+"/gw", secret, typeEDS)
		if _, err := s.waitFor(20*time.Second, endpointsAre("10.0.0.1")); err != nil {
			t.Fatalf("replica %s: %v", r.name, err)
		}
		streams[r] = s
	}

	hang, err := leader.proxy.Add(faultproxy.Rule{Method: "^(PUT|PATCH)$", Path: "/status$", Action: faultproxy.Hang})
	if err != nil {
		t.Fatal(err)
	}
	defer hang.Remove()
	landed := func() int { return leader.statusWrites(func(r *faultproxy.Record) bool { return r.OK() }) }
	hungNow := func() int {
		return leader.statusWrites(func(r *faultproxy.Record) bool { return r.InFlight() && r.Fault == "hang" })
	}
	// New routes give the leader statuses to write; the writes hang.
	routes := names("r", 6)
	for _, n := range routes[1:] {
		w.route(n, "gw", "web")
	}
	eventually(t, 10*time.Second, "status writes hanging on the leader", func() error {
		if n := hungNow(); n == 0 {
			return errors.New("none yet")
		}
		return nil
	})
	landedBefore := landed()

	// An endpoint change must reach every replica's xDS within 1 s, both
	// while the first writes hang and after the writer's per-write timeout
	// (10 s) has abandoned and retried them.
	var worst time.Duration
	change := func(addr string) {
		t.Helper()
		start := time.Now()
		w.setEndpoints("web", addr)
		for _, r := range rs {
			resp, err := streams[r].waitFor(10*time.Second, endpointsAre(addr))
			if err != nil {
				t.Fatalf("replica %s: %v", r.name, err)
			}
			d := resp.at.Sub(start)
			if d > time.Second {
				t.Errorf("replica %s got endpoint %s after %s, want < 1s", r.name, addr, d.Round(time.Millisecond))
			}
			worst = max(worst, d)
		}
		if n := hungNow(); n == 0 {
			t.Fatal("no status write was hanging when xDS was checked; the fault did not hold")
		}
	}
	change("10.0.0.2")
	eventually(t, 20*time.Second, "the leader to give up a hung write (write timeout)", func() error {
		n := leader.statusWrites(func(r *faultproxy.Record) bool { return r.Fault == "hang" && !r.InFlight() })
		if n == 0 {
			return errors.New("none abandoned yet")
		}
		return nil
	})
	change("10.0.0.3")
	figure(t, "xds_update_worst", worst)
	if n := landed() - landedBefore; n != 0 {
		t.Fatalf("%d status writes landed while writes hung", n)
	}
	figure(t, "status_write_attempts_held", hang.Hits())
	t.Logf("endpoint changes reached xDS on both replicas within %s while %d status writes hung", worst.Round(time.Millisecond), hungNow())

	hang.Remove()
	d := eventually(t, 30*time.Second, "every status after the release", func() error {
		return errors.Join(w.routesCorrect(routes...), w.gatewayProgrammed("gw", int32(len(routes))))
	})
	figure(t, "all_statuses_after_release", d)
	for _, r := range others(leader, rs) {
		if n := r.statusWrites(nil); n != 0 {
			t.Errorf("follower %s wrote %d statuses", r.name, n)
		}
	}
}
