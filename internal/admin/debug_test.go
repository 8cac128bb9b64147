package admin

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/metrics"
)

const waitFor = 10 * time.Second // every wait is bounded by this

// The admin server serves probes and metrics and nothing of /debug; the
// debug server serves /debug and no probes or metrics.
func TestAdminAndDebugAreSplit(t *testing.T) {
	src := newFake()
	src.ready.Store(true)
	s := New(nil, metrics.New(), src)
	d := NewDebug(DebugOptions{Source: src, Profiling: true})
	d.Handle("GET /debug/leader", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	for _, p := range []string{"/debug/xds?gateway=ns/gw", "/debug/status", "/debug/leader", "/debug/pprof/", "/debug/pprof/heap"} {
		if rec := get(t, s.Handler(), http.MethodGet, p); rec.Code != http.StatusNotFound {
			t.Errorf("admin server: GET %s = %d, want 404", p, rec.Code)
		}
		if rec := get(t, d.Handler(), http.MethodGet, p); rec.Code != http.StatusOK {
			t.Errorf("debug server: GET %s = %d, want 200", p, rec.Code)
		}
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if rec := get(t, s.Handler(), http.MethodGet, p); rec.Code != http.StatusOK {
			t.Errorf("admin server: GET %s = %d, want 200", p, rec.Code)
		}
		if rec := get(t, d.Handler(), http.MethodGet, p); rec.Code != http.StatusNotFound {
			t.Errorf("debug server: GET %s = %d, want 404", p, rec.Code)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want bool
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 19001}, true},
		{&net.TCPAddr{IP: net.IPv4(127, 1, 2, 3)}, true},
		{&net.TCPAddr{IP: net.IPv6loopback}, true},
		{&net.TCPAddr{IP: net.IPv4zero}, false},
		{&net.TCPAddr{IP: net.IPv6unspecified}, false},
		{&net.TCPAddr{}, false},
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1)}, false},
		{&net.UnixAddr{Name: "/tmp/s", Net: "unix"}, false},
		{nil, false},
	} {
		if got := IsLoopback(tc.addr); got != tc.want {
			t.Errorf("IsLoopback(%v) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// serveDebug serves d on lis until the test ends.
func serveDebug(t *testing.T, d *Debug, lis net.Listener) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(waitFor):
			t.Error("Serve did not return")
		}
	})
	_, port, _ := net.SplitHostPort(lis.Addr().String())
	return "127.0.0.1:" + port
}

// tokenAuth accepts the bearer token "ok".
func tokenAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer ok" {
			text(w, http.StatusUnauthorized, "no")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Off loopback, a debug server refuses to serve at all unless it
// authenticates over TLS, or is explicitly insecure.
func TestDebugRefusesNonLoopbackWithoutAuth(t *testing.T) {
	for name, opts := range map[string]DebugOptions{
		"no authentication":      {Source: newFake()},
		"authentication, no TLS": {Source: newFake(), Auth: tokenAuth},
		"TLS, no authentication": {Source: newFake(), TLS: &tls.Config{}},
	} {
		lis, err := net.Listen("tcp", ":0") // every interface
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		err = NewDebug(opts).Serve(ctx, lis)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
			t.Fatalf("%s: Serve on %s = %v, want a refusal", name, lis.Addr(), err)
		}
		if c, err := net.DialTimeout("tcp", lis.Addr().String(), time.Second); err == nil {
			c.Close()
			t.Errorf("%s: the refused listener still accepts connections", name)
		}
	}

	tlsConfig, caPEM, err := SelfSignedTLS()
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("no CA in SelfSignedTLS's PEM")
	}
	for name, opts := range map[string]DebugOptions{
		"insecure":           {Source: newFake(), Insecure: true},
		"authentication+TLS": {Source: newFake(), Auth: tokenAuth, TLS: tlsConfig},
	} {
		t.Run(name, func(t *testing.T) {
			lis, err := net.Listen("tcp", ":0")
			if err != nil {
				t.Fatal(err)
			}
			addr := serveDebug(t, NewDebug(opts), lis)
			c := &http.Client{Timeout: waitFor, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
			defer c.CloseIdleConnections()
			scheme := "http"
			if opts.TLS != nil {
				scheme = "https"
			}
			code := func(token string) int {
				t.Helper()
				req, _ := http.NewRequest(http.MethodGet, scheme+"://"+addr+"/debug/status", nil)
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			if opts.Auth == nil {
				if got := code(""); got != http.StatusOK {
					t.Errorf("insecure: %d, want 200", got)
				}
				return
			}
			if got := code(""); got != http.StatusUnauthorized {
				t.Errorf("without a token: %d, want 401", got)
			}
			if got := code("ok"); got != http.StatusOK {
				t.Errorf("with the token: %d, want 200", got)
			}
			// Plain HTTP gets no answer from a TLS server.
			resp, err := c.Get("http://" + addr + "/debug/status")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					t.Error("the TLS server answered plain HTTP with 200")
				}
			}
		})
	}
}

