package proxysync

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The aggregation: the leader asks each replica. While it leads, a
// replica runs a Collector, which every Interval takes its own report and
// fetches every other replica's (GET /debug/proxies?summary=true on its
// debug server, with If-None-Match, so that a replica whose records did
// not change answers 304 and costs nothing), aggregates them and hands the
// conditions to the status writer, which coalesces and skips no-op writes.
// Nothing new writes to the API server, and nothing is stored but in the
// replicas' memory, where the streams are: a follower that crashes takes
// its streams with it (its proxies reconnect to another replica, whose
// records start afresh); a leader that crashes is replaced by a replica
// that starts its own Collector when its term starts. The delay from an
// ACK or NACK to the condition is at most an Interval plus a fetch, plus
// the writer's interval when the Gateway was written less than one ago.
//
// A replica that cannot be reached is left out of the round (and logged);
// its proxies count again when it answers. The replicas are found by
// Peers (the controller lists its Pods).

// DefaultInterval is the default time between two rounds.
const DefaultInterval = 500 * time.Millisecond

// maxReportBytes bounds a report read from a replica: about 2 kB per proxy
// in summary form leaves room for 30,000 proxies.
const maxReportBytes = 64 << 20

// Peer is another replica's debug server.
type Peer struct {
	// Name identifies the peer in logs (its Pod's name).
	Name string
	// URL is the base URL of its debug server ("https://10.0.0.7:19001").
	URL string
}

// CollectorConfig configures a Collector.
type CollectorConfig struct {
	// Local is the replica's own report.
	Local func() Report
	// Peers lists the other replicas; nil: none (one replica).
	Peers func(context.Context) ([]Peer, error)
	// Client fetches the peers' reports (default: a client with
	// FetchTimeout). Token, when set, gives the bearer token of each fetch.
	Client *http.Client
	Token  func() (string, error)
	// Interval between rounds (default DefaultInterval); StaleAfter the
	// stale threshold (default DefaultStaleAfter); FetchTimeout bounds a
	// fetch (default 2s).
	Interval, StaleAfter, FetchTimeout time.Duration
	// Sink receives each round's conditions, by Gateway: one
	// ConditionType condition for each Gateway the replica serves.
	Sink func(map[types.NamespacedName][]metav1.Condition)
	// RouteSink, when set, receives each round's route conditions traced
	// from NACKs by Trace (TraceRoutes; nil: no route has one).
	RouteSink func(map[RouteRef][]RouteCondition)
	Trace     Tracer
	Log       *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Collector aggregates the replicas' reports into Gateway conditions.
type Collector struct {
	cfg CollectorConfig
	// cache are the last reports fetched, with their ETags, by peer URL;
	// failing are the peers whose last fetch failed. Used by Run's
	// goroutine only (and its fetches, under mu).
	mu      sync.Mutex
	cache   map[string]cachedReport
	failing map[string]bool
}

type cachedReport struct {
	etag   string
	report Report
}

// NewCollector returns a Collector; Run runs it.
func NewCollector(cfg CollectorConfig) *Collector {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = DefaultStaleAfter
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = 2 * time.Second
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: cfg.FetchTimeout}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Collector{cfg: cfg, cache: map[string]cachedReport{}, failing: map[string]bool{}}
}

