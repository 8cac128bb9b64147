// Package pipeline is Portico's single-writer loop: providers Submit input
// snapshots, and one goroutine (Run) batches them, translates the latest
// into statuses and per-Gateway xDS resources, and hands the result to the
// xDS server and the status writer. The same loop serves standalone (file
// provider) and controller (Kubernetes informers) mode.
//
// Batching favours latency when changes are rare and throughput when they
// are not. A Submit that finds the loop idle is translated at once (leading
// edge): an isolated change waits for no quiet period. After each
// translation the loop pauses for Config.Debounce, or for as long as the
// translation took when that is longer, but never longer than
// Config.MaxDelay; every Submit that arrives during a translation or its
// pause is coalesced into one translation of the latest input when the
// pause ends. So a burst costs one translation per pause, a continuous
// stream of changes keeps the loop translating at most about half of the
// time (while translations take less than MaxDelay), and no stream can
// postpone a change by more than the translation running when it arrived
// plus MaxDelay.
//
// Only Run writes. Readers (admin endpoints, tests) see the last result
// through an atomic pointer to an immutable Result.
//
// Translation is incremental. An incremental.Translator translates each
// snapshot from the previous one, using the snapshot's Changes (listed by
// the Kubernetes provider) or else comparing the two snapshots: a change of
// EndpointSlices only updates the endpoints of the affected clusters
// (statuses and proxies are not published again), a change of routes only
// re-translates those routes on their Gateways, and other changes the
// Gateways they affect. A translate.Translator then re-translates the IR
// parts that changed: unchanged Gateways keep their Resources (same
// version, no cache update), changed ones reuse the Envoy resources of
// unchanged listeners, route configs, virtual hosts, routes, clusters and
// load assignments. A Gateway API translation that panics makes the next
// one full.
package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/incremental"
	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/proxyspec"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// Defaults of Config.
const (
	DefaultDebounce = 10 * time.Millisecond
	DefaultMaxDelay = time.Second
)

// XDSSink receives the resources of every Gateway after each translation;
// Gateways missing from res are no longer served. *server.Server satisfies it.
type XDSSink interface {
	Update(ctx context.Context, res []*translate.Resources) error
}

// StatusSink receives the desired statuses after each translation. Publish
// must not block: it is called from the pipeline's only goroutine.
// Successive sets share what did not change (gatewayapi.DiffStatuses
// finds the changes). *status.Writer satisfies it.
type StatusSink interface {
	Publish(statuses gatewayapi.StatusSet)
}

// InfraSink receives what the proxies of every Gateway need after each
// translation. Publish must not block.
type InfraSink interface {
	Publish(specs []proxyspec.Spec)
}

// Config of a Pipeline.
type Config struct {
	ControllerName string // default gatewayapi.DefaultControllerName
	// Debounce is the shortest pause between the end of a translation and
	// the start of the next (default 10ms). Submits during a translation or
	// its pause are coalesced into one translation at the end of the pause;
	// a Submit after the pause is translated at once. The pause is longer
	// when the last translation took longer than Debounce: it then lasts as
	// long as that translation (snapshot building and hand-off included).
	Debounce time.Duration
	// MaxDelay bounds the pause (default 1s): a submitted input is
	// translated at most MaxDelay after the translation running when it
	// was submitted has finished, however many submits keep coming.
	MaxDelay time.Duration
	XDS      XDSSink    // required
	Status   StatusSink // may be nil
	Infra    InfraSink  // may be nil
	// Infrastructure: Portico provisions the proxies, and Gateways are
	// Programmed only once they can take traffic (gatewayapi.Options).
	Infrastructure bool
	// MaxRouteExpansion is gatewayapi.Options.MaxRouteExpansion: the most
	// Envoy routes one route may expand into (0: the default, negative:
	// no limit).
	MaxRouteExpansion int
	// MaxGatewayExpansion is gatewayapi.Options.MaxGatewayExpansion.
	MaxGatewayExpansion int
	// XDSOptions are the options of the xDS translation (e.g. the route
	// split by hostname); the zero value is the default.
	XDSOptions translate.Options
	Metrics    *metrics.Metrics
	Log        *slog.Logger
}

// Result is one translation. It is never modified once published.
type Result struct {
	// Result is the output of gatewayapi.Translate.
	Result *gatewayapi.Result
	// Statuses are Result's statuses amended with what the xDS stage
	// served (gatewayapi.ServedStatuses): what the status writer gets.
	Statuses gatewayapi.StatusSet
	// XDS holds the resources handed to the XDSSink, sorted by Gateway. A
	// Gateway whose xDS translation failed keeps its previous resources.
	XDS []*translate.Resources
	// Versions is the xDS version per Gateway ("ns/name").
	Versions map[string]string
	// Duration of the translation, hand-off included.
	Duration time.Duration
	// Time the translation finished.
	Time time.Time
	// Stats tell how the Gateway API translation was done (full,
	// incremental, endpoints only).
	Stats incremental.Stats
}

