// Package leader runs leader election on a coordination.k8s.io Lease.
//
// Unlike controller-runtime's manager, losing the Lease does not end the
// process: the term's context is cancelled (so the writers it gates stop
// within the renew deadline) and the elector campaigns again. Everything
// that does not write — watching, translating, serving xDS — runs on every
// replica regardless of leadership.
package leader

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Config configures an Elector.
type Config struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string // the Lease name (--leader-election-id)
	// Identity defaults to DefaultIdentity().
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// OnStartedLeading is called at the start of each term with a context
	// that is cancelled when the term ends. It must not block.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading is called when a term ends.
	OnStoppedLeading func()
	Metrics          *Metrics
	Log              *slog.Logger
}

// Elector campaigns for the Lease until its context ends.
type Elector struct {
	cfg     Config
	leading atomic.Bool // IsLeader
	inTerm  atomic.Bool // between OnStartedLeading and OnStoppedLeading
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
	return &Elector{cfg: cfg}, nil
}

// Identity is this replica's holder identity.
func (e *Elector) Identity() string { return e.cfg.Identity }

// IsLeader reports whether this replica holds the Lease now.
func (e *Elector) IsLeader() bool { return e.leading.Load() }

// Run campaigns, leads, and after losing the Lease campaigns again, until
// ctx is done. On return the Lease is released if this replica held it, so
// that a successor takes over at once.
func (e *Elector) Run(ctx context.Context) error {
	lock := &watchedLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1ObjectMeta(e.cfg.Namespace, e.cfg.Name),
		Client:     e.cfg.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.cfg.Identity},
	}}
	for ctx.Err() == nil {
		// A round ends when client-go's elector returns, or when our
		// watchdog ends the term first.
		round, endRound := context.WithCancel(ctx)
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   e.cfg.LeaseDuration,
			RenewDeadline:   e.cfg.RenewDeadline,
			RetryPeriod:     e.cfg.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            e.cfg.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(term context.Context) {
					// The term also ends when the Lease was not renewed
					// for RenewDeadline, even while client-go is still
					// waiting on a hung renewal: writes stop in time.
					term, stop := context.WithCancel(term)
					go e.watchdog(term, func() { stop(); endRound() }, lock)
					e.inTerm.Store(true)
					e.leading.Store(true)
					e.cfg.Metrics.Leader.Set(1)
					e.cfg.Metrics.Transitions.Inc()
					e.cfg.Log.Info("became leader", "identity", e.cfg.Identity, "lease", e.cfg.Namespace+"/"+e.cfg.Name)
					if e.cfg.OnStartedLeading != nil {
						e.cfg.OnStartedLeading(term)
					}
				},
				OnStoppedLeading: func() {
					e.leading.Store(false)
					if !e.inTerm.Swap(false) {
						return // never led in this round
					}
					e.cfg.Metrics.Leader.Set(0)
					e.cfg.Log.Info("stopped leading", "identity", e.cfg.Identity)
					if e.cfg.OnStoppedLeading != nil {
						e.cfg.OnStoppedLeading()
					}
				},
				OnNewLeader: func(id string) {
					if id != e.cfg.Identity {
						e.cfg.Log.Info("leader is", "identity", id)
					}
				},
			},
		})
		if err != nil {
			endRound()
			return err
		}
		// Run returns when the term ends (or ctx is done); the term's
		// context has been cancelled by then.
		le.Run(round)
		endRound()
		if ctx.Err() == nil {
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

// watchdog ends the term (stop) once the last successful renewal of the
// Lease is older than RenewDeadline, and returns when the term ends.
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

// watchedLock records when the Lease was last written successfully
// (acquired or renewed).
type watchedLock struct {
	resourcelock.Interface
	renewed atomic.Int64 // unix nanoseconds
}

func (l *watchedLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, r)
	if err == nil {
		l.renewed.Store(time.Now().UnixNano())
	}
	return err
}

func (l *watchedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, r)
	if err == nil {
		l.renewed.Store(time.Now().UnixNano())
	}
	return err
}

func (l *watchedLock) sinceRenew() time.Duration {
	return time.Since(time.Unix(0, l.renewed.Load()))
}

// Metrics of leader election.
type Metrics struct {
	Leader      prometheus.Gauge
	Transitions prometheus.Counter
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
	}
	if reg != nil {
		reg.MustRegister(m.Leader, m.Transitions)
	}
	return m
}
