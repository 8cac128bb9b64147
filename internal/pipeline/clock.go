package pipeline

import "time"

// loopClock is the time source of Run's batching: real time in
// production, a fake one in tests.
type loopClock interface {
	Now() time.Time
	// NewTimer returns a stopped timer.
	NewTimer() loopTimer
}

// loopTimer is a one-shot timer.
type loopTimer interface {
	C() <-chan time.Time
	// Reset arms the timer to fire once after d.
	Reset(d time.Duration)
	Stop()
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer() loopTimer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return realTimer{t}
}

// realTimer relies on the timer semantics of Go 1.23 and later: after
// Reset or Stop no stale value is received from C.
type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time   { return r.t.C }
func (r realTimer) Reset(d time.Duration) { r.t.Reset(d) }
func (r realTimer) Stop()                 { r.t.Stop() }