// Pipeline is the single-writer translation loop. Create it with New.
type Pipeline struct {
	cfg Config
	log *slog.Logger

	pending atomic.Pointer[input]
	signal  chan struct{} // capacity 1: "pending has an input"

	latest atomic.Pointer[Result]
	// outcomes are the xDS stage's outcomes of the last translation (loop
	// goroutine only).
	outcomes  map[string]gatewayapi.XDSOutcome
	ready     atomic.Bool
	readyCh   chan struct{}
	readyOnce sync.Once

	// inc translates each snapshot incrementally from the previous one;
	// xds remembers the Envoy resources of each Gateway's IR.
	inc *incremental.Translator
	xds *translate.Translator
	// fullTranslations counts the full Gateway API translations.
	fullTranslations atomic.Int64

	// pendingSince is when the oldest input coalesced into pending was
	// submitted (UnixNano; 0: none), for the log.
	pendingSince atomic.Int64

	// Seams for tests; nil: the real (incremental) translators.
	translateInputs func(*resource.Snapshot, gatewayapi.Options) *gatewayapi.Result
	translateXDS    func(*ir.Gateway) (*translate.Resources, error)
	// clock times the batching; stepped, when set, is called after each
	// iteration of Run's loop.
	clock   loopClock
	stepped func()
}

