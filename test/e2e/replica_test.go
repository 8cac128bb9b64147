package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/controller"
)

// writeCounter counts a replica's writes to the API server by resource.
type writeCounter struct {
	mu     sync.Mutex
	counts map[string]int // "deployments", "services", …
	total  atomic.Int64
}

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return rtFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode < 300 && req.Method != http.MethodGet {
			res := resourceOf(req.URL.Path)
			w.mu.Lock()
			w.counts[res]++
			w.mu.Unlock()
			w.total.Add(1)
		}
		return resp, err
	})
}

// infraWrites is the number of writes on provisioned kinds.
func (w *writeCounter) infraWrites() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts["deployments"] + w.counts["services"] + w.counts["configmaps"] + w.counts["serviceaccounts"] +
		w.counts["poddisruptionbudgets"] + w.counts["horizontalpodautoscalers"]
}

// resourceOf extracts the resource of an API path:
// /apis/apps/v1/namespaces/x/deployments/y → "deployments".
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "namespaces" && i+2 < len(parts) {
			return parts[i+2]
		}
	}
	if len(parts) > 0 {
		return parts[len(parts)-1]
	}
	return ""
}

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// replica is one in-process controller replica against the e2e cluster.
type replica struct {
	name   string
	c      *controller.Controller
	writes *writeCounter
	xds    string
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

// world is one test's controller name, GatewayClass name and Lease
// namespace, so tests do not see each other's objects as theirs.
type world struct {
	ns         string
	class      string
	controller string
}

func newWorld(t *testing.T) world {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	return world{ns: newNamespace(t), class: "portico-" + id, controller: "portico.dev/e2e-" + id}
}

func startReplica(t *testing.T, w world, name string) *replica {
	t.Helper()
	wc := &writeCounter{counts: map[string]int{}}
	cfg := restConfig()
	cfg.WrapTransport = wc.wrap
	cfg.QPS, cfg.Burst = 100, 200
	xl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	al, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := controller.New(controller.Options{
		RESTConfig:        cfg,
		Namespace:         w.ns,
		ControllerName:    w.controller,
		LeaderElectionID:  "portico-leader",
		Identity:          name,
		LeaseDuration:     3 * time.Second,
		RenewDeadline:     2 * time.Second,
		RetryPeriod:       300 * time.Millisecond,
		Debounce:          20 * time.Millisecond,
		MaxDelay:          200 * time.Millisecond,
		XDSListener:       xl,
		AdminListener:     al,
		Provision:         true,
		XDSTLS:            true,
		XDSExtraSANs:      []string{"127.0.0.1"},
		XDSServiceAddress: "portico-xds." + w.ns + ".svc:18000",
		Log: slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})).
			With("replica", name),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{name: name, c: c, writes: wc, xds: xl.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *replica) stop(t *testing.T) {
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("replica %s: %v", r.name, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("replica %s did not stop", r.name)
		}
	})
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	defer func() { _ = recover() }()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
