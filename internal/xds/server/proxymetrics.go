package server

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/proxysync"
)

// The gauge portico_xds_proxies{gateway,state} counts the proxies (open
// xDS streams) connected to this replica, per Gateway, by the worst state
// of their resource types. It is computed from the proxies' sync records
// when Prometheus scrapes, so a change of the records costs nothing more.
//
// A stream is counted once: a proxy that reconnects is counted twice for
// as long as its old stream stays open (as in ProxyReport, where each
// stream is a proxysync.Proxy). Streams that have not sent their first
// request (no Gateway yet) are not counted. Every Gateway the replica
// serves has a series for each of the four states, zero when no proxy is
// in it, so that alerts and dashboards see zeros rather than nothing.

// ProxiesMetric is the name of the gauge.
const ProxiesMetric = metrics.Namespace + "_xds_proxies"

// proxyStateOrder are the states of a resource type, best first. A
// proxy's state is the worst of its types' states:
//
//   - SYNCED: the proxy ACKed the last response of every type;
//   - PENDING: a response (or the first one) waits for its answer, which
//     is the rule for a few milliseconds after each change;
//   - STALE: it has waited longer than the stale threshold
//     (proxysync.DefaultStaleAfter): the proxy is slow or stuck;
//   - NACK: the proxy rejected a response and ACKed none since. It keeps
//     running its previous configuration of that type and will not be
//     sent that type again until the configuration changes, so this is
//     the worst: it does not resolve by waiting.
//
// A stream whose proxy asked for no type yet counts as PENDING.
var proxyStateOrder = []string{proxysync.StateSynced, proxysync.StatePending, proxysync.StateStale, proxysync.StateNack}

// stateRank is the index of state in proxyStateOrder.
func stateRank(state string) int {
	for i, s := range proxyStateOrder {
		if s == state {
			return i
		}
	}
	return len(proxyStateOrder) - 1 // unknown: the worst
}

// proxyCollector is the prometheus.Collector of ProxiesMetric. Several
// Servers may share one metrics.Metrics (tests do): the collector
// registered first sums the proxies of all of them.
type proxyCollector struct {
	desc *prometheus.Desc
	// staleAfter is the stale threshold; now the clock the records'
	// ages are measured with (time.Now).
	staleAfter time.Duration
	now        func() time.Time

	mu      sync.Mutex
	servers []*Server
}

func newProxyCollector() *proxyCollector {
	return &proxyCollector{
		desc: prometheus.NewDesc(ProxiesMetric,
			"Proxies (open xDS streams) connected to this replica, by Gateway and by the worst state of their "+
				"resource types: NACK (a response rejected, none ACKed since), then STALE (a response unanswered for over "+
				proxysync.DefaultStaleAfter.String()+"), then PENDING (waiting for an answer), then SYNCED.",
			[]string{"gateway", "state"}, nil),
		staleAfter: proxysync.DefaultStaleAfter,
		now:        time.Now,
	}
}

// registerProxyCollector registers the collector of s's proxies on m,
// or adds s to the one already registered there.
func registerProxyCollector(m *metrics.Metrics, s *Server) {
	pc := registerCollector(m.Registry, newProxyCollector())
	pc.add(s)
}

func (pc *proxyCollector) add(s *Server) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.servers = append(pc.servers, s)
}

func (pc *proxyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- pc.desc }

func (pc *proxyCollector) Collect(ch chan<- prometheus.Metric) {
	pc.mu.Lock()
	servers := append([]*Server(nil), pc.servers...)
	pc.mu.Unlock()
	now := pc.now()
	counts := map[string][]int{} // gateway → proxies per state, by rank
	for _, s := range servers {
		s.countProxies(now, pc.staleAfter, counts)
	}
	for gw, n := range counts {
		for i, state := range proxyStateOrder {
			ch <- prometheus.MustNewConstMetric(pc.desc, prometheus.GaugeValue, float64(n[i]), gw, state)
		}
	}
}

// countProxies adds to counts, per Gateway, the streams of s by their
// worst state at now, and a zero entry for every Gateway s serves.
func (s *Server) countProxies(now time.Time, staleAfter time.Duration, counts map[string][]int) {
	entry := func(gw string) []int {
		n := counts[gw]
		if n == nil {
			n = make([]int, len(proxyStateOrder))
			counts[gw] = n
		}
		return n
	}
	s.mu.Lock()
	for gw := range s.versions {
		entry(gw)
	}
	s.mu.Unlock()
	s.cbMu.Lock()
	defer s.cbMu.Unlock()
	for cb := range s.cbs {
		cb.mu.Lock()
		for _, streams := range []map[int64]*streamState{cb.sotw, cb.delta} {
			for _, st := range streams {
				if st.gateway == "" {
					continue // no request yet
				}
				entry(st.gateway)[st.worstState(now, staleAfter)]++
			}
		}
		cb.mu.Unlock()
	}
}

// worstState is the rank of the worst state of st's types at now. The
// caller holds the callbacks' mutex.
func (st *streamState) worstState(now time.Time, staleAfter time.Duration) int {
	if len(st.sync) == 0 {
		return stateRank(proxysync.StatePending)
	}
	worst := 0
	for _, ts := range st.sync {
		// The records are read in place, not copied: State only reads.
		t := proxysync.Type{Requested: ts.requested, Sent: ts.last, Acked: ts.acked, Nack: ts.nack}
		state, _ := t.State(now, staleAfter)
		worst = max(worst, stateRank(state))
	}
	return worst
}
