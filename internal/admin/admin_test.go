package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/portico-dev/portico/internal/metrics"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type fakeSource struct {
	ready  atomic.Bool
	xds    map[string]io.WriterTo
	status io.WriterTo
}

func (f *fakeSource) Ready() bool { return f.ready.Load() }

func (f *fakeSource) DebugXDS(gw string) (io.WriterTo, bool) {
	v, ok := f.xds[gw]
	return v, ok
}

func (f *fakeSource) DebugStatus() io.WriterTo { return f.status }

// doc is a fixed document.
type doc string

func (d doc) WriteTo(w io.Writer) (int64, error) {
	n, err := io.WriteString(w, string(d))
	return int64(n), err
}

// failing fails before writing anything.
type failing struct{}

func (failing) WriteTo(io.Writer) (int64, error) { return 0, errors.New("cannot render") }

func newFake() *fakeSource {
	return &fakeSource{
		xds: map[string]io.WriterTo{
			"ns/gw":  doc("{\n  \"gateway\": \"ns/gw\",\n  \"version\": \"v1\",\n  \"clusters\": [\n    {\n      \"name\": \"ns/gw/c1\"\n    }\n  ]\n}\n"),
			"ns/bad": failing{},
		},
		status: doc(`[{"kind": "Gateway", "metadata": {"namespace": "ns", "name": "gw"}}]` + "\n"),
	}
}

func newDebug(src DebugSource) http.Handler {
	return NewDebug(DebugOptions{Source: src}).Handler()
}

func get(t *testing.T, h http.Handler, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

func TestProbes(t *testing.T) {
	src := newFake()
	h := New(nil, metrics.New(), src).Handler()

	if rec := get(t, h, http.MethodGet, "/healthz"); rec.Code != http.StatusOK || rec.Body.String() != "ok" {
		t.Errorf("/healthz = %d %q", rec.Code, rec.Body.String())
	}
	rec := get(t, h, http.MethodGet, "/readyz")
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "not ready") {
		t.Errorf("/readyz before ready = %d %q, want 503 with a reason", rec.Code, rec.Body.String())
	}
	src.ready.Store(true)
	if rec := get(t, h, http.MethodGet, "/readyz"); rec.Code != http.StatusOK || rec.Body.String() != "ok" {
		t.Errorf("/readyz when ready = %d %q", rec.Code, rec.Body.String())
	}
	if rec := get(t, h, http.MethodHead, "/healthz"); rec.Code != http.StatusOK {
		t.Errorf("HEAD /healthz = %d", rec.Code)
	}
	if rec := get(t, h, http.MethodPost, "/healthz"); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz = %d, want 405", rec.Code)
	}
	if rec := get(t, h, http.MethodGet, "/nope"); rec.Code != http.StatusNotFound {
		t.Errorf("/nope = %d, want 404", rec.Code)
	}
}

func TestMetrics(t *testing.T) {
	m := metrics.New()
	m.SetSnapshotVersion("ns/gw", "v1")
	m.XDSNacks.WithLabelValues("ns/gw", "type.googleapis.com/envoy.config.cluster.v3.Cluster").Inc()
	h := New(nil, m, newFake()).Handler()

	rec := get(t, h, http.MethodGet, "/metrics")
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics = %d", rec.Code)
	}
	body := rec.Body.String()
	for _, want := range []string{
		`portico_xds_snapshot_info{gateway="ns/gw",version="v1"} 1`,
		`portico_xds_nacks_total{gateway="ns/gw",type_url="type.googleapis.com/envoy.config.cluster.v3.Cluster"} 1`,
		`portico_xds_streams{kind="sotw"} 0`,
		"# TYPE portico_translation_duration_seconds histogram",
		"go_goroutines",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestDebugXDS(t *testing.T) {
	h := newDebug(newFake())

	if rec := get(t, h, http.MethodGet, "/debug/xds"); rec.Code != http.StatusBadRequest {
		t.Errorf("without gateway: %d, want 400", rec.Code)
	}
	if rec := get(t, h, http.MethodGet, "/debug/xds?gateway=ns/unknown"); rec.Code != http.StatusNotFound {
		t.Errorf("unknown gateway: %d, want 404", rec.Code)
	}
	if rec := get(t, h, http.MethodGet, "/debug/xds?gateway=ns/bad"); rec.Code != http.StatusInternalServerError {
		t.Errorf("view failing before its first byte: %d, want 500", rec.Code)
	}

	rec := get(t, h, http.MethodGet, "/debug/xds?gateway=ns%2Fgw")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("known gateway: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	body := rec.Body.String()
	if body != string(newFake().xds["ns/gw"].(doc)) || rec.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("response is not the document as written:\n%s", body)
	}
	var got struct {
		Gateway  string
		Version  string
		Clusters []map[string]string
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("decode: %v\n%s", err, body)
	}
	if got.Gateway != "ns/gw" || got.Version != "v1" || got.Clusters[0]["name"] != "ns/gw/c1" {
		t.Errorf("decoded %+v", got)
	}
}

func TestDebugStatus(t *testing.T) {
	h := newDebug(newFake())
	rec := get(t, h, http.MethodGet, "/debug/status")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("/debug/status = %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	var got []struct {
		Kind     string
		Metadata struct{ Namespace, Name string }
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if len(got) != 1 || got[0].Kind != "Gateway" || got[0].Metadata.Name != "gw" {
		t.Errorf("decoded %+v", got)
	}
}

func TestNilSource(t *testing.T) {
	h := New(nil, nil, nil).Handler()
	if rec := get(t, h, http.MethodGet, "/readyz"); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("/readyz = %d, want 503", rec.Code)
	}
	if rec := get(t, h, http.MethodGet, "/metrics"); rec.Code != http.StatusNotFound {
		t.Errorf("/metrics without metrics = %d, want 404", rec.Code)
	}
	h = newDebug(nil)
	if rec := get(t, h, http.MethodGet, "/debug/xds?gateway=ns/gw"); rec.Code != http.StatusNotFound {
		t.Errorf("/debug/xds = %d, want 404", rec.Code)
	}
	if rec := get(t, h, http.MethodGet, "/debug/status"); rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != "[]" {
		t.Errorf("/debug/status = %d %q", rec.Code, rec.Body.String())
	}
}

func TestHandleExtraEndpoint(t *testing.T) {
	s := NewDebug(DebugOptions{Source: newFake()})
	s.Handle("GET /debug/leader", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "leader")
	}))
	if rec := get(t, s.Handler(), http.MethodGet, "/debug/leader"); rec.Code != http.StatusOK || rec.Body.String() != "leader" {
		t.Errorf("/debug/leader = %d %q", rec.Code, rec.Body.String())
	}
	defer func() {
		if recover() == nil {
			t.Error("Handle of a path outside /debug/ did not panic")
		}
	}()
	s.Handle("GET /metrics2", http.NotFoundHandler())
}

