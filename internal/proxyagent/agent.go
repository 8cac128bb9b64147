// Package proxyagent is the shutdown manager of a provisioned proxy Pod:
// `portico proxy-agent`, a sidecar next to Envoy that makes a terminating
// proxy drain instead of dropping what it serves.
//
// Envoy exits at once on SIGTERM: it closes every connection, in-flight
// requests included, and clients whose keep-alive connection it held see
// resets. Its graceful drain is started only through its admin interface,
// which listens on the Pod's loopback. Kubernetes terminates a Pod by
// running each container's preStop hook and then sending it SIGTERM, for
// all containers at once, within terminationGracePeriodSeconds. So:
//
//  1. The agent has no preStop hook: it gets SIGTERM at once, and that is
//     what starts the drain (Drain). Only the kubelet can signal it, so
//     nobody who merely reaches the Pod can drain a proxy.
//  2. The drain is POST /healthcheck/fail on Envoy's admin: Envoy's server
//     state becomes DRAINING, so its /ready (which the readiness listener
//     serves to the Pod's readiness probe) answers 503 and the Pod leaves
//     its Service's endpoints; Envoy keeps accepting connections and
//     serving requests, but closes connections gracefully: HTTP/1.1
//     responses carry "Connection: close", HTTP/2 connections get GOAWAY.
//  3. The agent then waits at least MinDrain (load balancers and
//     kube-proxy take time to stop sending new connections) and until no
//     downstream connection is left on Envoy's listeners (those of the
//     Gateway: the admin, readiness and metrics listeners are not
//     counted), or until DrainTimeout.
//  4. Envoy's preStop hook is an HTTP GET of the agent's /shutdown/wait,
//     which returns when the drain is done; then the kubelet sends Envoy
//     SIGTERM and it exits with nothing left to cut. /shutdown/wait only
//     waits: it starts nothing.
//  5. The agent exits once the drain is done and the wait has been
//     answered.
//
// Why a sidecar (as Contour's and Envoy Gateway's shutdown managers): the
// Envoy image has no shell or HTTP client for an exec hook, and an HTTP
// preStop hook cannot POST to the admin interface.
package proxyagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Options configure an Agent.
type Options struct {
	// AdminAddress is Envoy's admin interface, host:port on loopback.
	AdminAddress string
	// DrainTimeout bounds the drain; MinDrain is its minimum.
	DrainTimeout, MinDrain time.Duration
	// IgnorePorts are listener ports whose connections the drain does not
	// wait for (readiness and metrics listeners: probes and scrapers keep
	// connecting).
	IgnorePorts []int
	// Poll is how often connections are counted (default 250 ms).
	Poll time.Duration
	// Logf reports the drain's progress.
	Logf func(format string, args ...any)
}

// Agent drains one Envoy.
type Agent struct {
	opts   Options
	client *http.Client

	once    sync.Once
	started chan struct{} // closed when Drain starts
	done    chan struct{} // closed when the drain is over
	gone    atomic.Bool   // Envoy was not running when the drain ended
}

