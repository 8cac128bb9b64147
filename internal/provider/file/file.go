// Package file is the standalone-mode provider: it loads every manifest
// under a directory into a resource.Snapshot, watches the directory tree with
// fsnotify and delivers a new snapshot after each (debounced) change.
//
// A load that fails (unparseable YAML, a known kind that does not decode,
// more bytes in the directory than Limits.MaxTotalBytes) is logged, naming
// the file, and nothing is delivered: the consumer keeps the last good
// snapshot until the files are fixed. A file the loader refuses (not a
// regular file, a symlink out of the directory, over a per-file limit: see
// load.PathsWith) is different: it can never load, so it is skipped
// with a warning naming it and the other files load (one FIFO, socket or
// oversized file dropped into the directory must not freeze the
// configuration). Every skipped file or document is logged at each reload
// and counted in portico_resource_load_warnings{reason}; loads are counted
// in portico_resource_loads_total{result}.
package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/resource/load"
)

// DefaultDebounce is used when New is given no debounce.
const DefaultDebounce = 100 * time.Millisecond

// maxDelayFactor bounds the debounce of a continuous stream of events: a
// reload happens at most maxDelayFactor×debounce after the first event.
const maxDelayFactor = 10

// Provider watches one directory. Create it with New.
type Provider struct {
	dir      string
	sink     func(*resource.Snapshot)
	log      *slog.Logger
	debounce time.Duration
	limits   load.Limits
	metrics  *loadMetrics // nil: not exported
}

// Registerer registers collectors (a *metrics.Metrics, or a
// prometheus.Registerer).
type Registerer interface {
	MustRegister(...prometheus.Collector)
}

// Options are the optional settings of a Provider.
type Options struct {
	// Limits bound each load (zero fields take the loader's defaults).
	Limits load.Limits
	// Metrics, when set, gets the provider's collectors.
	Metrics Registerer
}

// loadMetrics are the collectors of the loads.
type loadMetrics struct {
	warnings *prometheus.GaugeVec
	loads    *prometheus.CounterVec
}

// Load results, the "result" label of portico_resource_loads_total.
const (
	resultOK    = "ok"
	resultError = "error"
)

func newLoadMetrics(r Registerer) *loadMetrics {
	m := &loadMetrics{
		warnings: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "portico",
			Subsystem: "resource",
			Name:      "load_warnings",
			Help: "Files and documents skipped by the last load of the resources directory that produced a configuration, by reason " +
				"(unknown-kind: one document; the others: a whole file).",
		}, []string{"reason"}),
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "portico",
			Subsystem: "resource",
			Name:      "loads_total",
			Help:      "Loads of the resources directory, by result (ok: a configuration was delivered; error: the last good one stays).",
		}, []string{"result"}),
	}
	// Export every series from the start, so that dashboards see zeros.
	for _, reason := range load.Reasons {
		m.warnings.WithLabelValues(string(reason))
	}
	m.loads.WithLabelValues(resultOK)
	m.loads.WithLabelValues(resultError)
	r.MustRegister(m.warnings, m.loads)
	return m
}

// WithOptions applies opts to p (before Run) and returns p. It registers
// the provider's metrics on opts.Metrics, so call it once per registry.
func (p *Provider) WithOptions(opts Options) *Provider {
	p.limits = opts.Limits
	if opts.Metrics != nil {
		p.metrics = newLoadMetrics(opts.Metrics)
	}
	return p
}

// New returns a provider of the manifests under dir that hands each loaded
// snapshot to sink (which should not block for long). log may be nil.
func New(dir string, sink func(*resource.Snapshot), log *slog.Logger, debounce time.Duration) *Provider {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if debounce <= 0 {
		debounce = DefaultDebounce
	}
	return &Provider{dir: dir, sink: sink, log: log.With("component", "file-provider", "dir", dir), debounce: debounce}
}

// Run loads the directory, then watches it until ctx is cancelled (returning
// nil). It returns an error only when the directory cannot be watched at
// all; a failed load is logged and Run goes on watching.
func (p *Provider) Run(ctx context.Context) error {
	st, err := os.Stat(p.dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", p.dir)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", p.dir, err)
	}
	defer w.Close()
	// Watch first so that no change made during the first load is missed.
	if err := p.watchTree(w, p.dir); err != nil {
		return err
	}
	p.reload()

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var deadline time.Time
	schedule := func() {
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(maxDelayFactor * p.debounce)
		}
		timer.Reset(max(min(p.debounce, deadline.Sub(now)), 0))
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("file watcher closed")
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			p.log.Debug("file event", "event", ev.String())
			if ev.Has(fsnotify.Create) {
				if st, err := os.Stat(ev.Name); err == nil && st.IsDir() {
					if err := p.watchTree(w, ev.Name); err != nil {
						p.log.Error("cannot watch new directory", "path", ev.Name, "error", err)
					}
				}
			}
			schedule()
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("file watcher closed")
			}
			p.log.Error("file watcher error", "error", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				schedule() // events were lost: reload to be safe
			}
		case <-timer.C:
			deadline = time.Time{}
			p.reload()
		}
	}
}

// watchTree watches root and every directory below it, skipping hidden
// ones as the loader does (root itself is always watched).
func (p *Provider) watchTree(w *fsnotify.Watcher, root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path != root && errors.Is(err, fs.ErrNotExist) {
				return nil // removed meanwhile
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if err := w.Add(path); err != nil {
			return fmt.Errorf("watch %s: %w", path, err)
		}
		return nil
	})
}

// reload loads the directory and delivers the snapshot, or logs why not.
func (p *Provider) reload() {
	start := time.Now()
	snap, warnings, err := load.PathsWith(load.Options{Limits: p.limits, SkipRefused: true}, p.dir)
	if p.metrics != nil {
		result := resultOK
		if err != nil {
			result = resultError
		}
		p.metrics.loads.WithLabelValues(result).Inc()
	}
	if err != nil {
		attrs := []any{"error", err.Error()}
		var le *load.Error
		if errors.As(err, &le) {
			attrs = append(attrs, "file", le.File)
			if le.Document >= 0 {
				attrs = append(attrs, "document", le.Document)
			}
		}
		p.log.Error("loading resources failed; keeping the last good configuration", attrs...)
		return
	}
	counts := map[load.Reason]int{}
	for _, w := range warnings {
		counts[w.Reason]++
		attrs := []any{"file", w.File}
		if w.Document >= 0 {
			attrs = append(attrs, "document", w.Document)
		}
		attrs = append(attrs, "reason", w.Message, "category", string(w.Reason))
		if w.Reason == load.ReasonUnknownKind {
			p.log.Warn("skipped document", attrs...)
		} else {
			p.log.Warn("skipped file", attrs...)
		}
	}
	if p.metrics != nil {
		for _, reason := range load.Reasons {
			p.metrics.warnings.WithLabelValues(string(reason)).Set(float64(counts[reason]))
		}
	}
	p.log.Info("loaded resources", "objects", snap.Len(), "duration", time.Since(start))
	p.sink(snap)
}
