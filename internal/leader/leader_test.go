package leader

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testNS   = "portico-system"
	testName = "portico-leader"
)

// slow timings: with a retry period of a minute (and client-go's jitter on
// top), a take-over within seconds can only come from the Lease watch.
var slow = timings{lease: 3 * time.Minute, renew: 2 * time.Minute, retry: time.Minute}

type timings struct{ lease, renew, retry time.Duration }

// running is an Elector started by start.
type running struct {
	e       *Elector
	cancel  context.CancelFunc
	done    chan error
	started atomic.Int32 // OnStartedLeading calls
	stopped atomic.Int32 // OnStoppedLeading calls
}

func start(t *testing.T, cs *fake.Clientset, id string, tm timings) *running {
	t.Helper()
	r := &running{done: make(chan error, 1)}
	e, err := New(Config{
		Client: cs, Namespace: testNS, Name: testName, Identity: id,
		LeaseDuration: tm.lease, RenewDeadline: tm.renew, RetryPeriod: tm.retry,
		OnStartedLeading: func(context.Context) { r.started.Add(1) },
		OnStoppedLeading: func() { r.stopped.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	r.e = e
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- e.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels Run and waits for it to return.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok && err != nil {
			t.Errorf("Run: %v", err)
		}
		if ok {
			close(r.done)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Run of %s did not return within 10s", r.e.Identity())
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

func holder(t *testing.T, cs *fake.Clientset) string {
	t.Helper()
	l, err := cs.CoordinationV1().Leases(testNS).Get(context.Background(), testName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(l.Spec.HolderIdentity, "")
}

// watches makes every watch of Leases signal on the returned channel once
// it is registered with the tracker (so events from then on reach it), or
// fail with err when err is not nil.
func watches(cs *fake.Clientset, err error) <-chan struct{} {
	ch := make(chan struct{}, 100)
	cs.PrependWatchReactor("leases", func(a clienttesting.Action) (bool, watch.Interface, error) {
		defer func() {
			select {
			case ch <- struct{}{}:
			default:
			}
		}()
		if err != nil {
			return true, nil, err
		}
		wa := a.(clienttesting.WatchActionImpl)
		w, werr := cs.Tracker().Watch(a.GetResource(), a.GetNamespace(), wa.ListOptions)
		return true, w, werr
	})
	return ch
}

// recv waits for one signal on ch, failing after 10s.
func recv(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out after 10s waiting for %s", what)
	}
}

// A follower takes a released Lease over at once, long before its retry
// period, because it watches the Lease.
func TestReleasedLeaseIsTakenOverAtOnce(t *testing.T) {
	cs := fake.NewClientset()
	watching := watches(cs, nil)
	a := start(t, cs, "a", slow)
	waitFor(t, 10*time.Second, "a leads", a.e.IsLeader)
	recv(t, watching, "a's watch")
	b := start(t, cs, "b", slow)
	recv(t, watching, "b's watch") // it sees the release
	if b.e.IsLeader() {
		t.Fatal("b leads while a holds the Lease")
	}

	a.stop(t)
	if got := holder(t, cs); got != "" && got != "b" {
		t.Fatalf("after a stopped the Lease is held by %q, want released or b", got)
	}
	if a.e.IsLeader() || a.started.Load() != 1 || a.stopped.Load() != 1 {
		t.Fatalf("a: leader=%v started=%d stopped=%d, want false 1 1", a.e.IsLeader(), a.started.Load(), a.stopped.Load())
	}
	d := waitFor(t, 10*time.Second, "b leads after the release", b.e.IsLeader)
	t.Logf("b led %s after a released the Lease (retry period %s)", d.Round(time.Millisecond), slow.retry)
	if got := holder(t, cs); got != "b" {
		t.Fatalf("Lease held by %q, want b", got)
	}
	if b.started.Load() != 1 {
		t.Fatalf("b started %d terms, want 1", b.started.Load())
	}
}

// Without a working watch, election still works on the retry period.
func TestWatchFailureFallsBackToRetry(t *testing.T) {
	cs := fake.NewClientset()
	watching := watches(cs, errors.New("watch refused"))
	fast := timings{lease: 2 * time.Second, renew: time.Second, retry: 100 * time.Millisecond}
	a := start(t, cs, "a", fast)
	waitFor(t, 10*time.Second, "a leads", a.e.IsLeader)
	b := start(t, cs, "b", fast)
	recv(t, watching, "a watch attempt") // watches are refused
	a.stop(t)
	waitFor(t, 10*time.Second, "b leads after the release", b.e.IsLeader)
	if got := holder(t, cs); got != "b" {
		t.Fatalf("Lease held by %q, want b", got)
	}
}

// A deleted Lease is recreated by a follower at once.
func TestDeletedLeaseIsTakenOverAtOnce(t *testing.T) {
	cs := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: testName},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To("gone"),
			LeaseDurationSeconds: ptr.To[int32](180),
			RenewTime:            &metav1.MicroTime{Time: time.Now()},
			AcquireTime:          &metav1.MicroTime{Time: time.Now()},
		},
	})
	watching := watches(cs, nil)
	b := start(t, cs, "b", slow)
	recv(t, watching, "b's watch")
	if b.e.IsLeader() {
		t.Fatal("b leads while another holder's Lease is valid")
	}
	if err := cs.CoordinationV1().Leases(testNS).Delete(context.Background(), testName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "b leads after the Lease was deleted", b.e.IsLeader)
	if got := holder(t, cs); got != "b" {
		t.Fatalf("Lease held by %q, want b", got)
	}
}

// The watch signals a release only for the Lease seen without a holder or
// deleted, not for renewals, bookmarks or other Leases; an expired
// resourceVersion restarts from the current state, other errors fail.
func TestWatchSignalsReleases(t *testing.T) {
	cs := fake.NewClientset()
	fw := watch.NewFake() // unbuffered: a send returns once the previous event was handled
	var opts []metav1.ListOptions
	cs.PrependWatchReactor("leases", func(a clienttesting.Action) (bool, watch.Interface, error) {
		opts = append(opts, a.(clienttesting.WatchActionImpl).ListOptions)
		return true, fw, nil
	})
	e, err := New(Config{Client: cs, Namespace: testNS, Name: testName, Identity: "b",
		LeaseDuration: slow.lease, RenewDeadline: slow.renew, RetryPeriod: slow.retry})
	if err != nil {
		t.Fatal(err)
	}
	lease := func(name, rv, holder string) *coordinationv1.Lease {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, ResourceVersion: rv}}
		if holder != "" {
			l.Spec.HolderIdentity = ptr.To(holder)
		}
		return l
	}
	released := make(chan wakeReason, 1)
	type result struct {
		rv  string
		err error
	}
	run := func(rv string) chan result {
		done := make(chan result, 1)
		go func() {
			rv, err := e.watchOnce(context.Background(), rv, released)
			done <- result{rv, err}
		}()
		return done
	}
	signalled := func() bool {
		fw.Action(watch.Bookmark, lease(testName, "", "")) // the previous event was handled
		select {
		case why := <-released:
			if why != wakeReleased {
				t.Errorf("signalled %v, want wakeReleased", why)
			}
			return true
		default:
			return false
		}
	}

	done := run("")
	for _, tc := range []struct {
		what string
		typ  watch.EventType
		obj  *coordinationv1.Lease
		want bool
	}{
		{"the Lease held", watch.Added, lease(testName, "1", "a"), false},
		{"a renewal", watch.Modified, lease(testName, "2", "a"), false},
		{"another Lease released", watch.Modified, lease("other", "3", ""), false},
		{"the Lease released", watch.Modified, lease(testName, "4", ""), true},
		{"the Lease taken", watch.Modified, lease(testName, "5", "c"), false},
		{"the Lease deleted", watch.Deleted, lease(testName, "6", "c"), true},
	} {
		fw.Action(tc.typ, tc.obj)
		if got := signalled(); got != tc.want {
			t.Errorf("%s: signalled %v, want %v", tc.what, got, tc.want)
		}
		// The observer keeps the last version of our Lease seen, not
		// bookmarks or other Leases, and forgets a deleted Lease.
		e.obs.mu.Lock()
		got := e.obs.cur
		e.obs.mu.Unlock()
		want := map[string]string{"the Lease held": "1", "a renewal": "2", "another Lease released": "2",
			"the Lease released": "4", "the Lease taken": "5", "the Lease deleted": ""}[tc.what]
		if got.rv != want || (want == "5" && got.holder != "c") {
			t.Errorf("%s: observed version %q held by %q, want %q", tc.what, got.rv, got.holder, want)
		}
	}
	fw.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError, Message: "boom"})
	if r := <-done; r.err == nil || r.rv != "6" {
		t.Fatalf("after an error event: rv %q err %v, want rv 6 and an error", r.rv, r.err)
	}

	fw = watch.NewFake()
	done = run("6")
	fw.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old"})
	if r := <-done; r.err != nil || r.rv != "" {
		t.Fatalf("after an expired resourceVersion: rv %q err %v, want rv \"\" and no error", r.rv, r.err)
	}
	if len(opts) != 2 || opts[1].ResourceVersion != "6" || opts[0].ResourceVersion != "" ||
		opts[0].FieldSelector != "metadata.name="+testName || opts[0].TimeoutSeconds == nil {
		t.Fatalf("watch options %+v", opts)
	}

	fw = watch.NewFake()
	done = run("7")
	fw.Stop()
	if r := <-done; r.err != nil || r.rv != "7" {
		t.Fatalf("after the server closed the watch: rv %q err %v, want rv 7 and no error", r.rv, r.err)
	}
}

