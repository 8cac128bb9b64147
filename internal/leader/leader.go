// Package leader runs leader election on a coordination.k8s.io Lease.
//
// Unlike controller-runtime's manager, losing the Lease does not end the
// process: the term's context is cancelled (so the writers it gates stop
// within the renew deadline) and the elector campaigns again. Everything
// that does not write — watching, translating, serving xDS — runs on every
// replica regardless of leadership.
//
// The Lease is the only arbiter: a replica leads only after its own write
// of the Lease succeeded (optimistic concurrency on the Lease's
// resourceVersion), so two replicas never lead at once. A term ends when
// client-go's elector fails to renew within the renew deadline, or earlier
// when a watchdog sees that the last successful renewal was sent more than
// the renew deadline ago (a hung renewal cannot keep a leader writing). On Run's
// return the Lease is released (holder cleared) when this replica held it.
//
// Prompt hand-over: besides campaigning every retry period, each replica
// watches its Lease (one watch on a single object, field selector
// metadata.name). When a follower sees the Lease released (no holder) or
// deleted, it starts a fresh campaign at once instead of waiting for its
// next retry, so a graceful hand-over takes one watch event plus one Get and
// one Update of the Lease. The watch needs the watch verb on the Lease
// (RBAC can grant it by resourceNames, since the request names the Lease in
// its field selector).
//
// Prompt take-over from a crashed leader: client-go's elector alone judges
// a held Lease valid for its lease duration from the last poll (every retry
// period, plus up to 120% jitter) that saw the record change, and notices
// the expiry only at a later poll, so a crashed leader was replaced up to
// lease duration + 2 × 2.2 retry periods after its last renewal. Instead,
// the watch records, for each resourceVersion of the Lease, when it first
// saw it on this process's monotonic clock. When the version held by
// another replica has stayed unchanged for the lease duration written in
// it, the follower starts a fresh campaign at once, and the lock's Get
// reports a Lease still at that version with only the validity left from
// that time (rounded up to whole seconds; reported without a holder once
// none is left), so the fresh elector acquires on its first attempt. A
// crashed leader is thus replaced about one lease duration after its last
// renewal, whatever the retry period.
//
// Safety: a follower shortens a Lease's validity only by time it has itself
// measured, on its own monotonic clock, during which the very same version
// of the Lease stayed unchanged — a Lease read at the resourceVersion the
// watch saw at time T was not written between T and the read. This is the
// trust model of client-go (durations measured locally, no comparison of
// clocks across nodes): the holder stops writing within its renew deadline
// (plus the watchdog's tick of at most 100 ms) of sending its last
// successful renewal — before the API server stored it, hence before any
// follower saw it — and a follower takes over no earlier than the lease
// duration after it saw that renewal, so lease duration − renew deadline is
// the margin left for clock rates. A version the watch has not seen
// (it lags, or failed) is judged by client-go's own rule, and acquiring is
// still an Update at the resourceVersion read, which fails if anyone wrote
// the Lease meanwhile. The adjusted record is never written: the elector
// writes its own record.
//
// If the watch fails, it is retried with backoff and election keeps working
// on the retry period alone (a released or expired Lease is then taken over
// at a later poll).
package leader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
)

// Config configures an Elector.
type Config struct {
	// Client reads and writes the Lease. Give it a request timeout (at most
	// the renew deadline) so a hung API server cannot hold a renewal.
	Client kubernetes.Interface
	// WatchClient watches the Lease for releases (default Client). Its
	// requests should not time out: a client timeout ends every watch
	// early (it is then re-established, costing one request each time).
	WatchClient kubernetes.Interface
	Namespace   string
	Name        string // the Lease name (--leader-election-id)
	// Identity defaults to DefaultIdentity().
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// OnStartedLeading is called at the start of each term with a context
	// that is cancelled when the term ends. It must not block.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading is called when a term ends. It must not block.
	OnStoppedLeading func()
	Metrics          *Metrics
	Log              *slog.Logger
}

// Elector campaigns for the Lease until its context ends.
type Elector struct {
	cfg     Config
	obs     *observer   // what the Lease watch saw, and when
	leading atomic.Bool // IsLeader
	// mu orders the start and the end of a term: client-go starts a term
	// in a goroutine of its own, which may run after the round has ended.
	mu     sync.Mutex
	inTerm bool // between OnStartedLeading and OnStoppedLeading; guarded by mu
}

