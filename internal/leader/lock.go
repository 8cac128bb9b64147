package leader

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// errInterrupted is returned by the writes of a round whose campaign was
// interrupted: the round's elector must not acquire after that.
var errInterrupted = errors.New("leader: campaign interrupted to start afresh")

// watchedLock wraps the Lease lock of the client-go elector. It records
// when the Lease was last written successfully (acquired or renewed), for
// the watchdog, and makes interrupting a campaign atomic with respect to
// acquiring: a round is interrupted only if this replica has not written
// the Lease in it, and after an interruption no write of the round reaches
// the API server.
type watchedLock struct {
	resourcelock.Interface
	renewed atomic.Int64 // unix nanoseconds of the last successful write

	// mu is held across each write of the Lease and by interrupt.
	mu          sync.Mutex
	wrote       bool // a write succeeded in this round
	interrupted bool // the round's campaign was interrupted
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

func (l *watchedLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, func() error { return l.Interface.Create(ctx, r) })
}

func (l *watchedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.write(ctx, func() error { return l.Interface.Update(ctx, r) })
}

func (l *watchedLock) write(ctx context.Context, do func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.interrupted {
		return errInterrupted
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := do(); err != nil {
		return err
	}
	l.wrote = true
	l.renewed.Store(time.Now().UnixNano())
	return nil
}

func (l *watchedLock) sinceRenew() time.Duration {
	return time.Since(time.Unix(0, l.renewed.Load()))
}