// Run runs rounds until ctx is done.
func (c *Collector) Run(ctx context.Context) {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		c.Round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Round runs one round: collect, aggregate, hand the conditions to Sink.
func (c *Collector) Round(ctx context.Context) {
	local := c.cfg.Local()
	now := c.cfg.Now()
	local.Received = now
	reports := []Report{local}
	for _, r := range c.fetchPeers(ctx) {
		if r.Replica != local.Replica { // the replica itself, listed among its peers
			reports = append(reports, r)
		}
	}
	if ctx.Err() != nil {
		return
	}
	current := make(map[string]Current, len(local.Gateways))
	for _, g := range local.Gateways {
		current[g.Gateway] = Current{Version: g.Version, Since: g.Since}
	}
	sums := Aggregate(reports, current, now, c.cfg.StaleAfter)
	conds := make(map[types.NamespacedName][]metav1.Condition, len(local.Gateways))
	for _, g := range local.Gateways {
		ns, name, ok := strings.Cut(g.Gateway, "/")
		if !ok {
			continue
		}
		conds[types.NamespacedName{Namespace: ns, Name: name}] = []metav1.Condition{Condition(sums[g.Gateway], c.cfg.StaleAfter)}
	}
	c.cfg.Sink(conds)
	if c.cfg.RouteSink != nil {
		c.cfg.RouteSink(TraceRoutes(sums, c.cfg.Trace))
	}
}

// fetchPeers fetches the reports of the peers, concurrently; those that
// fail are left out.
func (c *Collector) fetchPeers(ctx context.Context) []Report {
	if c.cfg.Peers == nil {
		return nil
	}
	peers, err := c.cfg.Peers(ctx)
	if err != nil {
		c.cfg.Log.Warn("proxy sync: listing the replicas failed", "error", err)
		return nil
	}
	out := make([]Report, len(peers))
	ok := make([]bool, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Go(func() {
			r, err := c.fetch(ctx, p)
			c.mu.Lock()
			defer c.mu.Unlock()
			if err != nil {
				if !c.failing[p.URL] && ctx.Err() == nil {
					c.cfg.Log.Warn("proxy sync: a replica's report could not be fetched; its proxies are left out until it answers",
						"replica", p.Name, "url", p.URL, "error", err)
				}
				c.failing[p.URL] = true
				return
			}
			if c.failing[p.URL] {
				c.cfg.Log.Info("proxy sync: replica answers again", "replica", p.Name)
				delete(c.failing, p.URL)
			}
			out[i], ok[i] = r, true
		})
	}
	wg.Wait()
	reached := out[:0]
	for i := range out {
		if ok[i] {
			reached = append(reached, out[i])
		}
	}
	c.mu.Lock()
	for u := range c.cache { // forget peers that are gone
		found := false
		for _, p := range peers {
			found = found || p.URL == u
		}
		if !found {
			delete(c.cache, u)
			delete(c.failing, u)
		}
	}
	c.mu.Unlock()
	return reached
}

// fetch gets the report of p, reusing the cached one when p answers 304.
//
// A peer whose last fetch failed (it crashed, or its node is gone and its
// address answers nothing) gets at most half the interval: the round, and
// so every Gateway's condition, does not wait FetchTimeout for it each
// time; a replica that comes back answers that fast.
func (c *Collector) fetch(ctx context.Context, p Peer) (Report, error) {
	timeout := c.cfg.FetchTimeout
	c.mu.Lock()
	if c.failing[p.URL] {
		timeout = min(timeout, c.cfg.Interval/2)
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(p.URL, "/")+"/debug/proxies?summary=true", nil)
	if err != nil {
		return Report{}, err
	}
	c.mu.Lock()
	cached, have := c.cache[p.URL]
	c.mu.Unlock()
	if have {
		req.Header.Set("If-None-Match", cached.etag)
	}
	if c.cfg.Token != nil {
		tok, err := c.cfg.Token()
		if err != nil {
			return Report{}, fmt.Errorf("token: %w", err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	resp, err := c.cfg.Client.Do(req)
	if err != nil {
		return Report{}, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotModified && have:
		return cached.report, nil
	case resp.StatusCode != http.StatusOK:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return Report{}, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	var r Report
	dec := json.NewDecoder(io.LimitReader(resp.Body, maxReportBytes))
	if err := dec.Decode(&r); err != nil {
		return Report{}, fmt.Errorf("decoding the report: %w", err)
	}
	if r.Replica == "" {
		return Report{}, errors.New("report without replica")
	}
	r.Received = c.cfg.Now()
	if etag := resp.Header.Get("ETag"); etag != "" {
		c.mu.Lock()
		c.cache[p.URL] = cachedReport{etag: etag, report: r}
		c.mu.Unlock()
	}
	return r, nil
}

// PeerTLS is the TLS configuration of fetches from the replicas' debug
// servers, whose certificates are self-signed by each replica at start
// (admin.SelfSignedTLS) and so cannot be verified. The peers' addresses
// come from the API server (the Running Pods of the controller's
// namespace with its labels), and a fetch sends the leader's
// ServiceAccount token: whoever can run a Pod there with those labels can
// run it with that ServiceAccount and read the token anyway, so the
// unverified handshake gives nobody what they did not have. A TLS
// configuration that verifies the peers can replace it.
func PeerTLS() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true} //nolint:gosec // see the doc
}
