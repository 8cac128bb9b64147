package leader

import (
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// observer remembers the version of the Lease the watch saw last and when,
// on this process's monotonic clock, it first saw that version. A Lease
// still at that resourceVersion when read later has not been written in
// between (every write changes the resourceVersion, and a resourceVersion
// never comes back), so its holder has not renewed it since at least then.
type observer struct {
	self string           // our identity: our own Lease is never adjusted
	now  func() time.Time // time.Now, replaced in tests

	mu  sync.Mutex
	cur observation // guarded by mu
	// changed gets a signal (one pending at most) whenever cur changes.
	changed chan struct{}
}

// observation is one version of the Lease as the watch saw it.
type observation struct {
	rv       string    // "" when there is none
	at       time.Time // when the watch first saw rv
	holder   string
	duration time.Duration // the Lease's own leaseDurationSeconds
	fired    bool          // its expiry was signalled
}

func newObserver(self string) *observer {
	return &observer{self: self, now: time.Now, changed: make(chan struct{}, 1)}
}

// observe records a version of the Lease seen by the watch. A version seen
// before keeps the time it was first seen. A Lease without a
// resourceVersion is ignored.
func (o *observer) observe(l *coordinationv1.Lease) {
	if l.ResourceVersion == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if l.ResourceVersion == o.cur.rv {
		return
	}
	o.cur = observation{rv: l.ResourceVersion, at: o.now()}
	if l.Spec.HolderIdentity != nil {
		o.cur.holder = *l.Spec.HolderIdentity
	}
	if l.Spec.LeaseDurationSeconds != nil {
		o.cur.duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	o.notify()
}

// forget drops the observation (the Lease was deleted).
func (o *observer) forget() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cur = observation{}
	o.notify()
}

func (o *observer) notify() {
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// held reports whether the observation is a Lease held by another replica.
func (c *observation) held(self string) bool {
	return c.rv != "" && c.holder != "" && c.holder != self
}

// expiry returns when the observed Lease, held by another replica, expires
// if it is not renewed, unless that expiry was already signalled.
func (o *observer) expiry() (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.cur.held(o.self) || o.cur.fired {
		return time.Time{}, false
	}
	return o.cur.at.Add(o.cur.duration), true
}

// fire marks the observed Lease's expiry signalled and reports true if it
// is held by another replica, has expired and was not signalled before.
func (o *observer) fire() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.cur.held(o.self) || o.cur.fired || o.now().Sub(o.cur.at) < o.cur.duration {
		return false
	}
	o.cur.fired = true
	return true
}

// adjust returns the record of the Lease read at resourceVersion rv as
// client-go's elector should judge it. A fresh elector treats a held Lease
// as valid for its whole lease duration from its own first read; when the
// watch saw this very version at time T, the Lease has already gone
// unrenewed since T, so:
//   - while T + duration is ahead, leaseDurationSeconds becomes what remains
//     of it, rounded up to whole seconds (the elector then considers the
//     Lease valid until at least T + duration, never earlier);
//   - once T + duration has passed, the record is reported without a holder,
//     so the elector tries to acquire at once. (A duration of 0 would not do:
//     the elector stamps its observation after the read and compares it
//     with a time taken before, so the Lease would still look valid for the
//     attempt.)
//
// Acquiring is still an Update at rv, which fails if anyone wrote the Lease
// since. Any other record — a version the watch has not seen, a released
// Lease, our own — is returned unchanged, so client-go's rule applies.
func (o *observer) adjust(rec *resourcelock.LeaderElectionRecord, rv string) *resourcelock.LeaderElectionRecord {
	if rv == "" || rec.HolderIdentity == "" || rec.HolderIdentity == o.self {
		return rec
	}
	o.mu.Lock()
	seen, at := o.cur.rv == rv, o.cur.at
	o.mu.Unlock()
	if !seen {
		return rec
	}
	remaining := time.Duration(rec.LeaseDurationSeconds)*time.Second - o.now().Sub(at)
	out := *rec
	if remaining <= 0 {
		out.HolderIdentity = ""
		out.LeaseDurationSeconds = 0
		return &out
	}
	out.LeaseDurationSeconds = int((remaining + time.Second - 1) / time.Second)
	return &out
}

// expireLease signals wakeExpired on wake (without blocking; one pending
// signal is kept) when the Lease version last seen by the watch, held by
// another replica, has gone unrenewed for its lease duration — once per
// version. It returns when ctx is done.
func (e *Elector) expireLease(ctx context.Context, wake chan<- wakeReason) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		if deadline, ok := e.obs.expiry(); ok {
			t.Reset(max(time.Until(deadline), 0))
		} else {
			t.Stop()
		}
		select {
		case <-ctx.Done():
			return
		case <-e.obs.changed:
		case <-t.C:
			if e.obs.fire() {
				signal(wake, wakeExpired)
			}
		}
	}
}