// interrupt is refused once the round wrote the Lease, and after an
// interrupt no write of the round reaches the API server.
func TestLockInterrupt(t *testing.T) {
	cs := fake.NewClientset()
	lock := newWatchedLock(cs.CoordinationV1(), testNS, testName, "a", newObserver("a"))
	ctx := context.Background()
	rec := resourcelock.LeaderElectionRecord{HolderIdentity: "a", LeaseDurationSeconds: 10,
		AcquireTime: metav1.NewTime(time.Now()), RenewTime: metav1.NewTime(time.Now())}

	lock.startRound()
	if !lock.interrupt() {
		t.Fatal("interrupt of a round without writes refused")
	}
	if err := lock.Create(ctx, rec); !errors.Is(err, errInterrupted) {
		t.Fatalf("Create after interrupt = %v, want errInterrupted", err)
	}
	if _, err := cs.CoordinationV1().Leases(testNS).Get(ctx, testName, metav1.GetOptions{}); err == nil {
		t.Fatal("the interrupted round created the Lease")
	}
	if lock.acquired() {
		t.Fatal("acquired after an interrupted round")
	}

	lock.startRound()
	if err := lock.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if !lock.acquired() {
		t.Fatal("not acquired after a successful Create")
	}
	if lock.interrupt() {
		t.Fatal("interrupt accepted after the round wrote the Lease")
	}
	if err := lock.Update(ctx, rec); err != nil {
		t.Fatalf("Update after a refused interrupt: %v", err)
	}
	if since := lock.sinceRenew(); since > time.Minute {
		t.Fatalf("sinceRenew = %s after a write", since)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := lock.Update(cctx, rec); !errors.Is(err, context.Canceled) {
		t.Fatalf("Update with a cancelled context = %v", err)
	}
}

// A term whose round already ended (client-go starts OnStartedLeading in a
// goroutine that may run late) does not start: no leadership, no callback,
// no watchdog.
func TestLateStartOfEndedTermIsIgnored(t *testing.T) {
	var started atomic.Int32
	e, err := New(Config{
		Client: fake.NewClientset(), Namespace: testNS, Name: testName, Identity: "a",
		LeaseDuration: slow.lease, RenewDeadline: slow.renew, RetryPeriod: slow.retry,
		OnStartedLeading: func(context.Context) { started.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	term, cancel := context.WithCancel(context.Background())
	cancel()
	var wg sync.WaitGroup
	e.stopTerm() // client-go ended the round first
	e.startTerm(term, &watchedLock{}, func() {}, &wg)
	wg.Wait()
	if e.IsLeader() || started.Load() != 0 {
		t.Fatalf("late start: leader=%v callbacks=%d, want false 0", e.IsLeader(), started.Load())
	}
}

func TestNewValidates(t *testing.T) {
	cs := fake.NewClientset()
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no client", Config{Namespace: testNS, Name: testName, LeaseDuration: 3, RenewDeadline: 2, RetryPeriod: 1}},
		{"no name", Config{Client: cs, Namespace: testNS, LeaseDuration: 3, RenewDeadline: 2, RetryPeriod: 1}},
		{"renew >= lease", Config{Client: cs, Namespace: testNS, Name: testName, LeaseDuration: 2, RenewDeadline: 2, RetryPeriod: 1}},
		{"retry >= renew", Config{Client: cs, Namespace: testNS, Name: testName, LeaseDuration: 3, RenewDeadline: 2, RetryPeriod: 2}},
		{"no retry", Config{Client: cs, Namespace: testNS, Name: testName, LeaseDuration: 3, RenewDeadline: 2}},
	} {
		if _, err := New(tc.cfg); err == nil {
			t.Errorf("%s: New accepted %+v", tc.name, tc.cfg)
		}
	}
	e, err := New(Config{Client: cs, Namespace: testNS, Name: testName, LeaseDuration: 3, RenewDeadline: 2, RetryPeriod: 1})
	if err != nil {
		t.Fatal(err)
	}
	if e.Identity() == "" || e.cfg.WatchClient == nil {
		t.Fatalf("defaults not applied: identity %q, watch client %v", e.Identity(), e.cfg.WatchClient)
	}
}