// New returns an Agent; nothing happens until Drain.
func New(opts Options) (*Agent, error) {
	if _, _, err := net.SplitHostPort(opts.AdminAddress); err != nil {
		return nil, fmt.Errorf("proxyagent: admin address %q: %w", opts.AdminAddress, err)
	}
	if opts.DrainTimeout <= 0 {
		return nil, errors.New("proxyagent: the drain timeout must be positive")
	}
	opts.MinDrain = min(max(opts.MinDrain, 0), opts.DrainTimeout)
	if opts.Poll <= 0 {
		opts.Poll = 250 * time.Millisecond
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	return &Agent{
		opts:    opts,
		client:  &http.Client{Timeout: 2 * time.Second},
		started: make(chan struct{}),
		done:    make(chan struct{}),
	}, nil
}

// Done is closed when the drain is over.
func (a *Agent) Done() <-chan struct{} { return a.done }

// Drain starts the drain once (later calls only wait) and returns when it
// is over: no downstream connection left after MinDrain, DrainTimeout
// elapsed, or ctx done.
func (a *Agent) Drain(ctx context.Context) {
	a.once.Do(func() {
		close(a.started)
		go a.drain(ctx)
	})
	select {
	case <-a.done:
	case <-ctx.Done():
	}
}

func (a *Agent) drain(ctx context.Context) {
	defer close(a.done)
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, a.opts.DrainTimeout)
	defer cancel()
	// An admin interface that refuses connections is an Envoy that is not
	// running (it exited, or was stopped with the Pod without a drain):
	// nothing to drain. Other errors (a slow Envoy) are retried until the
	// drain times out.
	for {
		err := a.post(ctx, "/healthcheck/fail")
		if err == nil {
			break
		}
		if refused(err) {
			a.opts.Logf("proxy-agent: Envoy is not running (%v): nothing to drain", err)
			a.gone.Store(true)
			return
		}
		a.opts.Logf("proxy-agent: failing Envoy's health check: %v", err)
		if !sleep(ctx, a.opts.Poll) {
			a.opts.Logf("proxy-agent: drain timed out after %s before Envoy answered", time.Since(start).Round(time.Millisecond))
			return
		}
	}
	a.opts.Logf("proxy-agent: draining (minimum %s, timeout %s)", a.opts.MinDrain, a.opts.DrainTimeout)
	last := -1
	for {
		n, err := a.connections(ctx)
		switch {
		case err != nil && refused(err):
			a.opts.Logf("proxy-agent: Envoy exited during the drain, after %s", time.Since(start).Round(time.Millisecond))
			a.gone.Store(true)
			return
		case err != nil:
			a.opts.Logf("proxy-agent: counting connections: %v", err)
		case n == 0 && time.Since(start) >= a.opts.MinDrain:
			a.opts.Logf("proxy-agent: drained in %s", time.Since(start).Round(time.Millisecond))
			return
		case n != last:
			a.opts.Logf("proxy-agent: %d downstream connections left", n)
			last = n
		}
		if !sleep(ctx, a.opts.Poll) {
			a.opts.Logf("proxy-agent: drain timeout (%s) with connections left", a.opts.DrainTimeout)
			return
		}
	}
}

// refused: nothing listens on the admin address.
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (a *Agent) post(ctx context.Context, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+a.opts.AdminAddress+path, nil)
	if err != nil {
		return err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", path, resp.Status)
	}
	return nil
}

// listenerStat is a listener's active-connection gauge,
// "listener.<address>_<port>.downstream_cx_active", Envoy's name for a
// listener without a stat prefix (IPv6 colons become underscores). The
// per-worker gauges ("….worker_0.downstream_cx_active") and the admin
// listener's do not match.
var listenerStat = regexp.MustCompile(`^listener\.([0-9a-fA-F.\[\]_]+)_(\d+)\.downstream_cx_active$`)

// connections is the number of active downstream connections on Envoy's
// listeners but the ignored ports.
func (a *Agent) connections(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		"http://"+a.opts.AdminAddress+"/stats?format=json&filter="+`^listener\..*downstream_cx_active$`, nil)
	if err != nil {
		return 0, err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("stats: %s", resp.Status)
	}
	var body struct {
		Stats []struct {
			Name  string          `json:"name"`
			Value json.RawMessage `json:"value"`
		} `json:"stats"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 4<<20)).Decode(&body); err != nil {
		return 0, fmt.Errorf("stats: %w", err)
	}
	total := 0
	for _, s := range body.Stats {
		m := listenerStat.FindStringSubmatch(s.Name)
		if m == nil {
			continue
		}
		port, _ := strconv.Atoi(m[2])
		if a.ignored(port) {
			continue
		}
		v, err := strconv.Atoi(string(s.Value))
		if err != nil {
			return 0, fmt.Errorf("stats: %s = %s", s.Name, s.Value)
		}
		total += v
	}
	return total, nil
}

func (a *Agent) ignored(port int) bool {
	for _, p := range a.opts.IgnorePorts {
		if p == port {
			return true
		}
	}
	return false
}

// Handler serves GET /shutdown/wait (Envoy's preStop hook: answers 200
// when the drain is over, or when the drain timeout and a second have
// passed without a drain, so a hook never outlives the grace period) and
// GET /healthz.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /shutdown/wait", func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(a.opts.DrainTimeout + time.Second)
		defer t.Stop()
		select {
		case <-a.done:
			fmt.Fprintln(w, "drained")
		case <-t.C:
			fmt.Fprintln(w, "drain timeout")
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	return mux
}

// Run serves Handler on l until terminate is closed (SIGTERM), then
// drains Envoy, keeps serving for linger so that a preStop hook still on
// its way gets its answer (not when Envoy is gone: no hook waits then),
// answers the hooks waiting, and returns. ctx ends everything at once.
func (a *Agent) Run(ctx context.Context, l net.Listener, terminate <-chan struct{}, linger time.Duration) error {
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case <-terminate:
		a.Drain(ctx)
		if !a.gone.Load() {
			sleep(ctx, linger)
		}
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	// Shutdown waits for the handlers in flight: the waiting hooks,
	// answered now that the drain is over.
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}