// New returns a pipeline; call Run to start it.
func New(cfg Config) *Pipeline {
	if cfg.ControllerName == "" {
		cfg.ControllerName = gatewayapi.DefaultControllerName
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = DefaultDebounce
	}
	if cfg.MaxDelay <= 0 {
		cfg.MaxDelay = DefaultMaxDelay
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Pipeline{
		cfg:     cfg,
		log:     log.With("component", "pipeline"),
		signal:  make(chan struct{}, 1),
		readyCh: make(chan struct{}),
		inc:     incremental.New(),
		xds:     translate.NewTranslatorWith(cfg.XDSOptions),
		clock:   realClock{},
	}
}

// input is a submitted snapshot, or a function that builds one.
type input struct {
	snap  *resource.Snapshot
	build func(context.Context) (*resource.Snapshot, error)
}

// Submit makes snap the next input. It never blocks: only the latest input
// submitted before a translation starts is translated. snap must not be
// modified afterwards.
func (p *Pipeline) Submit(snap *resource.Snapshot) {
	if snap == nil {
		return
	}
	p.submit(&input{snap: snap})
}

// SubmitFunc is Submit for a provider whose snapshot is costly to build (a
// copy of informer caches): build is called by the loop when the
// translation starts, and its snapshot is translated. When build fails the
// error is logged and the previous result kept. It never blocks.
func (p *Pipeline) SubmitFunc(build func(context.Context) (*resource.Snapshot, error)) {
	if build == nil {
		return
	}
	p.submit(&input{build: build})
}

func (p *Pipeline) submit(in *input) {
	p.pendingSince.CompareAndSwap(0, p.clock.Now().UnixNano())
	p.pending.Store(in)
	select {
	case p.signal <- struct{}{}:
	default: // the loop has been signalled already
	}
}

// Run is the loop. It returns nil when ctx is cancelled.
func (p *Pipeline) Run(ctx context.Context) error {
	timer := p.clock.NewTimer()
	defer timer.Stop()
	var next time.Time // the end of the pause after the last translation
	armed := false     // the timer will fire at next
	for {
		due := false
		select {
		case <-ctx.Done():
			return nil
		case <-p.signal:
			if armed {
				break // coalesced into the translation at the end of the pause
			}
			if wait := next.Sub(p.clock.Now()); wait > 0 {
				timer.Reset(wait)
				armed = true
				break
			}
			due = true // idle: leading edge
		case <-timer.C():
			armed, due = false, true
		}
		if due {
			next = p.cycle(ctx, next)
		}
		if p.stepped != nil {
			p.stepped()
		}
	}
}

// cycle translates the pending input, if any, and returns the end of the
// pause that follows (next when there was nothing to translate).
func (p *Pipeline) cycle(ctx context.Context, next time.Time) time.Time {
	in := p.pending.Swap(nil)
	if in == nil {
		return next // a signal for an input already translated
	}
	start := p.clock.Now()
	var queued time.Duration // 0 when a concurrent Submit raced the swaps
	if since := p.pendingSince.Swap(0); since != 0 {
		queued = max(start.Sub(time.Unix(0, since)), 0)
	}
	if snap := p.snapshotOf(ctx, in); snap != nil {
		p.process(ctx, snap, queued)
	}
	end := p.clock.Now()
	return end.Add(p.pause(end.Sub(start)))
}

// pause is how long the loop coalesces submits after a translation that
// took cost: Debounce, or cost when longer, at most MaxDelay.
func (p *Pipeline) pause(cost time.Duration) time.Duration {
	return min(max(p.cfg.Debounce, cost), p.cfg.MaxDelay)
}

// snapshotOf returns the input's snapshot, building it if needed; nil
// when it cannot be built.
func (p *Pipeline) snapshotOf(ctx context.Context, in *input) *resource.Snapshot {
	if in.build == nil {
		return in.snap
	}
	snap, err := in.build(ctx)
	if err == nil && snap == nil {
		err = fmt.Errorf("no snapshot")
	}
	if err != nil {
		if ctx.Err() == nil {
			p.log.Error("building the input snapshot failed; keeping the previous configuration", "error", err)
		}
		return nil
	}
	return snap
}

// process translates snap and hands the result off. queued is how long
// the input waited for its translation (logged).
func (p *Pipeline) process(ctx context.Context, snap *resource.Snapshot, queued time.Duration) {
	start := time.Now()
	prev := p.latest.Load()

	res, stats, err := p.safeTranslateInputs(snap)
	if err != nil {
		p.log.Error("translation failed; keeping the previous configuration", "error", err)
		return
	}
	if stats.Mode == incremental.ModeFull {
		p.fullTranslations.Add(1)
	}
	xds, outcomes := p.translateGateways(res.Gateways, prev)
	xlateDur := time.Since(start)
	// Statuses say what is served: the xDS stage's outcomes amend them.
	statuses := gatewayapi.ServedStatuses(res.StatusSet, outcomes)
	outcomesChanged := !reflect.DeepEqual(outcomes, p.outcomes)
	p.outcomes = outcomes

	updateStart := time.Now()
	err = p.cfg.XDS.Update(ctx, xds)
	updateDur := time.Since(updateStart)
	if err != nil {
		if ctx.Err() != nil {
			return // shutting down
		}
		// The sink applies what it can (a Gateway it rejects keeps its
		// previous snapshot there); the translation is still the latest.
		p.log.Error("xDS update failed", "error", err)
	}
	cur := &Result{
		Result:   res,
		Statuses: statuses,
		XDS:      xds,
		Versions: make(map[string]string, len(xds)),
		Duration: time.Since(start),
		Time:     time.Now(),
		Stats:    stats,
	}
	for _, r := range xds {
		cur.Versions[r.Gateway] = r.Version
	}
	// Snapshot versions are recorded by the xDS server, which knows what
	// it actually serves.
	if m := p.cfg.Metrics; m != nil {
		m.TranslationDuration.Observe(xlateDur.Seconds())
		m.XDSUpdateDuration.Observe(updateDur.Seconds())
	}
	p.latest.Store(cur)
	p.ready.Store(true)
	p.readyOnce.Do(func() { close(p.readyCh) })
	// Statuses and proxies do not depend on endpoints: an endpoints-only
	// translation has nothing new for them.
	if p.cfg.Status != nil && (stats.StatusesChanged || outcomesChanged) {
		p.cfg.Status.Publish(statuses)
	}
	if p.cfg.Infra != nil && stats.InfraChanged {
		p.cfg.Infra.Publish(res.Infra)
	}

	p.logChanges(prev, cur, xlateDur, queued, snap)
}

// safeTranslateInputs runs the Gateway API translation (incremental from
// the previous snapshot), turning a panic into an error so that one bad
// input cannot stop the loop. After a panic the next translation is full.
func (p *Pipeline) safeTranslateInputs(snap *resource.Snapshot) (res *gatewayapi.Result, stats incremental.Stats, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in Gateway API translation: %v", r)
		}
	}()
	opts := gatewayapi.Options{
		ControllerName:      p.cfg.ControllerName,
		Infrastructure:      p.cfg.Infrastructure,
		MaxRouteExpansion:   p.cfg.MaxRouteExpansion,
		MaxGatewayExpansion: p.cfg.MaxGatewayExpansion,
	}
	if p.translateInputs != nil {
		res = p.translateInputs(snap, opts)
		stats = incremental.Stats{Mode: incremental.ModeFull, StatusesChanged: true, InfraChanged: true}
	} else {
		res, stats = p.inc.Translate(snap, opts)
	}
	if res == nil {
		return nil, stats, fmt.Errorf("Gateway API translation returned no result")
	}
	return res, stats, nil
}

