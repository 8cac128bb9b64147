package pipeline

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// fakeClock is a manual clock for Run's batching. Its timer fires (once)
// when Advance reaches the time it was armed for.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	timer *fakeTimer
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer() loopTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timer = &fakeTimer{c: c, ch: make(chan time.Time, 1)}
	return c.timer
}

// Advance moves the clock by d and reports whether the timer fired.
func (c *fakeClock) Advance(d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	t := c.timer
	if t == nil || !t.armed || c.now.Before(t.at) {
		return false
	}
	t.armed = false
	t.ch <- c.now
	return true
}

// Armed reports whether the timer is armed, and for when.
func (c *fakeClock) Armed() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timer == nil || !c.timer.armed {
		return time.Time{}, false
	}
	return c.timer.at, true
}

type fakeTimer struct {
	c     *fakeClock
	ch    chan time.Time
	armed bool
	at    time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Reset(d time.Duration) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.drain()
	t.armed, t.at = true, t.c.now.Add(d)
}

func (t *fakeTimer) Stop() {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.drain()
	t.armed = false
}

// drain discards a value not received yet, as a Go 1.23 timer does on
// Reset and Stop.
func (t *fakeTimer) drain() {
	select {
	case <-t.ch:
	default:
	}
}

// stepper runs p on a fake clock and lets the test wait for each iteration
// of the loop, so that every Submit and timer tick is handled before the
// test goes on: the schedule is deterministic.
type stepper struct {
	p     *Pipeline
	clock *fakeClock
	steps chan struct{}
	f     *fake

	mu     sync.Mutex
	starts []translation // every Gateway API translation, in order
}

// translation is when a translation started (fake time) and the
// generation of the snapshot it translated.
type translation struct {
	at  time.Time
	gen int64
}

// newStepper returns a started pipeline whose translations each take cost
// on the fake clock.
func newStepper(t *testing.T, cfg Config, cost time.Duration) *stepper {
	t.Helper()
	s := &stepper{clock: newFakeClock(), steps: make(chan struct{}, 1000)}
	if cfg.XDS == nil {
		cfg.XDS = nopXDS{}
	}
	s.p = New(cfg)
	s.p.clock = s.clock
	s.p.stepped = func() { s.steps <- struct{}{} }
	s.f = install(s.p)
	fakeTranslate := s.p.translateInputs
	s.p.translateInputs = func(snap *resource.Snapshot, opts gatewayapi.Options) *gatewayapi.Result {
		s.mu.Lock()
		s.starts = append(s.starts, translation{at: s.clock.Now(), gen: genOf(snap)})
		s.mu.Unlock()
		res := fakeTranslate(snap, opts)
		<-s.f.translated      // install's record; the stepper keeps its own
		s.clock.Advance(cost) // the timer is never armed during a translation
		return res
	}
	start(t, s.p)
	return s
}

// genOf is the generation of the snapshot's only Gateway.
func genOf(snap *resource.Snapshot) int64 {
	for _, gw := range snap.Gateways.All() {
		return gw.Generation
	}
	return 0
}

// step waits for the loop to finish handling one event.
func (s *stepper) step(t *testing.T) {
	t.Helper()
	select {
	case <-s.steps:
	case <-time.After(wait):
		t.Fatal("the loop did not handle the event within the deadline")
	}
}

// submit submits generation gen and waits until the loop handled it.
func (s *stepper) submit(t *testing.T, gen int64) {
	t.Helper()
	s.p.Submit(snapshot(gen, "default/gw"))
	s.step(t)
}

// advance moves the fake clock and waits for the translation the timer
// starts, if it fires.
func (s *stepper) advance(t *testing.T, d time.Duration) {
	t.Helper()
	if s.clock.Advance(d) {
		s.step(t)
	}
}

func (s *stepper) translations() []translation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]translation(nil), s.starts...)
}

type nopXDS struct{}

func (nopXDS) Update(context.Context, []*translate.Resources) error { return nil }

