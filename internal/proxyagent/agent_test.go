package proxyagent

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/testenv"
)

// bootstrap is an Envoy with one HTTP listener answering 200 itself.
func bootstrap(port int) string {
	return fmt.Sprintf(`
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: 0}}
static_resources:
  listeners:
  - name: main
    address: {socket_address: {address: 127.0.0.1, port_value: %d}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: main
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {prefix: "/"}
                direct_response: {status: 200, body: {inline_string: "ok"}}
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`, port)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEnvoy runs Envoy and returns its admin address and listener address
// once it is LIVE.
func startEnvoy(t *testing.T) (admin, listener string) {
	port := freePort(t)
	e := testenv.StartEnvoy(t, testenv.EnvoyOptions{Bootstrap: bootstrap(port), Args: []string{"--drain-time-s", "30", "--drain-strategy", "immediate"}})
	if err := e.WaitLive(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	admin, err := e.AdminAddress()
	if err != nil {
		t.Fatal(err)
	}
	return admin, fmt.Sprintf("127.0.0.1:%d", port)
}

func readyCode(t *testing.T, admin string) int {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitFor polls cond every 20 ms until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestDrain: the drain fails Envoy's readiness at once, keeps serving old
// and new connections while telling them to close, lasts at least
// MinDrain, and ends when the last connection is gone; /shutdown/wait
// answers then.
func TestDrain(t *testing.T) {
	admin, listener := startEnvoy(t)
	a, err := New(Options{AdminAddress: admin, DrainTimeout: 30 * time.Second, MinDrain: time.Second, Poll: 50 * time.Millisecond, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()

	// A keep-alive connection from before the drain.
	tr := &http.Transport{MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	get := func() *http.Response {
		t.Helper()
		resp, err := client.Get("http://" + listener + "/")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return resp
	}
	if resp := get(); resp.Close {
		t.Fatal("a response before the drain asks to close the connection")
	}
	if code := readyCode(t, admin); code != http.StatusOK {
		t.Fatalf("/ready before the drain = %d", code)
	}

	waited := make(chan string, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/shutdown/wait")
		if err != nil {
			waited <- err.Error()
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		waited <- strings.TrimSpace(string(body))
	}()

	start := time.Now()
	go a.Drain(context.Background())
	waitFor(t, 5*time.Second, "/ready to fail", func() bool { return readyCode(t, admin) == http.StatusServiceUnavailable })

	// The old connection is still served, and told to close.
	if resp := get(); !resp.Close {
		t.Error("a response on a draining proxy's keep-alive connection does not close it")
	}
	// A new connection is still accepted (load balancers are still
	// sending), and told to close.
	if resp := get(); !resp.Close {
		t.Error("a response on a new connection to a draining proxy does not close it")
	}
	if closed(a.Done()) {
		t.Fatalf("drain over after %s, before its minimum", time.Since(start))
	}
	select {
	case <-a.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the drain did not end with no connection left")
	}
	if el := time.Since(start); el < time.Second {
		t.Errorf("drain took %s, less than its minimum", el)
	}
	if got := <-waited; got != "drained" {
		t.Errorf("/shutdown/wait = %q", got)
	}
}

// TestDrainTimeout: a connection that never closes holds the drain until
// its timeout, no longer.
func TestDrainTimeout(t *testing.T) {
	admin, listener := startEnvoy(t)
	a, err := New(Options{AdminAddress: admin, DrainTimeout: 2 * time.Second, MinDrain: 100 * time.Millisecond, Poll: 50 * time.Millisecond, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	// Half a request: the connection is open and never finishes.
	c, err := net.Dial("tcp", listener)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "Envoy to count the connection", func() bool {
		n, err := a.connections(context.Background())
		return err == nil && n == 1
	})
	start := time.Now()
	a.Drain(context.Background())
	el := time.Since(start)
	if el < 2*time.Second || el > 5*time.Second {
		t.Errorf("drain with a stuck connection took %s, want its timeout (2s)", el)
	}
	// The connection was never cut by the drain itself.
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := bufio.NewReader(c).ReadByte(); err == nil || !isTimeout(err) {
		t.Errorf("the stuck connection was closed during the drain: %v", err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestIgnoredPorts: connections to ignored listener ports are not waited
// for; the admin listener's never are.
func TestIgnoredPorts(t *testing.T) {
	admin, listener := startEnvoy(t)
	_, portStr, _ := net.SplitHostPort(listener)
	var port int
	fmt.Sscan(portStr, &port)
	a, err := New(Options{AdminAddress: admin, DrainTimeout: 10 * time.Second, IgnorePorts: []int{port}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", listener)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := New(Options{AdminAddress: admin, DrainTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "Envoy to count the connection", func() bool {
		n, err := b.connections(context.Background())
		return err == nil && n == 1
	})
	if n, err := a.connections(context.Background()); err != nil || n != 0 {
		t.Errorf("connections with the listener's port ignored = %d, %v", n, err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{{AdminAddress: "nohost", DrainTimeout: time.Second}, {AdminAddress: "127.0.0.1:1"}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// TestDrainWithoutEnvoy: with nothing on the admin address (Envoy exited,
// or stopped with its Pod without a drain) the drain ends at once instead
// of holding the Pod for its timeout.
func TestDrainWithoutEnvoy(t *testing.T) {
	a, err := New(Options{AdminAddress: fmt.Sprintf("127.0.0.1:%d", freePort(t)), DrainTimeout: time.Minute, MinDrain: 5 * time.Second, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { a.Drain(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the drain waits although no Envoy runs")
	}
}
