package leader

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

// apiServer makes the fake clientset's Leases behave like the API server's
// where election depends on it: every create and update gets a new
// resourceVersion, and an update at another resourceVersion than the
// stored one conflicts. refuse, when set, refuses a write with the error it
// returns (a crashed replica's writes).
type apiServer struct {
	cs *fake.Clientset

	mu     sync.Mutex
	rv     int
	refuse func(old, new *coordinationv1.Lease) error // guarded by mu
	// writes records when each successful write by holder began and ended.
	writes map[string][]span // guarded by mu
}

type span struct{ start, end time.Time }

var leasesGVR = coordinationv1.SchemeGroupVersion.WithResource("leases")

func newAPIServer(objs ...runtime.Object) *apiServer {
	s := &apiServer{cs: fake.NewClientset(), writes: map[string][]span{}}
	for _, o := range objs {
		l := o.(*coordinationv1.Lease).DeepCopy()
		s.rv++
		l.ResourceVersion = strconv.Itoa(s.rv)
		if err := s.cs.Tracker().Add(l); err != nil {
			panic(err)
		}
	}
	react := func(a clienttesting.Action) (bool, runtime.Object, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		start := time.Now()
		l := a.(interface{ GetObject() runtime.Object }).GetObject().(*coordinationv1.Lease).DeepCopy()
		var old *coordinationv1.Lease
		if a.GetVerb() == "update" {
			cur, err := s.cs.Tracker().Get(leasesGVR, a.GetNamespace(), l.Name)
			if err != nil {
				return true, nil, err
			}
			old = cur.(*coordinationv1.Lease)
			if l.ResourceVersion != old.ResourceVersion {
				return true, nil, apierrors.NewConflict(leasesGVR.GroupResource(), l.Name, nil)
			}
		}
		if s.refuse != nil {
			if err := s.refuse(old, l); err != nil {
				return true, nil, err
			}
		}
		s.rv++
		l.ResourceVersion = strconv.Itoa(s.rv)
		var err error
		if old == nil {
			err = s.cs.Tracker().Create(leasesGVR, l, a.GetNamespace())
		} else {
			err = s.cs.Tracker().Update(leasesGVR, l, a.GetNamespace())
		}
		if err != nil {
			return true, nil, err
		}
		h := ptr.Deref(l.Spec.HolderIdentity, "")
		s.writes[h] = append(s.writes[h], span{start, time.Now()})
		return true, l.DeepCopy(), nil
	}
	s.cs.PrependReactor("create", "leases", react)
	s.cs.PrependReactor("update", "leases", react)
	return s
}

// lastWrite is the last successful write of the Lease with holder h.
func (s *apiServer) lastWrite(h string) (span, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.writes[h]
	if len(w) == 0 {
		return span{}, 0
	}
	return w[len(w)-1], len(w)
}

// crash refuses every later write of id: its renewals (holder id) and its
// release (no holder while id holds the Lease).
func (s *apiServer) crash(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = func(old, l *coordinationv1.Lease) error {
		h := ptr.Deref(l.Spec.HolderIdentity, "")
		if h == id || (h == "" && old != nil && ptr.Deref(old.Spec.HolderIdentity, "") == id) {
			return apierrors.NewServiceUnavailable(id + " crashed")
		}
		return nil
	}
}

// count reads a counter.
func count(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

func heldLease(rv, holder string, seconds int32) *coordinationv1.Lease {
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testName, ResourceVersion: rv},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(seconds),
			AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To[int32](4),
		},
	}
}