// DefaultIdentity is the pod (host) name plus a random suffix, so two
// processes on one host, or a restarted process, never share an identity.
func DefaultIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "portico"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "_" + hex.EncodeToString(b)
}

// New validates cfg and returns an Elector.
func New(cfg Config) (*Elector, error) {
	if cfg.Client == nil || cfg.Namespace == "" || cfg.Name == "" {
		return nil, fmt.Errorf("leader: client, namespace and lease name are required")
	}
	if cfg.WatchClient == nil {
		cfg.WatchClient = cfg.Client
	}
	if cfg.Identity == "" {
		cfg.Identity = DefaultIdentity()
	}
	if cfg.LeaseDuration <= cfg.RenewDeadline || cfg.RenewDeadline <= cfg.RetryPeriod || cfg.RetryPeriod <= 0 {
		return nil, fmt.Errorf("leader: need lease-duration (%s) > renew-deadline (%s) > retry-period (%s) > 0",
			cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod)
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	return &Elector{cfg: cfg, obs: newObserver(cfg.Identity)}, nil
}

// Identity is this replica's holder identity.
func (e *Elector) Identity() string { return e.cfg.Identity }

// IsLeader reports whether this replica holds the Lease now.
func (e *Elector) IsLeader() bool { return e.leading.Load() }

// Run campaigns, leads, and after losing the Lease campaigns again, until
// ctx is done. On return the Lease is released if this replica held it, so
// that a successor takes over at once, and every goroutine Run started has
// ended.
func (e *Elector) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()

	lock := newWatchedLock(e.cfg.Client.CoordinationV1(), e.cfg.Namespace, e.cfg.Name, e.cfg.Identity, e.obs)
	wake := make(chan wakeReason, 1)
	wg.Add(2)
	go func() {
		defer wg.Done()
		e.watchLease(ctx, wake)
	}()
	go func() {
		defer wg.Done()
		e.expireLease(ctx, wake)
	}()

	for ctx.Err() == nil {
		interrupted, err := e.round(ctx, lock, wake, &wg)
		if err != nil {
			return err
		}
		switch {
		case ctx.Err() != nil:
		case interrupted == wakeReleased:
			e.cfg.Metrics.Interrupts.Inc()
			e.cfg.Log.Debug("lease released; campaigning at once", "identity", e.cfg.Identity)
		case interrupted == wakeExpired:
			e.cfg.Metrics.Expiries.Inc()
			e.cfg.Log.Info("lease not renewed for its duration; campaigning at once", "identity", e.cfg.Identity)
		default:
			e.cfg.Log.Warn("lost the lease; campaigning again", "identity", e.cfg.Identity)
			// A short pause so a flapping API server does not spin us.
			select {
			case <-ctx.Done():
			case <-time.After(e.cfg.RetryPeriod):
			}
		}
	}
	return nil
}

// wakeReason is why a campaign is restarted at once.
type wakeReason int

const (
	wakeNone     wakeReason = iota
	wakeReleased            // the Lease was seen released or deleted
	wakeExpired             // the Lease was seen unrenewed for its duration
)

// signal sends why on wake without blocking (one pending signal is kept).
func signal(wake chan<- wakeReason, why wakeReason) {
	select {
	case wake <- why:
	default:
	}
}

// round runs one client-go LeaderElector: it campaigns (its first attempt is
// immediate), leads until the term ends, then releases the Lease. A signal
// on wake (the Lease released, or expired) while this replica has not
// written the Lease in this round interrupts the campaign (interrupted is
// the signal's reason, else wakeNone), so the caller starts a fresh one at
// once. Goroutines that outlive the round (the term's watchdog) are added
// to wg.
func (e *Elector) round(ctx context.Context, lock *watchedLock, wake <-chan wakeReason, wg *sync.WaitGroup) (interrupted wakeReason, err error) {
	// A round ends when client-go's elector returns, when our watchdog ends
	// the term first, or when a release or expiry interrupts the campaign.
	round, endRound := context.WithCancel(ctx)
	defer endRound()
	lock.startRound()
	// A release or expiry seen before now is seen by the round's first
	// attempt.
	select {
	case <-wake:
	default:
	}
	termCalled := make(chan struct{}) // closed once OnStartedLeading ran
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   e.cfg.LeaseDuration,
		RenewDeadline:   e.cfg.RenewDeadline,
		RetryPeriod:     e.cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            e.cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(term context.Context) {
				defer close(termCalled)
				e.startTerm(term, lock, endRound, wg)
			},
			OnStoppedLeading: e.stopTerm,
			OnNewLeader: func(id string) {
				if id != e.cfg.Identity && id != "" {
					e.cfg.Log.Info("leader is", "identity", id)
				}
			},
		},
	})
	if err != nil {
		return wakeNone, err
	}

	var interrupt atomic.Int32 // a wakeReason
	watcherDone := make(chan struct{})
	go func() {
		defer close(watcherDone)
		select {
		case <-round.Done():
		case why := <-wake:
			// Only a campaign is interrupted: once this replica wrote the
			// Lease in this round (it leads, or is about to), it is not.
			if lock.interrupt() {
				interrupt.Store(int32(why))
				endRound()
			}
		}
	}()
	// Run returns when the term ends (or the round is cancelled); the
	// term's context has been cancelled and the Lease released by then.
	le.Run(round)
	endRound()
	<-watcherDone
	if lock.acquired() {
		// Acquiring made client-go start OnStartedLeading in a goroutine:
		// wait for it, so it cannot run after Run returned.
		<-termCalled
	}
	return wakeReason(interrupt.Load()), nil
}