// blocking is a view that writes a first piece, tells entered, and waits
// for release before writing the rest.
type blocking struct {
	first   []byte
	entered chan struct{}
	release chan struct{}
}

func (b *blocking) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b.first)
	b.entered <- struct{}{}
	if err != nil {
		return int64(n), err
	}
	<-b.release
	m, err := io.WriteString(w, "]\n")
	return int64(n + m), err
}

// At most MaxInFlight requests are served at once: while two are blocked
// in the handler a third is refused at once with 429 and Retry-After, and
// once they finish requests are served again. The slots are taken after
// authentication: a refused request never takes one.
func TestDebugBoundsRequestsInFlight(t *testing.T) {
	b := &blocking{first: []byte("["), entered: make(chan struct{}, 4), release: make(chan struct{})}
	src := &fakeSource{xds: map[string]io.WriterTo{"ns/slow": b, "ns/gw": doc("{}\n")}, status: doc("[]\n")}
	var wg sync.WaitGroup
	d := NewDebug(DebugOptions{Source: src, MaxInFlight: 2, Auth: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "" {
				text(w, http.StatusUnauthorized, "no")
				return
			}
			next.ServeHTTP(w, r)
		})
	}})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := serveDebug(t, d, lis)
	client := &http.Client{Timeout: waitFor}
	defer client.CloseIdleConnections()
	do := func(path string, auth bool) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if auth {
			req.Header.Set("Authorization", "Bearer x")
		}
		return client.Do(req)
	}

	type result struct {
		code int
		body string
		err  error
	}
	results := make(chan result, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := do("/debug/xds?gateway=ns/slow", true)
			if err != nil {
				results <- result{err: err}
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- result{resp.StatusCode, string(body), err}
		}()
	}
	for i := range 2 {
		select {
		case <-b.entered:
		case r := <-results:
			t.Fatalf("request %d finished before it was released: %+v", i, r)
		case <-time.After(waitFor):
			t.Fatalf("only %d requests reached the handler", i)
		}
	}
	// Two in the handler: the next is refused, whatever its path.
	for _, path := range []string{"/debug/xds?gateway=ns/gw", "/debug/status"} {
		resp, err := do(path, true)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("third request %s = %d (Retry-After %q) %q, want 429 with Retry-After 1",
				path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	// Unauthenticated requests are answered by the auth layer, not refused
	// for lack of a slot.
	if resp, err := do("/debug/status", false); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unauthenticated request while full = %v, %v; want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	close(b.release)
	wg.Wait()
	for range 2 {
		r := <-results
		if r.err != nil || r.code != http.StatusOK || r.body != "[]\n" {
			t.Errorf("released request = %+v, want 200 []", r)
		}
	}
	if resp, err := do("/debug/xds?gateway=ns/gw", true); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("request after release = %v, %v; want 200", resp, err)
	} else {
		resp.Body.Close()
	}
}

// The response is streamed: the client reads the first part of a document
// while the view is still writing it (nothing buffers the whole), and a
// view that fails after its first bytes aborts the response instead of
// ending it like a whole document.
func TestDebugStreams(t *testing.T) {
	first := bytes.Repeat([]byte(`"x",`), 64<<10) // 256 KiB, past any buffer
	first = append([]byte("["), first...)
	b := &blocking{first: first, entered: make(chan struct{}, 1), release: make(chan struct{})}
	src := &fakeSource{xds: map[string]io.WriterTo{"ns/big": b, "ns/broken": brokenAfter{first}}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := serveDebug(t, NewDebug(DebugOptions{Source: src}), lis)
	client := &http.Client{Timeout: waitFor}
	defer client.CloseIdleConnections()

	resp, err := client.Get("http://" + addr + "/debug/xds?gateway=ns/big")
	if err != nil {
		close(b.release)
		t.Fatal(err)
	}
	// The view has not finished (it waits for release), yet the client
	// gets the status and the first 200 KiB.
	head := make([]byte, 200<<10)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		close(b.release)
		t.Fatalf("reading the first part while the view writes: %v", err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" || !bytes.Equal(head, first[:len(head)]) {
		t.Errorf("streamed response: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	<-b.entered
	close(b.release)
	rest, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(head)+len(rest) != len(first)+2 {
		t.Errorf("rest of the document: %d bytes, %v", len(rest), err)
	}

	resp, err = client.Get("http://" + addr + "/debug/xds?gateway=ns/broken")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("a view failing mid-document: read error %v, want an unexpected EOF", err)
	}
	// The slot of the aborted request was released.
	resp, err = client.Get("http://" + addr + "/debug/xds?gateway=ns/big")
	if err != nil {
		t.Fatal(err)
	}
	<-b.entered
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// brokenAfter writes its bytes, then fails.
type brokenAfter struct{ first []byte }

func (b brokenAfter) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b.first)
	if err != nil {
		return int64(n), err
	}
	return int64(n), fmt.Errorf("resource 7: cannot render")
}
