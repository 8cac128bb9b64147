package faultproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// upstream is a TLS server standing in for kube-apiserver: /stream writes a
// line every 20ms until the client leaves; everything else answers its
// method and path.
type upstream struct {
	srv  *httptest.Server
	hits atomic.Int64
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		if r.URL.Path == "/stream" {
			for i := 0; ; i++ {
				if _, err := fmt.Fprintf(w, "event %d\n", i); err != nil {
					return
				}
				http.NewResponseController(w).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%s %s", r.Method, r.URL.Path)
	}))
	u.srv.EnableHTTP2 = true
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	return u
}

func startProxy(t *testing.T, u *upstream) (*Proxy, *x509.CertPool) {
	t.Helper()
	cert, caPEM, err := SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(u.srv.URL)
	tr := u.srv.Client().Transport.(*http.Transport).Clone()
	tr.ForceAttemptHTTP2 = true
	p, err := Start(Config{Upstream: target, Transport: tr, Certificate: cert})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(); tr.CloseIdleConnections() })
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return p, pool
}

func client(t *testing.T, pool *x509.CertPool, h2 bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: h2}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func do(c *http.Client, ctx context.Context, method, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader("{}"))
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFaults(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			u := newUpstream(t)
			p, pool := startProxy(t, u)
			c := client(t, pool, h2)
			ctx := context.Background()
			status := p.URL() + "/apis/gateway.networking.k8s.io/v1/namespaces/ns/httproutes/r1/status"

			// Pass-through, classified.
			code, body, err := do(c, ctx, http.MethodPut, status)
			if err != nil || code != 200 || body != "PUT /apis/gateway.networking.k8s.io/v1/namespaces/ns/httproutes/r1/status" {
				t.Fatalf("pass-through: %d %q %v", code, body, err)
			}
			// The handler finishes the record just after the response is out.
			waitFor(t, func() bool { return p.Count(func(r *Record) bool { return r.InFlight() }) == 0 })
			recs := p.Records(nil)
			if len(recs) != 1 || recs[0].Class != ClassStatusWrite || recs[0].Resource != "httproutes" || recs[0].Name != "r1" ||
				recs[0].Namespace != "ns" || recs[0].Code != 200 || recs[0].Forwarded.IsZero() || recs[0].InFlight() {
				t.Fatalf("record = %+v", recs)
			}

			// Delay.
			f, err := p.Add(Rule{Method: "^GET$", Path: "/leases/", Action: Delay, Delay: 150 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if code, _, err := do(c, ctx, http.MethodGet, p.URL()+"/apis/coordination.k8s.io/v1/namespaces/ns/leases/l"); err != nil || code != 200 {
				t.Fatalf("delayed: %d %v", code, err)
			}
			if d := time.Since(start); d < 150*time.Millisecond || f.Hits() != 1 {
				t.Fatalf("delay: took %s, hits %d", d, f.Hits())
			}
			f.Remove()

			// Hang until removed; a client that gives up is not forwarded.
			f, _ = p.Add(Rule{Method: "PUT|PATCH", Path: "/status$", Action: Hang})
			hits := u.hits.Load()
			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			if _, _, err := do(c, short, http.MethodPut, status); err == nil {
				t.Fatal("hung request returned")
			}
			cancel()
			waitFor(t, func() bool { return p.Count(func(r *Record) bool { return r.InFlight() }) == 0 })
			done := make(chan error, 1)
			go func() {
				code, _, err := do(c, ctx, http.MethodPut, status)
				if err == nil && code != 200 {
					err = fmt.Errorf("code %d", code)
				}
				done <- err
			}()
			waitFor(t, func() bool {
				return p.Count(func(r *Record) bool { return r.InFlight() && r.Fault == "hang" }) == 1
			})
			if u.hits.Load() != hits {
				t.Fatal("hung request reached the server")
			}
			f.Remove()
			if err := <-done; err != nil {
				t.Fatalf("released request: %v", err)
			}
			if u.hits.Load() != hits+1 {
				t.Fatalf("server hits %d, want %d (the abandoned request must not be forwarded): %+v", u.hits.Load(), hits+1, p.Records(nil))
			}

			// Reset and Fail never reach the server; Drop does.
			for _, tc := range []struct {
				action  Action
				wantErr bool
				code    int
				reached bool
			}{{Reset, true, 0, false}, {Fail, false, 503, false}, {Drop, true, 0, true}} {
				f, _ := p.Add(Rule{Path: "/status$", Action: tc.action})
				hits := u.hits.Load()
				code, _, err := do(c, ctx, http.MethodPut, status)
				if (err != nil) != tc.wantErr || code != tc.code {
					t.Errorf("%s: code %d err %v", tc.action, code, err)
				}
				if reached := u.hits.Load() > hits; reached != tc.reached {
					t.Errorf("%s: reached server = %v", tc.action, reached)
				}
				f.Remove()
			}
			// Unmatched requests still pass while rules are active.
			f, _ = p.Add(Rule{Path: "/nothing", Action: Fail})
			if code, _, err := do(c, ctx, http.MethodGet, p.URL()+"/api/v1/namespaces/ns/pods"); err != nil || code != 200 {
				t.Fatalf("unmatched: %d %v", code, err)
			}
			f.Remove()
		})
	}
}