// startTerm is OnStartedLeading: unless the round already ended, it starts
// the watchdog and the caller's term.
func (e *Elector) startTerm(term context.Context, lock *watchedLock, endRound context.CancelFunc, wg *sync.WaitGroup) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if term.Err() != nil {
		return // the round ended before the term could start
	}
	// The term also ends when the Lease was not renewed for RenewDeadline,
	// even while client-go is still waiting on a hung renewal: writes stop
	// in time.
	term, stop := context.WithCancel(term)
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.watchdog(term, func() { stop(); endRound() }, lock)
	}()
	e.inTerm = true
	e.leading.Store(true)
	e.cfg.Metrics.Leader.Set(1)
	e.cfg.Metrics.Transitions.Inc()
	e.cfg.Log.Info("became leader", "identity", e.cfg.Identity, "lease", e.cfg.Namespace+"/"+e.cfg.Name)
	if e.cfg.OnStartedLeading != nil {
		e.cfg.OnStartedLeading(term)
	}
}

// stopTerm is OnStoppedLeading, called by client-go at the end of every
// round, led or not.
func (e *Elector) stopTerm() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.leading.Store(false)
	if !e.inTerm {
		return // never led in this round
	}
	e.inTerm = false
	e.cfg.Metrics.Leader.Set(0)
	e.cfg.Log.Info("stopped leading", "identity", e.cfg.Identity)
	if e.cfg.OnStoppedLeading != nil {
		e.cfg.OnStoppedLeading()
	}
}

// watchdog ends the term (stop) once the last successful renewal of the
// Lease was sent more than RenewDeadline ago, and returns when the term
// ends.
func (e *Elector) watchdog(term context.Context, stop context.CancelFunc, lock *watchedLock) {
	tick := time.NewTicker(min(e.cfg.RetryPeriod/2, 100*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-term.Done():
			return
		case <-tick.C:
			if since := lock.sinceRenew(); since > e.cfg.RenewDeadline {
				e.cfg.Log.Warn("lease not renewed within the renew deadline; stopping writes",
					"identity", e.cfg.Identity, "since_renewal", since.Round(time.Millisecond))
				e.leading.Store(false)
				e.cfg.Metrics.Leader.Set(0)
				stop()
				return
			}
		}
	}
}

// Metrics of leader election.
type Metrics struct {
	Leader      prometheus.Gauge
	Transitions prometheus.Counter
	// Interrupts counts campaigns restarted at once because the Lease was
	// seen released.
	Interrupts prometheus.Counter
	// Expiries counts campaigns restarted at once because the Lease, held
	// by another replica, was seen unrenewed for its lease duration.
	Expiries prometheus.Counter
}

// NewMetrics creates the metrics and registers them with reg when not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "portico_leader",
			Help: "1 while this replica holds the leader Lease.",
		}),
		Transitions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "portico_leader_transitions_total",
			Help: "Terms of leadership this replica started.",
		}),
		Interrupts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "portico_leader_release_campaigns_total",
			Help: "Campaigns started at once because the Lease was seen released, instead of at the next retry.",
		}),
		Expiries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "portico_leader_expiry_campaigns_total",
			Help: "Campaigns started at once because the Lease held by another replica was seen unrenewed for its lease duration, instead of at the next retry.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.Leader, m.Transitions, m.Interrupts, m.Expiries)
	}
	return m
}