// translateGateways translates each Gateway; one that fails keeps its
// resources of prev (or is left out when it has none). Sorted by Gateway.
// outcomes holds, for each Gateway that failed or had pieces left out,
// what happened, for its statuses (gatewayapi.ServedStatuses).
func (p *Pipeline) translateGateways(gws []*ir.Gateway, prev *Result) (out []*translate.Resources, outcomes map[string]gatewayapi.XDSOutcome) {
	var old map[string]*translate.Resources
	if prev != nil {
		old = make(map[string]*translate.Resources, len(prev.XDS))
		for _, r := range prev.XDS {
			old[r.Gateway] = r
		}
	}
	out = make([]*translate.Resources, 0, len(gws))
	outcomes = map[string]gatewayapi.XDSOutcome{}
	defer func() {
		// Forget the Envoy resources of Gateways no longer served.
		present := make(map[string]bool, len(gws))
		for _, gw := range gws {
			if gw != nil {
				present[gw.Key()] = true
			}
		}
		p.xds.Forget(func(gw string) bool { return present[gw] })
	}()
	live := make([]*ir.Gateway, 0, len(gws))
	for _, gw := range gws {
		if gw != nil {
			live = append(live, gw)
		}
	}
	var results []*translate.Resources
	var errs []error
	if p.translateXDS == nil {
		// Gateways are translated in parallel; unchanged ones are returned
		// at once by the Translator.
		results, errs = p.xds.TranslateAll(live)
	} else {
		results, errs = make([]*translate.Resources, len(live)), make([]error, len(live))
		for i, gw := range live {
			results[i], errs[i] = p.safeTranslateXDS(gw)
		}
	}
	for i, gw := range live {
		r, err := results[i], errs[i]
		if err == nil && r == nil {
			err = fmt.Errorf("no resources")
		}
		if err != nil {
			kept, ok := old[gw.Key()]
			p.log.Error("xDS translation of gateway failed", "gateway", gw.Key(), "error", err, "keptPrevious", ok)
			if ok {
				out = append(out, kept)
			}
			outcomes[gw.Key()] = gatewayapi.XDSOutcome{Failed: err.Error()}
			continue
		}
		if len(r.Problems) > 0 {
			o := gatewayapi.XDSOutcome{Dropped: make([]gatewayapi.Dropped, len(r.Problems))}
			for i, pr := range r.Problems {
				o.Dropped[i] = gatewayapi.Dropped{Route: pr.Route, Listener: pr.Listener, Err: pr.Err}
			}
			outcomes[gw.Key()] = o
			p.log.Warn("parts of a gateway's configuration are left out", "gateway", gw.Key(), "count", len(r.Problems), "first", r.Problems[0].What(), "error", r.Problems[0].Err)
		}
		out = append(out, r)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Gateway < out[j].Gateway })
	return out, outcomes
}

func (p *Pipeline) safeTranslateXDS(gw *ir.Gateway) (r *translate.Resources, err error) {
	defer func() {
		if rec := recover(); rec != nil {
			err = fmt.Errorf("panic: %v", rec)
		}
	}()
	r, err = p.translateXDS(gw)
	if err == nil && r == nil {
		err = fmt.Errorf("no resources")
	}
	return r, err
}

// logChanges logs which Gateways' versions changed.
func (p *Pipeline) logChanges(prev, cur *Result, xlate, queued time.Duration, snap *resource.Snapshot) {
	var added, changed, removed []string
	var old map[string]string
	if prev != nil {
		old = prev.Versions
	}
	for _, gw := range sortedKeys(cur.Versions) {
		ov, ok := old[gw]
		switch {
		case !ok:
			added = append(added, gw+"@"+cur.Versions[gw])
		case ov != cur.Versions[gw]:
			changed = append(changed, gw+"@"+cur.Versions[gw])
		}
	}
	for _, gw := range sortedKeys(old) {
		if _, ok := cur.Versions[gw]; !ok {
			removed = append(removed, gw)
		}
	}
	level := slog.LevelInfo
	if len(added)+len(changed)+len(removed) == 0 {
		level = slog.LevelDebug
	}
	p.log.Log(context.Background(), level, "translated",
		"mode", cur.Stats.Mode, "changes", cur.Stats.Changes, "retranslatedGateways", cur.Stats.Gateways,
		"objects", snap.Len(),
		"gateways", len(cur.XDS),
		"statuses", cur.Result.StatusSet.Len(),
		"added", added, "changed", changed, "removed", removed,
		"queued", queued, "translate", xlate, "total", cur.Duration)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Ready reports whether a translation has been handed to the XDSSink.
func (p *Pipeline) Ready() bool { return p.ready.Load() }

// ReadyC is closed when Ready becomes true.
func (p *Pipeline) ReadyC() <-chan struct{} { return p.readyCh }

// Latest is the last translation handed off, or nil before the first.
func (p *Pipeline) Latest() *Result { return p.latest.Load() }