func TestPartition(t *testing.T) {
	u := newUpstream(t)
	p, pool := startProxy(t, u)
	c := client(t, pool, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A stream delivers, goes silent in a blackhole partition, resumes
	// after it heals.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+"/stream", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 1000)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				lines <- string(buf[:n])
			}
			if err != nil {
				close(lines)
				return
			}
		}
	}()
	<-lines
	p.Partition(Blackhole)
	time.Sleep(50 * time.Millisecond) // bytes in flight before the partition
	for len(lines) > 0 {
		<-lines
	}
	select {
	case l := <-lines:
		t.Fatalf("stream delivered %q during the partition", l)
	case <-time.After(200 * time.Millisecond):
	}
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	if _, _, err := do(c, short, http.MethodGet, p.URL()+"/api/v1/pods"); err == nil {
		t.Fatal("request answered during a blackhole partition")
	}
	cancelShort()
	p.Heal()
	select {
	case <-lines:
	case <-time.After(2 * time.Second):
		t.Fatal("stream did not resume after the partition healed")
	}

	// Refuse closes open connections and refuses new requests.
	p.Partition(Refuse)
	if _, _, err := do(c, ctx, http.MethodGet, p.URL()+"/api/v1/pods"); err == nil {
		t.Fatal("request answered while refusing")
	}
	p.Heal()
	waitFor(t, func() bool {
		code, _, err := do(c, ctx, http.MethodGet, p.URL()+"/api/v1/pods")
		return err == nil && code == 200
	})
	cancel()
	waitFor(t, func() bool { return p.Count(func(r *Record) bool { return r.InFlight() }) == 0 })
}

func TestParsePath(t *testing.T) {
	for path, want := range map[string][4]string{
		"/api/v1/namespaces/ns/pods/p":                                     {"", "pods", "p", ""},
		"/api/v1/namespaces/ns":                                            {"", "namespaces", "ns", ""},
		"/apis/gateway.networking.k8s.io/v1/gatewayclasses/gc/status":      {"gateway.networking.k8s.io", "gatewayclasses", "gc", "status"},
		"/apis/coordination.k8s.io/v1/namespaces/ns/leases/portico-leader": {"coordination.k8s.io", "leases", "portico-leader", ""},
	} {
		r := &Record{Path: path}
		parsePath(r)
		if got := [4]string{r.Group, r.Resource, r.Name, r.Subresource}; got != want {
			t.Errorf("%s: %v, want %v", path, got, want)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