func TestServe(t *testing.T) {
	src := newFake()
	src.ready.Store(true)
	s := New(nil, metrics.New(), src)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, lis) }()

	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + lis.Addr().String() + "/readyz")
	if err != nil {
		cancel()
		<-served
		t.Fatalf("GET /readyz: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Errorf("/readyz = %d %q", resp.StatusCode, body)
	}
	client.CloseIdleConnections()

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	if _, err := client.Get("http://" + lis.Addr().String() + "/healthz"); err == nil {
		t.Error("server still answering after shutdown")
	}
}

func TestServeReturnsListenerError(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := New(nil, nil, nil).Serve(ctx, lis); err == nil {
		t.Fatal("Serve on a closed listener returned nil")
	}
}

func TestProfilingOffByDefault(t *testing.T) {
	h := newDebug(newFake())
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1", "/debug/pprof/cmdline", "/debug/pprof/trace"} {
		if rec := get(t, h, http.MethodGet, p); rec.Code != http.StatusNotFound {
			t.Errorf("%s without profiling = %d, want 404", p, rec.Code)
		}
	}
}

func TestProfiling(t *testing.T) {
	h := NewDebug(DebugOptions{Source: newFake(), Profiling: true}).Handler()
	for _, tc := range []struct {
		method, path, want string
	}{
		{http.MethodGet, "/debug/pprof/", "goroutine"},
		{http.MethodGet, "/debug/pprof/goroutine?debug=1", "goroutine profile:"},
		{http.MethodGet, "/debug/pprof/heap?debug=1", "heap profile:"},
		{http.MethodGet, "/debug/pprof/cmdline", ""},
		{http.MethodGet, "/debug/pprof/symbol", "num_symbols:"},
		{http.MethodPost, "/debug/pprof/symbol", "num_symbols:"},
	} {
		rec := get(t, h, tc.method, tc.path)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s %s = %d, want 200 containing %q:\n%.300s", tc.method, tc.path, rec.Code, tc.want, rec.Body.String())
		}
	}
	if rec := get(t, h, http.MethodGet, "/debug/pprof/nope"); rec.Code != http.StatusNotFound {
		t.Errorf("unknown profile = %d, want 404", rec.Code)
	}
	// The other endpoints are unchanged.
	if rec := get(t, h, http.MethodGet, "/debug/status"); rec.Code != http.StatusOK {
		t.Errorf("/debug/status with profiling = %d", rec.Code)
	}
}

// A CPU profile and a trace, taken through a served listener (the server's
// timeouts apply), come back as pprof/trace data.
func TestProfilingServed(t *testing.T) {
	s := NewDebug(DebugOptions{Source: newFake(), Profiling: true})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, lis) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	for _, tc := range []struct{ path, ctype string }{
		{"/debug/pprof/profile?seconds=1", "application/octet-stream"},
		{"/debug/pprof/trace?seconds=0.2", "application/octet-stream"},
		{"/debug/pprof/allocs", "application/octet-stream"},
	} {
		resp, err := client.Get("http://" + lis.Addr().String() + tc.path)
		if err != nil {
			t.Fatalf("GET %s: %v", tc.path, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != tc.ctype || len(body) == 0 {
			t.Errorf("GET %s = %d %s, %d bytes, err %v", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), len(body), err)
		}
		// pprof profiles are gzipped protobufs.
		if strings.Contains(tc.path, "trace") || len(body) < 2 {
			continue
		}
		if body[0] != 0x1f || body[1] != 0x8b {
			t.Errorf("GET %s: not a gzipped profile: % x", tc.path, body[:2])
		}
	}
}
