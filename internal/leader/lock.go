package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// errInterrupted is returned by the writes of a round whose campaign was
// interrupted: the round's elector must not acquire after that.
var errInterrupted = errors.New("leader: campaign interrupted to start afresh")

// watchedLock is the Lease lock of the client-go elector (what
// resourcelock.LeaseLock does, plus the following).
//
// It records when the last successful write of the Lease (acquiring or
// renewing) was sent, for the watchdog, and makes interrupting a campaign atomic with
// respect to acquiring: a round is interrupted only if this replica has not
// written the Lease in it, and after an interruption no write of the round
// reaches the API server.
//
// Get reports a Lease held by another replica with the validity left from
// when the watch first saw that very version (see observer.adjust), so a
// fresh elector does not wait a whole lease duration from its own first
// read. The adjusted record is only what the elector judges by: Update and
// Create write the record the elector builds, on top of the Lease as the
// API server returned it, at that Lease's resourceVersion.
type watchedLock struct {
	client   coordinationv1client.LeasesGetter
	meta     metav1.ObjectMeta // namespace and name of the Lease
	identity string
	obs      *observer

	// renewed is when the last successful write was sent (monotonic
	// nanoseconds since epoch): the API server stored it after that, so a
	// follower's watch saw it after that too.
	renewed atomic.Int64

	// mu is held across each write of the Lease and by interrupt.
	mu          sync.Mutex
	lease       *coordinationv1.Lease // as last read or written; guarded by mu
	wrote       bool                  // a write succeeded in this round
	interrupted bool                  // the round's campaign was interrupted
}

var _ resourcelock.Interface = (*watchedLock)(nil)

func newWatchedLock(client coordinationv1client.LeasesGetter, namespace, name, identity string, obs *observer) *watchedLock {
	return &watchedLock{client: client, meta: metav1.ObjectMeta{Namespace: namespace, Name: name}, identity: identity, obs: obs}
}

// startRound resets the per-round state before a new client-go elector runs.
func (l *watchedLock) startRound() {
	l.mu.Lock()
	l.wrote, l.interrupted = false, false
	l.mu.Unlock()
}

// interrupt marks the round interrupted and reports true, unless this
// replica already wrote the Lease in the round (it acquired it), in which
// case it reports false and changes nothing. A write in progress finishes
// first.
func (l *watchedLock) interrupt() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.wrote {
		return false
	}
	l.interrupted = true
	return true
}

// acquired reports whether a write of the Lease succeeded in this round.
func (l *watchedLock) acquired() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.wrote
}

// Get reads the Lease and returns its record, adjusted by what the watch
// observed, and the JSON of that adjusted record (client-go compares it
// with the previous one to tell whether the record changed).
func (l *watchedLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	lease, err := l.client.Leases(l.meta.Namespace).Get(ctx, l.meta.Name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	l.mu.Lock()
	l.lease = lease
	l.mu.Unlock()
	rec := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	if l.obs != nil {
		rec = l.obs.adjust(rec, lease.ResourceVersion)
	}
	raw, err := json.Marshal(*rec)
	if err != nil {
		return nil, nil, err
	}
	return rec, raw, nil
}

// Create creates the Lease with the record.
func (l *watchedLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, func() (*coordinationv1.Lease, error) {
		return l.client.Leases(l.meta.Namespace).Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: l.meta.Namespace, Name: l.meta.Name},
			Spec:       resourcelock.LeaderElectionRecordToLeaseSpec(&r),
		}, metav1.CreateOptions{})
	})
}

// Update writes the record over the Lease last read or written, at its
// resourceVersion.
func (l *watchedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, func() (*coordinationv1.Lease, error) {
		if l.lease == nil {
			return nil, errors.New("leader: lease not read yet, call Get or Create first")
		}
		lease := l.lease.DeepCopy()
		lease.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&r)
		return l.client.Leases(l.meta.Namespace).Update(ctx, lease, metav1.UpdateOptions{})
	})
}

// write runs do with mu held, unless the round was interrupted.
func (l *watchedLock) write(ctx context.Context, do func() (*coordinationv1.Lease, error)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.interrupted {
		return errInterrupted
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	sent := time.Since(epoch)
	lease, err := do()
	if err != nil {
		return err
	}
	l.lease = lease
	l.wrote = true
	l.renewed.Store(int64(sent))
	return nil
}

// RecordEvent records no events.
func (l *watchedLock) RecordEvent(string) {}

// Identity is this replica's holder identity.
func (l *watchedLock) Identity() string { return l.identity }

// Describe names the Lease.
func (l *watchedLock) Describe() string {
	return fmt.Sprintf("%s/%s", l.meta.Namespace, l.meta.Name)
}

// epoch is the reference of renewed, read on the monotonic clock.
var epoch = time.Now()

// sinceRenew is the time since the last successful write of the Lease was
// sent (or since the process started when there was none).
func (l *watchedLock) sinceRenew() time.Duration {
	return time.Since(epoch) - time.Duration(l.renewed.Load())
}
