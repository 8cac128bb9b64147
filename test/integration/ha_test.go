package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/portico-dev/portico/internal/leader"
)

// leaderOf returns the replica that reports leadership on /debug/leader,
// failing if more than one does.
func leaderOf(t *testing.T, rs ...*replica) *replica {
	t.Helper()
	var found *replica
	for _, r := range rs {
		var body struct {
			Leader   bool   `json:"leader"`
			Identity string `json:"identity"`
		}
		resp, err := http.Get("http://" + r.debug + "/debug/leader")
		if err != nil {
			continue
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatalf("/debug/leader of %s: %v", r.name, err)
		}
		if body.Identity != r.name {
			t.Fatalf("/debug/leader identity = %q, want %q", body.Identity, r.name)
		}
		if body.Leader {
			if found != nil {
				t.Fatalf("two leaders at once: %s and %s", found.name, r.name)
			}
			found = r
		}
	}
	return found
}

func waitLeader(t *testing.T, timeout time.Duration, rs ...*replica) (*replica, time.Duration) {
	t.Helper()
	var l *replica
	d := eventually(t, timeout, "a leader", func() bool { l = leaderOf(t, rs...); return l != nil })
	return l, d
}

// Three replicas: exactly one leader, only it writes, all serve the same
// xDS versions.
func TestThreeReplicasOneWriter(t *testing.T) {
	f := newFixture(t)
	f.gateway("gw")
	f.service("web", "10.0.0.1")
	for i := range 5 {
		f.route(fmt.Sprintf("r%d", i), "gw", "web")
	}
	rs := []*replica{startReplica(t, "a", f.opts()), startReplica(t, "b", f.opts()), startReplica(t, "c", f.opts())}
	leader, _ := waitLeader(t, 20*time.Second, rs...)
	eventually(t, 30*time.Second, "all routes accepted", func() bool {
		for i := range 5 {
			if !f.routeAccepted(fmt.Sprintf("r%d", i)) {
				return false
			}
		}
		return f.gatewayProgrammed("gw", 5)
	})
	// Followers have written nothing; the leader wrote the statuses.
	for _, r := range rs {
		n := r.faults.statusWrites.Load()
		if r == leader && n == 0 {
			t.Errorf("leader %s wrote no status", r.name)
		}
		if r != leader && n != 0 {
			t.Errorf("follower %s wrote %d statuses", r.name, n)
		}
	}
	if l := leaderOf(t, rs...); l != leader {
		t.Fatalf("leader changed during the test")
	}

	// Every replica serves the same clusters, byte for byte, to a proxy of
	// the Gateway. (The SotW version_info is each replica's own update
	// count; resources carry content-hash versions over delta xDS.)
	gw := f.ns + "/gw"
	served := map[string][]byte{}
	for _, r := range rs {
		a := dialADS(t, r.xds, gw, typeCDS)
		resp, err := a.waitFor(10*time.Second, func(resp *discoveryv3.DiscoveryResponse) bool { return len(resp.Resources) == 1 })
		if err != nil {
			t.Fatalf("replica %s: %v", r.name, err)
		}
		served[r.name] = resp.Resources[0].GetValue()
	}
	if !bytes.Equal(served["a"], served["b"]) || !bytes.Equal(served["b"], served["c"]) {
		t.Fatalf("replicas serve different clusters: %x", served)
	}
	t.Logf("leader %s; the same %d-byte cluster on all three", leader.name, len(served["a"]))
}

// A graceful stop of the leader releases the Lease: a successor leads
// within about a second and writes the status of a route created during the
// hand-over.
func TestGracefulHandover(t *testing.T) {
	f := newFixture(t)
	f.gateway("gw")
	f.service("web", "10.0.0.1")
	f.route("before", "gw", "web")
	a, b := startReplica(t, "a", f.opts()), startReplica(t, "b", f.opts())
	leader, _ := waitLeader(t, 20*time.Second, a, b)
	eventually(t, 30*time.Second, "first route accepted", func() bool { return f.routeAccepted("before") })
	other := b
	if leader == b {
		other = a
	}

	start := time.Now()
	go leader.stop(t)
	f.route("during", "gw", "web")
	d := eventually(t, 5*time.Second, "successor leads", func() bool { return other.c.IsLeader() })
	t.Logf("graceful handover: successor led %s after the leader was stopped", time.Since(start).Round(time.Millisecond))
	if d > testLease-500*time.Millisecond {
		t.Errorf("successor took %s to lead; the released Lease should hand over in ~1s", d)
	}
	eventually(t, 10*time.Second, "route created during hand-over accepted", func() bool {
		return f.routeAccepted("during") && f.gatewayProgrammed("gw", 2)
	})
}