// Get reports a Lease version the watch saw at T with the validity left
// from T, rounded up so it never ends before T + duration, and without a
// holder once none is left; any other record is returned as read.
func TestGetAdjustsObservedLease(t *testing.T) {
	srv := newAPIServer(heldLease("", "a", 10))
	ctx := context.Background()
	obs := newObserver("b")
	clock := time.Now()
	obs.now = func() time.Time { return clock }
	lock := newWatchedLock(srv.cs.CoordinationV1(), testNS, testName, "b", obs)
	get := func() (*resourcelock.LeaderElectionRecord, string) {
		t.Helper()
		rec, raw, err := lock.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(*rec)
		if string(raw) != string(want) {
			t.Fatalf("raw record %s, want the returned record %s", raw, want)
		}
		return rec, lock.lease.ResourceVersion
	}

	rec, rv := get()
	if rec.HolderIdentity != "a" || rec.LeaseDurationSeconds != 10 || rec.LeaderTransitions != 4 {
		t.Fatalf("unseen version: %+v, want it unmodified", rec)
	}
	live, err := srv.cs.CoordinationV1().Leases(testNS).Get(ctx, testName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seenAt := clock
	obs.observe(live)
	clock = clock.Add(time.Second) // seen again later: the first sighting counts
	obs.observe(live)

	// Validity the elector derives (it stamps its observation after Get, at
	// or after clock) is never earlier than seenAt + 10s.
	for elapsed := time.Duration(0); elapsed < 12*time.Second; elapsed += 137 * time.Millisecond {
		clock = seenAt.Add(elapsed)
		rec, _ := get()
		if rec.LeaseDurationSeconds < 0 {
			t.Fatalf("after %s: negative duration %d", elapsed, rec.LeaseDurationSeconds)
		}
		if elapsed < 10*time.Second {
			if rec.HolderIdentity != "a" {
				t.Fatalf("after %s: holder %q, want a (the Lease is valid)", elapsed, rec.HolderIdentity)
			}
			if end := clock.Add(time.Duration(rec.LeaseDurationSeconds) * time.Second); end.Before(seenAt.Add(10 * time.Second)) {
				t.Fatalf("after %s: duration %ds ends the Lease %s early", elapsed, rec.LeaseDurationSeconds, seenAt.Add(10*time.Second).Sub(end))
			}
			if rec.LeaseDurationSeconds > 10 {
				t.Fatalf("after %s: duration %ds, more than the Lease's 10s", elapsed, rec.LeaseDurationSeconds)
			}
		} else if rec.HolderIdentity != "" || rec.LeaseDurationSeconds != 0 {
			t.Fatalf("after %s: %+v, want no holder and duration 0 (expired)", elapsed, rec)
		}
		if rec.LeaderTransitions != 4 {
			t.Fatalf("after %s: transitions %d, want 4 as read", elapsed, rec.LeaderTransitions)
		}
	}
	for _, tc := range []struct {
		elapsed time.Duration
		want    int
	}{{0, 10}, {time.Nanosecond, 10}, {3 * time.Second, 7}, {3200 * time.Millisecond, 7}, {9999 * time.Millisecond, 1}} {
		clock = seenAt.Add(tc.elapsed)
		if rec, _ := get(); rec.LeaseDurationSeconds != tc.want {
			t.Errorf("after %s: duration %d, want %d", tc.elapsed, rec.LeaseDurationSeconds, tc.want)
		}
	}

	// The adjusted record is not what gets written: an Update writes the
	// caller's record at the version read.
	clock = seenAt.Add(time.Minute)
	if rec, _ = get(); rec.HolderIdentity != "" {
		t.Fatalf("expired Lease reported held by %q", rec.HolderIdentity)
	}
	lock.startRound()
	mine := resourcelock.LeaderElectionRecord{HolderIdentity: "b", LeaseDurationSeconds: 15, LeaderTransitions: 5,
		AcquireTime: metav1.NewTime(time.Now()), RenewTime: metav1.NewTime(time.Now())}
	if err := lock.Update(ctx, mine); err != nil {
		t.Fatal(err)
	}
	live, err = srv.cs.CoordinationV1().Leases(testNS).Get(ctx, testName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(live.Spec.HolderIdentity, "") != "b" || ptr.Deref(live.Spec.LeaseDurationSeconds, 0) != 15 || ptr.Deref(live.Spec.LeaseTransitions, 0) != 5 {
		t.Fatalf("written Lease %+v, want the caller's record", live.Spec)
	}
	if live.ResourceVersion == rv {
		t.Fatal("the Update did not change the resourceVersion")
	}

	// Our own Lease, even at a seen version long expired, is not adjusted.
	obs.observe(live)
	clock = clock.Add(time.Hour)
	if rec, _ := get(); rec.HolderIdentity != "b" || rec.LeaseDurationSeconds != 15 {
		t.Fatalf("own Lease: %+v, want it unmodified", rec)
	}

	// Another holder's write the watch has not seen yet: unmodified.
	other := live.DeepCopy()
	other.Spec.HolderIdentity = ptr.To("c")
	if _, err := srv.cs.CoordinationV1().Leases(testNS).Update(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if rec, _ := get(); rec.HolderIdentity != "c" || rec.LeaseDurationSeconds != 15 {
		t.Fatalf("version not seen by the watch: %+v, want it unmodified", rec)
	}

	// Without resourceVersions (nothing to compare) nothing is adjusted.
	obs.observe(&coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("c")}})
	r := &resourcelock.LeaderElectionRecord{HolderIdentity: "c", LeaseDurationSeconds: 15}
	if got := obs.adjust(r, ""); got != r {
		t.Fatalf("record without a resourceVersion adjusted: %+v", got)
	}
}

// The observer schedules one expiry per version held by another replica:
// a new version moves it, our own or a released Lease has none.
func TestObserverExpiry(t *testing.T) {
	obs := newObserver("self")
	clock := time.Now()
	obs.now = func() time.Time { return clock }
	held := func(rv, holder string, seconds int32) *coordinationv1.Lease {
		l := heldLease(rv, holder, seconds)
		if holder == "" {
			l.Spec.HolderIdentity = nil
		}
		return l
	}
	if _, ok := obs.expiry(); ok {
		t.Fatal("expiry without an observation")
	}
	obs.observe(held("1", "a", 5))
	if d, ok := obs.expiry(); !ok || !d.Equal(clock.Add(5*time.Second)) {
		t.Fatalf("expiry = %v %v, want seen + 5s", d, ok)
	}
	if obs.fire() {
		t.Fatal("fired before the expiry")
	}
	clock = clock.Add(3 * time.Second)
	obs.observe(held("2", "a", 5)) // a renewal moves the expiry
	if d, ok := obs.expiry(); !ok || !d.Equal(clock.Add(5*time.Second)) {
		t.Fatalf("after a renewal expiry = %v %v, want renewal seen + 5s", d, ok)
	}
	clock = clock.Add(5 * time.Second)
	if !obs.fire() {
		t.Fatal("did not fire at the expiry")
	}
	if obs.fire() {
		t.Fatal("fired twice for one version")
	}
	if _, ok := obs.expiry(); ok {
		t.Fatal("expiry still scheduled after it fired")
	}
	obs.observe(held("2", "a", 5)) // the same version again: still fired
	if _, ok := obs.expiry(); ok {
		t.Fatal("expiry rescheduled for a version already fired")
	}
	for _, l := range []*coordinationv1.Lease{held("3", "self", 5), held("4", "", 5), held("", "a", 5)} {
		obs.observe(l)
		clock = clock.Add(time.Minute)
		if _, ok := obs.expiry(); ok || obs.fire() {
			t.Fatalf("expiry scheduled for %s held by %q", l.ResourceVersion, ptr.Deref(l.Spec.HolderIdentity, ""))
		}
	}
	obs.observe(held("5", "a", 5))
	obs.forget()
	if _, ok := obs.expiry(); ok {
		t.Fatal("expiry scheduled after the Lease was deleted")
	}
}

// expireLease signals once the version seen last has gone unrenewed for its
// duration, not earlier, and stops with its context.
func TestExpireLeaseSignals(t *testing.T) {
	e, err := New(Config{Client: fake.NewClientset(), Namespace: testNS, Name: testName, Identity: "b",
		LeaseDuration: slow.lease, RenewDeadline: slow.renew, RetryPeriod: slow.retry})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	wake := make(chan wakeReason, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.expireLease(ctx, wake)
	}()
	defer func() { cancel(); <-done }()

	e.obs.observe(heldLease("1", "a", 3600))
	e.obs.observe(heldLease("2", "a", 1)) // a renewal with a shorter lease moves the expiry

	seen := time.Now()
	select {
	case why := <-wake:
		if d := time.Since(seen); why != wakeExpired || d < 900*time.Millisecond {
			t.Fatalf("signalled %v %s after the last renewal was seen, want wakeExpired after 1s", why, d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no expiry signalled within 10s of a 1s Lease")
	}
}

// A leader that crashed (it stops renewing and does not release) is taken
// over about one lease duration after its last renewal, however long the
// retry period: client-go's polling alone (every 2–4.4 s here) takes up to
// lease + 2 × 4.4 s. The crashed leader stops leading (renew deadline)
// before the follower leads, and the follower writes its own record.
func TestCrashedLeaderTakenOverAtLeaseExpiry(t *testing.T) {
	srv := newAPIServer()
	watching := watches(srv.cs, nil)
	tm := timings{lease: 3 * time.Second, renew: 2500 * time.Millisecond, retry: 2 * time.Second}
	a := start(t, srv.cs, "a", tm)
	waitFor(t, 10*time.Second, "a leads", a.e.IsLeader)
	recv(t, watching, "a's watch")
	b := start(t, srv.cs, "b", tm)
	recv(t, watching, "b's watch")
	// A renewal b's watch sees.
	_, n := srv.lastWrite("a")
	waitFor(t, 3*tm.retry, "a renews", func() bool { _, m := srv.lastWrite("a"); return m > n })

	srv.crash("a")
	waitFor(t, tm.lease+3*tm.retry, "b leads", func() bool {
		if a.e.IsLeader() && b.e.IsLeader() {
			t.Fatal("a and b lead at once")
		}
		return b.e.IsLeader()
	})
	led := time.Now()
	last, _ := srv.lastWrite("a")
	took := led.Sub(last.end)
	t.Logf("b led %s after a's last renewal (lease %s, retry %s)", took.Round(time.Millisecond), tm.lease, tm.retry)
	if led.Before(last.start.Add(tm.lease)) {
		t.Fatalf("b led %s after a's last renewal began, before the Lease (%s) expired", led.Sub(last.start), tm.lease)
	}
	if took > tm.lease+500*time.Millisecond {
		t.Fatalf("b led %s after a's last renewal, want within the lease duration %s + 500ms", took, tm.lease)
	}
	if a.e.IsLeader() {
		t.Fatal("crashed a still reports leading")
	}
	l, err := srv.cs.CoordinationV1().Leases(testNS).Get(context.Background(), testName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(l.Spec.HolderIdentity, "") != "b" || ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != 3 || ptr.Deref(l.Spec.LeaseTransitions, 0) != 1 {
		t.Fatalf("Lease after the take-over: %+v, want b's own record (3s, transition 1)", l.Spec)
	}
	if got := count(t, b.e.cfg.Metrics.Expiries); got != 1 {
		t.Fatalf("b restarted %v campaigns on expiry, want 1", got)
	}
}

// A leader that keeps renewing is never taken over: a follower watching
// each renewal for several lease durations neither leads nor restarts a
// campaign.
func TestRenewingLeaderIsNotTakenOver(t *testing.T) {
	srv := newAPIServer()
	watching := watches(srv.cs, nil)
	tm := timings{lease: 2 * time.Second, renew: 1500 * time.Millisecond, retry: 300 * time.Millisecond}
	a := start(t, srv.cs, "a", tm)
	waitFor(t, 10*time.Second, "a leads", a.e.IsLeader)
	recv(t, watching, "a's watch")
	b := start(t, srv.cs, "b", tm)
	recv(t, watching, "b's watch")

	_, before := srv.lastWrite("a")
	versions := map[string]bool{}
	end := time.Now().Add(3 * tm.lease)
	for time.Now().Before(end) {
		if b.e.IsLeader() || !a.e.IsLeader() {
			t.Fatalf("leadership moved while a renews: a=%v b=%v", a.e.IsLeader(), b.e.IsLeader())
		}
		b.e.obs.mu.Lock()
		versions[b.e.obs.cur.rv] = true
		b.e.obs.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	_, after := srv.lastWrite("a")
	if after-before < 5 || len(versions) < 5 {
		t.Fatalf("a renewed %d times and b saw %d versions in %s; the test did not exercise renewals", after-before, len(versions), 3*tm.lease)
	}
	if got := holder(t, srv.cs); got != "a" {
		t.Fatalf("Lease held by %q, want a", got)
	}
	m := b.e.cfg.Metrics
	if x, r := count(t, m.Expiries), count(t, m.Interrupts); x != 0 || r != 0 || b.started.Load() != 0 {
		t.Fatalf("b: %v expiry and %v release campaigns, %d terms, want none", x, r, b.started.Load())
	}
}

// The watchdog's clock starts when the last successful write was sent, not
// when its answer came back: the API server stored it (and followers saw
// it) after the request was sent, so a slow answer cannot extend the term.
func TestRenewalCountsFromSend(t *testing.T) {
	srv := newAPIServer(heldLease("", "a", 10))
	const latency = 200 * time.Millisecond
	srv.cs.PrependReactor("update", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		time.Sleep(latency) // a slow API server
		return false, nil, nil
	})
	lock := newWatchedLock(srv.cs.CoordinationV1(), testNS, testName, "a", newObserver("a"))
	ctx := context.Background()
	if _, _, err := lock.Get(ctx); err != nil {
		t.Fatal(err)
	}
	lock.startRound()
	rec := resourcelock.LeaderElectionRecord{HolderIdentity: "a", LeaseDurationSeconds: 10,
		AcquireTime: metav1.NewTime(time.Now()), RenewTime: metav1.NewTime(time.Now())}
	if err := lock.Update(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if since := lock.sinceRenew(); since < latency {
		t.Fatalf("sinceRenew = %s right after a write that took %s, want it counted from the send", since, latency)
	}
}
