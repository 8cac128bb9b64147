package integration

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/portico-dev/portico/internal/controller"
	"github.com/portico-dev/portico/internal/proxysync"
)

// faults wraps a replica's transport to the API server: it counts the
// replica's status writes and can fail every request (a partition) or hang
// status writes (a slow API server).
type faults struct {
	statusWrites atomic.Int64 // successful PUT/PATCH on a status subresource
	failAll      atomic.Bool
	hangStatus   atomic.Bool
	mu           sync.Mutex
	release      chan struct{} // closed to let hung writes proceed
}

func newFaults() *faults { return &faults{release: make(chan struct{})} }

// Hang makes status writes block until Release.
func (f *faults) Hang() {
	f.mu.Lock()
	f.release = make(chan struct{})
	f.mu.Unlock()
	f.hangStatus.Store(true)
}

// Release lets hung and later status writes through.
func (f *faults) Release() {
	f.hangStatus.Store(false)
	f.mu.Lock()
	close(f.release)
	f.mu.Unlock()
}

func (f *faults) wrap(rt http.RoundTripper) http.RoundTripper {
	return rtFunc(func(req *http.Request) (*http.Response, error) {
		if f.failAll.Load() {
			return nil, errors.New("fault: partitioned from the API server")
		}
		isStatusWrite := (req.Method == http.MethodPut || req.Method == http.MethodPatch) &&
			strings.HasSuffix(req.URL.Path, "/status")
		if isStatusWrite && f.hangStatus.Load() {
			f.mu.Lock()
			ch := f.release
			f.mu.Unlock()
			select {
			case <-ch:
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
		}
		resp, err := rt.RoundTrip(req)
		if err == nil && isStatusWrite && resp.StatusCode < 300 {
			f.statusWrites.Add(1)
		}
		return resp, err
	})
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// replica is one running controller.
type replica struct {
	name   string
	c      *controller.Controller
	faults *faults
	xds    string // xDS address
	admin  string // admin address
	debug  string // debug address (/debug/leader)
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// Short lease timings keep HA tests fast; the relations between them are
// those of the defaults (15s/10s/2s).
const (
	testLease   = 3 * time.Second
	testRenew   = 2 * time.Second
	testRetry   = 300 * time.Millisecond
	leaseName   = "portico-leader"
	leaseNSBase = "portico-system"
)

type replicaOpts struct {
	leaseNamespace string
	controllerName string
	// peers, when set, lists the other replicas for the proxy-sync
	// aggregation.
	peers func(context.Context) ([]proxysync.Peer, error)
}

func (f *fixture) opts() replicaOpts {
	return replicaOpts{leaseNamespace: f.ns, controllerName: f.controller}
}

// startReplica starts a controller replica with its own client, identity
// and listeners. It is stopped (gracefully) when the test ends.
func startReplica(t *testing.T, name string, o replicaOpts) *replica {
	t.Helper()
	f := newFaults()
	cfg := rest.CopyConfig(restCfg)
	cfg.WrapTransport = f.wrap
	cfg.QPS, cfg.Burst = 200, 400
	xl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	al, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := controller.New(controller.Options{
		RESTConfig:       cfg,
		Namespace:        o.leaseNamespace,
		ControllerName:   o.controllerName,
		LeaderElectionID: leaseName,
		Identity:         name,
		LeaseDuration:    testLease,
		RenewDeadline:    testRenew,
		RetryPeriod:      testRetry,
		StatusWorkers:    4,
		Debounce:         20 * time.Millisecond,
		MaxDelay:         200 * time.Millisecond,
		XDSListener:      xl,
		AdminListener:    al,
		DebugListener:    dl,
		ProxySync:        controller.ProxySync{Peers: o.peers, Interval: 200 * time.Millisecond},
		Log:              testLogger(t, name),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{name: name, c: c, faults: f, xds: xl.Addr().String(), admin: al.Addr().String(), debug: dl.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels the replica and waits for Run to return. It may be called
// more than once.
func (r *replica) stop(t *testing.T) {
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("replica %s: %v", r.name, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("replica %s did not stop within 30s", r.name)
		}
	})
}

// testLogger writes a replica's logs to the test log at warn level and
// above (info with PORTICO_TEST_VERBOSE).
func testLogger(t *testing.T, name string) *slog.Logger {
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: level})).With("replica", name)
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	defer func() { _ = recover() }() // a log line after the test ended
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// eventually polls cond every 25ms until it is true or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		if cond() {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}