// leaseElector is a leader.Elector on the test API server whose Lease
// requests are counted.
type leaseElector struct {
	name     string
	e        *leader.Elector
	cancel   context.CancelFunc
	done     chan struct{}
	requests atomic.Int64 // Lease requests other than watches
	watches  atomic.Int64 // Lease watches the API server accepted
	// crashed makes every later Lease request fail, as if the process had
	// died: nothing is renewed or released.
	crashed atomic.Bool
	renewed atomic.Pointer[time.Time] // when the last successful Lease write returned
}

// lastWrite is when the elector's last successful write of the Lease
// returned.
func (le *leaseElector) lastWrite() time.Time {
	if p := le.renewed.Load(); p != nil {
		return *p
	}
	return time.Time{}
}

func startElector(t *testing.T, ns, name string, lease, renew, retry time.Duration) *leaseElector {
	t.Helper()
	le := &leaseElector{name: name, done: make(chan struct{})}
	cfg := rest.CopyConfig(restCfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return rtFunc(func(req *http.Request) (*http.Response, error) {
			if !strings.Contains(req.URL.Path, "/leases") {
				return rt.RoundTrip(req)
			}
			if le.crashed.Load() {
				return nil, errors.New("fault: the elector crashed")
			}
			if req.URL.Query().Get("watch") != "true" {
				le.requests.Add(1)
				resp, err := rt.RoundTrip(req)
				if err == nil && resp.StatusCode < 300 && (req.Method == http.MethodPut || req.Method == http.MethodPost) {
					now := time.Now()
					le.renewed.Store(&now)
				}
				return resp, err
			}
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusOK {
				le.watches.Add(1)
			}
			return resp, err
		})
	}
	watchCS, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = renew // as the controller does: Lease reads and writes time out
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	le.e, err = leader.New(leader.Config{
		Client: cs, WatchClient: watchCS, Namespace: ns, Name: leaseName, Identity: name,
		LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry,
		Log: testLogger(t, name),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	le.cancel = cancel
	go func() {
		defer close(le.done)
		if err := le.e.Run(ctx); err != nil {
			t.Errorf("elector %s: %v", name, err)
		}
	}()
	t.Cleanup(le.stop)
	return le
}

// stop ends Run, which releases the Lease if held, and waits for it.
func (le *leaseElector) stop() {
	le.cancel()
	<-le.done
}

// A released Lease is taken over at once, not at the followers' next retry:
// followers watch the Lease. With a 20 s retry period (and client-go's
// jitter on top), a take-over within 5 s can only come from the watch.
// Exactly one follower wins — the Lease's resourceVersion arbitrates — and
// each follower makes only a couple of Lease requests for the hand-over.
func TestReleasedLeaseTakenOverBeforeRetry(t *testing.T) {
	f := newFixture(t)
	const lease, renew, retry = 30 * time.Second, 25 * time.Second, 20 * time.Second
	leaders, old, followers := electThree(t, f, lease, renew, retry)
	before := []int64{followers[0].requests.Load(), followers[1].requests.Load()}

	start := time.Now()
	old.stop() // releases the Lease
	released := time.Since(start)
	eventually(t, 5*time.Second, "a follower leads", func() bool { return len(leaders()) == 1 })
	took := time.Since(start)
	next := leaders()[0]
	t.Logf("hand-over: %s released the Lease in %s; %s led %s after the stop began (retry period %s)",
		old.name, released.Round(time.Millisecond), next.name, took.Round(time.Millisecond), retry)

	var l coordinationv1.Lease
	if err := k8s.Get(f.ctx, f.key(leaseName), &l); err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != next.name {
		t.Fatalf("Lease held by %q, want %s", h, next.name)
	}
	for i, e := range followers {
		n := e.requests.Load() - before[i]
		t.Logf("follower %s: %d Lease requests for the hand-over", e.name, n)
		if n > 4 {
			t.Errorf("follower %s made %d Lease requests for one hand-over, want a Get and an Update or so", e.name, n)
		}
	}
	if got := leaders(); len(got) != 1 || got[0] != next {
		t.Fatalf("leadership moved again after the hand-over")
	}
}

// A leader that stops renewing without releasing the Lease (it crashed) is
// replaced once the Lease has gone unrenewed for the lease duration, as
// measured by the followers' watch of the Lease — not up to two jittered
// retry periods later, as with client-go's polling alone (observed time up
// to 2.2 retry periods late, then noticed at the next poll). With a retry
// period of 2.5 s (polls every 2.5–5.5 s) and a 4 s lease, polling alone
// takes 4–15 s; the watch takes the lease duration plus a Get and an
// Update. The old leader stops within its renew deadline, before anyone
// else leads.
func TestCrashedLeaderReplacedAtLeaseExpiry(t *testing.T) {
	f := newFixture(t)
	const lease, renew, retry = 4 * time.Second, 3500 * time.Millisecond, 2500 * time.Millisecond
	leaders, old, _ := electThree(t, f, lease, renew, retry)
	// A renewal the followers' watches see, so they have observed the
	// Lease being renewed before the crash.
	seen := old.lastWrite()
	eventually(t, 3*retry, "a renewal", func() bool { return old.lastWrite().After(seen) })

	old.crashed.Store(true)
	var next *leaseElector
	eventually(t, lease+5*retry, "a follower leads", func() bool {
		if l := leaders(); len(l) == 1 && l[0] != old {
			next = l[0]
			return true
		}
		return false
	})
	led := time.Now()
	// No write of the crashed leader can land after this point (a write in
	// flight at the crash has returned long since: requests time out
	// within the renew deadline).
	took := led.Sub(old.lastWrite())
	t.Logf("crash: %s led %s after the crashed leader's last renewal (lease %s, retry %s)",
		next.name, took.Round(time.Millisecond), lease, retry)
	if took > lease+time.Second {
		t.Errorf("takeover %s after the last renewal, want within the lease duration (%s) + 1s", took.Round(time.Millisecond), lease)
	}
	if took < lease-100*time.Millisecond {
		t.Errorf("takeover %s after the last renewal, before the Lease (%s) expired", took.Round(time.Millisecond), lease)
	}
	var l coordinationv1.Lease
	if err := k8s.Get(f.ctx, f.key(leaseName), &l); err != nil {
		t.Fatal(err)
	}
	if h := ptr.Deref(l.Spec.HolderIdentity, ""); h != next.name {
		t.Fatalf("Lease held by %q, want %s", h, next.name)
	}
	if d := ptr.Deref(l.Spec.LeaseDurationSeconds, 0); d != int32(lease/time.Second) {
		t.Fatalf("Lease duration %ds written, want the new holder's %s", d, lease)
	}
}

// The leader loses the API server: it stops writing within the renew
// deadline, keeps serving xDS, and another replica takes over and
// converges every status.
func TestPartitionedLeader(t *testing.T) {
	f := newFixture(t)
	f.gateway("gw")
	f.service("web", "10.0.0.1")
	f.route("r0", "gw", "web")
	a, b := startReplica(t, "a", f.opts()), startReplica(t, "b", f.opts())
	leader, _ := waitLeader(t, 20*time.Second, a, b)
	eventually(t, 30*time.Second, "route accepted", func() bool { return f.routeAccepted("r0") })
	other := b
	if leader == b {
		other = a
	}

	leader.faults.failAll.Store(true)
	start := time.Now()
	stopped := eventually(t, testRenew+500*time.Millisecond, "partitioned leader steps down", func() bool { return !leader.c.IsLeader() })
	writesAtStepDown := leader.faults.statusWrites.Load()
	t.Logf("partitioned leader stopped leading after %s (renew deadline %s)", stopped.Round(time.Millisecond), testRenew)

	// Its xDS server still answers from the last good config.
	ads := dialADS(t, leader.xds, f.ns+"/gw", typeCDS)
	if _, err := ads.next(5 * time.Second); err != nil {
		t.Fatalf("partitioned replica stopped serving xDS: %v", err)
	}

	took := eventually(t, testLease+5*time.Second, "other replica takes over", func() bool { return other.c.IsLeader() })
	t.Logf("takeover %s after the partition", time.Since(start).Round(time.Millisecond))
	_ = took
	f.route("r1", "gw", "web")
	eventually(t, 15*time.Second, "statuses converge under the new leader", func() bool {
		return f.routeAccepted("r0") && f.routeAccepted("r1") && f.gatewayProgrammed("gw", 2)
	})
	if n := leader.faults.statusWrites.Load(); n != writesAtStepDown {
		t.Errorf("partitioned replica wrote %d statuses after stepping down", n-writesAtStepDown)
	}
}

// The seed bug: status writes hang on the leader while an EndpointSlice
// changes. The new endpoints reach xDS on every replica within 1 s; when
// writes work again, every pending status lands.
func TestHungStatusWritesDoNotStallXDS(t *testing.T) {
	f := newFixture(t)
	f.gateway("gw")
	f.service("web", "10.0.0.1")
	f.route("r0", "gw", "web")
	a, b := startReplica(t, "a", f.opts()), startReplica(t, "b", f.opts())
	leader, _ := waitLeader(t, 20*time.Second, a, b)
	eventually(t, 30*time.Second, "route accepted", func() bool { return f.routeAccepted("r0") })

	leader.faults.Hang()
	released := false
	defer func() {
		if !released {
			leader.faults.Release()
		}
	}()
	// New routes make status writes pile up (and hang) on the leader.
	for i := 1; i <= 5; i++ {
		f.route(fmt.Sprintf("r%d", i), "gw", "web")
	}
	streams := map[string]*adsStream{}
	for _, r := range []*replica{a, b} {
		s := dialADS(t, r.xds, f.ns+"/gw", typeEDS)
		if _, err := s.waitFor(10*time.Second, func(resp *discoveryv3.DiscoveryResponse) bool { return endpointsHave(resp, "10.0.0.1") }); err != nil {
			t.Fatalf("replica %s: %v", r.name, err)
		}
		streams[r.name] = s
	}

	update(f, f.slice("web"), func(es *discoveryv1.EndpointSlice) {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	})
	changed := time.Now()
	for name, s := range streams {
		if _, err := s.waitFor(time.Second, func(resp *discoveryv3.DiscoveryResponse) bool { return endpointsHave(resp, "10.0.0.2") }); err != nil {
			t.Fatalf("replica %s: new endpoint not in EDS within 1s while status writes hang: %v", name, err)
		}
		t.Logf("replica %s: new endpoint in EDS %s after the change", name, time.Since(changed).Round(time.Millisecond))
	}
	if f.routeAccepted("r5") {
		t.Fatalf("a status write went through while writes were hung; the test did not exercise the fault")
	}

	leader.faults.Release()
	released = true
	eventually(t, 30*time.Second, "every pending status lands", func() bool {
		for i := 0; i <= 5; i++ {
			if !f.routeAccepted(fmt.Sprintf("r%d", i)) {
				return false
			}
		}
		return f.gatewayProgrammed("gw", 6)
	})
}

// electThree starts three electors with the given timings and waits until
// one leads and the other two watch the Lease. leaders reports the current
// leaders (failing the test when there are two).
func electThree(t *testing.T, f *fixture, lease, renew, retry time.Duration) (leaders func() []*leaseElector, old *leaseElector, followers []*leaseElector) {
	t.Helper()
	es := []*leaseElector{
		startElector(t, f.ns, "a", lease, renew, retry),
		startElector(t, f.ns, "b", lease, renew, retry),
		startElector(t, f.ns, "c", lease, renew, retry),
	}
	leaders = func() []*leaseElector {
		var l []*leaseElector
		for _, e := range es {
			if e.e.IsLeader() {
				l = append(l, e)
			}
		}
		if len(l) > 1 {
			t.Fatalf("two leaders at once: %s and %s", l[0].name, l[1].name)
		}
		return l
	}
	eventually(t, 10*time.Second, "a leader", func() bool { return len(leaders()) == 1 })
	old = leaders()[0]
	for _, e := range es {
		if e != old {
			followers = append(followers, e)
		}
	}
	eventually(t, 10*time.Second, "followers watch the Lease", func() bool {
		return followers[0].watches.Load() > 0 && followers[1].watches.Load() > 0
	})
	return leaders, old, followers
}