func TestIsolatedSubmitIsTranslatedAtOnce(t *testing.T) {
	// With the old quiet-period debounce this Debounce would hold every
	// translation for an hour of (fake) time.
	s := newStepper(t, Config{Debounce: time.Hour, MaxDelay: 2 * time.Hour}, 0)
	t0 := s.clock.Now()
	s.submit(t, 1)
	got := s.translations()
	if len(got) != 1 || got[0].gen != 1 || !got[0].at.Equal(t0) {
		t.Fatalf("translations = %+v, want generation 1 at once", got)
	}
	if _, armed := s.clock.Armed(); armed {
		t.Error("the loop waited for a timer before translating an isolated submit")
	}

	// A second submit falls in the pause after the first translation: it
	// waits for the end of the pause, not for a quiet period.
	s.submit(t, 2)
	at, armed := s.clock.Armed()
	if !armed || !at.Equal(t0.Add(time.Hour)) {
		t.Fatalf("timer armed=%v at %v, want the end of the pause %v", armed, at, t0.Add(time.Hour))
	}
	s.advance(t, time.Hour)
	if got := s.translations(); len(got) != 2 || got[1].gen != 2 || !got[1].at.Equal(t0.Add(time.Hour)) {
		t.Fatalf("translations = %+v, want generation 2 at the end of the pause", got)
	}

	// Idle for longer than the pause: the next submit is translated at once.
	s.clock.Advance(3 * time.Hour)
	t1 := s.clock.Now()
	s.submit(t, 3)
	if got := s.translations(); len(got) != 3 || got[2].gen != 3 || !got[2].at.Equal(t1) {
		t.Fatalf("translations = %+v, want generation 3 at once", got)
	}
}

func TestBurstIsCoalesced(t *testing.T) {
	s := newStepper(t, Config{Debounce: 100 * time.Millisecond}, 0)
	t0 := s.clock.Now()
	// The first submit of a burst is translated at once; the 49 that follow
	// during the pause give one translation, of the last, when it ends.
	for gen := int64(1); gen <= 50; gen++ {
		s.submit(t, gen)
	}
	s.advance(t, 100*time.Millisecond)
	want := []translation{{t0, 1}, {t0.Add(100 * time.Millisecond), 50}}
	if got := s.translations(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("translations = %v, want %v", got, want)
	}
	// Nothing is pending: the end of the next pause translates nothing.
	s.advance(t, time.Second)
	if got := s.translations(); len(got) != 2 {
		t.Errorf("%d translations, want 2", len(got))
	}
}

// TestStreamIsCoalescedAndBounded submits a new input every millisecond of
// fake time and checks that the translations are spaced by the pause (so
// far fewer than the submits), that the pause follows the translation's
// cost and is bounded by MaxDelay, and that every input is translated no
// later than the pause after it was submitted.
func TestStreamIsCoalescedAndBounded(t *testing.T) {
	for _, tc := range []struct {
		name               string
		debounce, maxDelay time.Duration
		cost, wantPause    time.Duration
	}{
		{"debounce", 20 * time.Millisecond, time.Second, 0, 20 * time.Millisecond},
		{"cost longer than debounce", 5 * time.Millisecond, time.Second, 40 * time.Millisecond, 40 * time.Millisecond},
		{"debounce capped by max delay", time.Hour, 50 * time.Millisecond, 0, 50 * time.Millisecond},
		{"cost capped by max delay", 20 * time.Millisecond, 30 * time.Millisecond, 100 * time.Millisecond, 30 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStepper(t, Config{Debounce: tc.debounce, MaxDelay: tc.maxDelay}, tc.cost)
			const n = 300
			submitted := make([]time.Time, n+1)
			for gen := int64(1); gen <= n; gen++ {
				submitted[gen] = s.clock.Now()
				s.submit(t, gen)
				s.advance(t, time.Millisecond)
			}
			for range tc.wantPause / time.Millisecond { // to the end of the last pause
				s.advance(t, time.Millisecond)
			}
			got := s.translations()

			if got[0].gen != 1 || !got[0].at.Equal(submitted[1]) {
				t.Errorf("first translation %+v, want generation 1 at once", got[0])
			}
			if last := got[len(got)-1]; last.gen != n {
				t.Errorf("last translation is of generation %d, want %d", last.gen, n)
			}
			// The stream's time goes by during the pauses; the translations'
			// cost is added to it.
			period := tc.cost + tc.wantPause
			if limit := int(time.Duration(n)*time.Millisecond/tc.wantPause) + 2; len(got) > limit {
				t.Errorf("%d translations for %d submits, want at most %d", len(got), n, limit)
			}
			for i := 1; i < len(got); i++ {
				if gap := got[i].at.Sub(got[i-1].at); gap < period || gap > period+time.Millisecond {
					t.Errorf("translations %d and %d are %v apart, want %v (cost + pause)", i-1, i, gap, period)
				}
			}
			// Every input is translated within the pause after its submit
			// (submits arrive during pauses here), so within MaxDelay.
			next := 0
			for gen := int64(1); gen <= n; gen++ {
				for next < len(got) && got[next].gen < gen {
					next++
				}
				if next == len(got) {
					t.Fatalf("generation %d never translated", gen)
				}
				if waited := got[next].at.Sub(submitted[gen]); waited > tc.wantPause || waited > tc.maxDelay {
					t.Fatalf("generation %d waited %v, want at most %v", gen, waited, tc.wantPause)
				}
			}
		})
	}
}
