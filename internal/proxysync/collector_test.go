package proxysync_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/admin"
	"github.com/portico-dev/portico/internal/proxysync"
)

// source is a replica's report that the test changes.
type source struct {
	mu  sync.Mutex
	rep proxysync.Report
	rev uint64
}

func (s *source) ProxyReport(replica string) proxysync.Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rep
	r.Replica, r.Time = replica, time.Now()
	return r
}

func (s *source) ProxyRevision() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

func (s *source) set(r proxysync.Report) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rep, s.rev = r, s.rev+1
}

func acked(url string) proxysync.Type {
	r := &proxysync.Response{Version: "v1", Nonce: "1", Time: time.Now()}
	return proxysync.Type{TypeURL: url, Requested: r.Time, Sent: r, Acked: r}
}

const ldsURL = "type.googleapis.com/envoy.config.listener.v3.Listener"

// TestCollector: the leader's own report and a follower's, fetched over
// HTTP from the follower's /debug/proxies, make one condition per
// Gateway; an unchanged follower answers 304; an unreachable one is left
// out.
func TestCollector(t *testing.T) {
	gw := proxysync.GatewayVersion{Gateway: "ns/a", Version: "g1", Since: time.Now().Add(-time.Minute)}
	local := &source{rep: proxysync.Report{Gateways: []proxysync.GatewayVersion{gw}}}
	follower := &source{}
	follower.set(proxysync.Report{Gateways: []proxysync.GatewayVersion{gw}, Proxies: []proxysync.Proxy{{
		NodeID: "p1", Gateway: "ns/a", Replica: "r2", Stream: "delta/1", Connected: time.Now(), Types: []proxysync.Type{acked(ldsURL)},
	}}})
	var full, notModified atomic.Int32
	h := admin.ProxiesHandler("r2", follower)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		rec := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if rec.code == http.StatusNotModified {
			notModified.Add(1)
		} else {
			full.Add(1)
		}
	}))
	defer srv.Close()
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close() // refuses connections

	var got map[types.NamespacedName][]metav1.Condition
	col := proxysync.NewCollector(proxysync.CollectorConfig{
		Local: func() proxysync.Report { return local.ProxyReport("r1") },
		Peers: func(context.Context) ([]proxysync.Peer, error) {
			return []proxysync.Peer{{Name: "r2", URL: srv.URL}, {Name: "r3", URL: dead.URL}}, nil
		},
		Token: func() (string, error) { return "tok", nil },
		Sink:  func(c map[types.NamespacedName][]metav1.Condition) { got = c },
	})
	ctx := context.Background()
	col.Round(ctx)
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	if c := got[a]; len(c) != 1 || c[0].Type != proxysync.ConditionType || c[0].Status != metav1.ConditionTrue {
		t.Fatalf("conditions = %+v", got)
	}
	col.Round(ctx)
	if full.Load() != 1 || notModified.Load() != 1 {
		t.Errorf("fetches: %d full, %d not modified; want 1 and 1", full.Load(), notModified.Load())
	}

	// The follower's proxy NACKs: the next round says so.
	nacked := acked(ldsURL)
	nacked.Sent = &proxysync.Response{Version: "v2", Nonce: "2", Time: time.Now()}
	nacked.Nack = &proxysync.Nack{Version: "v2", Nonce: "2", Error: "bad listener", Time: time.Now()}
	follower.set(proxysync.Report{Gateways: []proxysync.GatewayVersion{gw}, Proxies: []proxysync.Proxy{{
		NodeID: "p1", Gateway: "ns/a", Replica: "r2", Stream: "delta/1", Connected: time.Now(), Types: []proxysync.Type{nacked},
	}}})
	col.Round(ctx)
	if c := got[a]; len(c) != 1 || c[0].Status != metav1.ConditionFalse || c[0].Reason != proxysync.ReasonRejected {
		t.Errorf("after the NACK: %+v", got[a])
	}
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// A peer that failed once and then hangs (a crashed replica's address
// that answers nothing) costs a round at most half the interval, not
// FetchTimeout: the round returns while the peer still hangs.
func TestCollectorDoesNotWaitForFailingPeer(t *testing.T) {
	var hang atomic.Bool
	release := make(chan struct{})
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hang.Load() {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer peer.Close()
	defer close(release)
	rounds := make(chan int, 10)
	col := proxysync.NewCollector(proxysync.CollectorConfig{
		Local: func() proxysync.Report { return proxysync.Report{Replica: "leader", Time: time.Now()} },
		Peers: func(context.Context) ([]proxysync.Peer, error) {
			return []proxysync.Peer{{Name: "b", URL: peer.URL}}, nil
		},
		Interval:     100 * time.Millisecond,
		FetchTimeout: time.Hour, // a round that waited for the hanging peer would never end
		Sink:         func(c map[types.NamespacedName][]metav1.Condition) { rounds <- len(c) },
	})
	ctx := context.Background()
	col.Round(ctx) // the peer fails: 503
	<-rounds
	hang.Store(true)
	done := make(chan struct{})
	go func() { col.Round(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the round waited for the hanging peer")
	}
	if n := <-rounds; n != 0 {
		t.Errorf("round conditions %d", n)
	}
}
