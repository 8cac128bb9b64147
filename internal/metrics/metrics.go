// Package metrics holds Portico's Prometheus collectors. One Metrics value is
// created per process and shared by the xDS server, the translation pipeline
// and the admin endpoint, which exposes Registry on /metrics.
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Namespace prefixes every Portico metric name.
const Namespace = "portico"

// Stream kinds used as the "kind" label of XDSStreams and XDSRequests.
const (
	KindSotW  = "sotw"
	KindDelta = "delta"
	KindFetch = "fetch" // REST / unary Fetch* calls; counted in XDSRequests only
)

// Metrics is the set of Portico collectors, all registered on Registry.
// The zero value is not usable; call New.
type Metrics struct {
	// Registry holds every collector below plus the Go and process collectors.
	Registry *prometheus.Registry

	// TranslationDuration observes one translation (inputs → xDS
	// resources), without the hand-off to the xDS cache.
	TranslationDuration prometheus.Histogram
	// XDSUpdateDuration observes one hand-off of translated resources to
	// the xDS cache (which wakes the watches of the proxies).
	XDSUpdateDuration prometheus.Histogram
	// SnapshotInfo is 1 for the xDS snapshot version served per gateway.
	// Use SetSnapshotVersion / DeleteGateway rather than writing it directly.
	SnapshotInfo *prometheus.GaugeVec
	// XDSStreams counts open xDS streams by kind ("sotw" or "delta").
	XDSStreams *prometheus.GaugeVec
	// XDSNacks counts rejected (NACKed) xDS responses by gateway and type URL.
	XDSNacks *prometheus.CounterVec
	// XDSRequests counts xDS discovery requests by kind and type URL.
	XDSRequests *prometheus.CounterVec

	mu       sync.Mutex
	versions map[string]string // gateway → version currently in SnapshotInfo
}

// New returns Metrics with every collector registered on a fresh registry.
func New() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		TranslationDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace,
			Name:      "translation_duration_seconds",
			Help:      "Time taken to translate the Gateway API inputs into xDS resources.",
			Buckets:   []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		XDSUpdateDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace,
			Subsystem: "xds",
			Name:      "update_duration_seconds",
			Help:      "Time taken to hand translated resources to the xDS cache.",
			Buckets:   []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
		}),
		SnapshotInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace,
			Subsystem: "xds",
			Name:      "snapshot_info",
			Help:      "Version of the xDS snapshot served for each gateway (value is always 1).",
		}, []string{"gateway", "version"}),
		XDSStreams: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace,
			Subsystem: "xds",
			Name:      "streams",
			Help:      "Number of open xDS streams by kind (sotw or delta).",
		}, []string{"kind"}),
		XDSNacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Subsystem: "xds",
			Name:      "nacks_total",
			Help:      "Number of xDS responses rejected by proxies, by gateway and type URL.",
		}, []string{"gateway", "type_url"}),
		XDSRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace,
			Subsystem: "xds",
			Name:      "requests_total",
			Help:      "Number of xDS discovery requests received, by kind and type URL.",
		}, []string{"kind", "type_url"}),
		versions: map[string]string{},
	}
	m.Registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.MustRegister(
		m.TranslationDuration,
		m.XDSUpdateDuration,
		m.SnapshotInfo,
		m.XDSStreams,
		m.XDSNacks,
		m.XDSRequests,
	)
	// Export both stream kinds from the start so dashboards see zeros.
	m.XDSStreams.WithLabelValues(KindSotW)
	m.XDSStreams.WithLabelValues(KindDelta)
	return m
}

// MustRegister registers additional collectors on m.Registry; it panics if
// one is invalid or already registered. Later features (status queue depth,
// leader election…) add their collectors through it.
func (m *Metrics) MustRegister(cs ...prometheus.Collector) {
	m.Registry.MustRegister(cs...)
}

// SetSnapshotVersion records that version is now served for gateway: the
// series for the gateway's previous version, if any, is deleted.
func (m *Metrics) SetSnapshotVersion(gateway, version string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.versions[gateway]; ok && old != version {
		m.SnapshotInfo.DeleteLabelValues(gateway, old)
	}
	m.versions[gateway] = version
	m.SnapshotInfo.WithLabelValues(gateway, version).Set(1)
}

// DeleteGateway removes every per-gateway series of gateway (snapshot info
// and NACK counters), for a gateway that is no longer served.
func (m *Metrics) DeleteGateway(gateway string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.versions, gateway)
	m.SnapshotInfo.DeletePartialMatch(prometheus.Labels{"gateway": gateway})
	m.XDSNacks.DeletePartialMatch(prometheus.Labels{"gateway": gateway})
}
