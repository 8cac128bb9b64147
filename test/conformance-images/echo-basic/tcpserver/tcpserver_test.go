package tcpserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/gateway-api-conformance-images/internal/testcert"
)

var pod = Context{Namespace: "ns", Ingress: "gw", Service: "svc", Pod: "tcp-backend-1234", TCPPort: "3000", TLSPort: "8443"}

// start serves on loopback ports until the test ends and returns the plain
// and TLS addresses, and a function stopping the server and waiting for it.
func start(t *testing.T, cert testcert.Pair) (plainAddr, tlsAddr string, stop func()) {
	t.Helper()
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	secure, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{
		Context:   pod,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert.TLS}, NextProtos: []string{"echo"}},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, plain, secure) }()
	stopped := false
	stop = func() {
		t.Helper()
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return after its context ended")
		}
	}
	t.Cleanup(stop)
	return plain.Addr().String(), secure.Addr().String(), stop
}

type client struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func newClient(t *testing.T, conn net.Conn) *client {
	t.Helper()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &client{t: t, conn: conn, r: bufio.NewReader(conn)}
	if got := c.line(); got != WelcomeMessage {
		t.Fatalf("welcome: got %q, want %q", got, WelcomeMessage)
	}
	return c
}

func (c *client) line() string {
	c.t.Helper()
	s, err := c.r.ReadString('\n')
	if err != nil {
		c.t.Fatalf("reading a line: %v (got %q)", err, s)
	}
	return s
}

func (c *client) ask(cmd string) string {
	c.t.Helper()
	if _, err := io.WriteString(c.conn, cmd+"\n"); err != nil {
		c.t.Fatal(err)
	}
	return c.line()
}

func TestPlain(t *testing.T) {
	addr, _, _ := start(t, testcert.New(t, "tcp", "tcp.example.com"))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, conn)
	if got := c.ask("PING"); got != "PONG\n" {
		t.Errorf("PING: got %q", got)
	}
	if got := c.ask("IS_TLS"); got != "false\n" {
		t.Errorf("IS_TLS: got %q", got)
	}
	// Unknown lines get no answer: the next answer is PING's.
	if got := c.ask("HELLO\nPING"); got != "PONG\n" {
		t.Errorf("after an unknown command: got %q", got)
	}
	line := c.ask("TEST")
	var raw map[string]any
	if err := json.Unmarshal([]byte(line), &raw); err != nil {
		t.Fatalf("TEST: %v in %q", err, line)
	}
	want := map[string]any{
		"namespace": "ns", "ingress": "gw", "service": "svc", "pod": "tcp-backend-1234",
		"tcpport": "3000", "tlsport": "8443", "isTLS": false,
	}
	if len(raw) != len(want) {
		t.Errorf("TEST keys: got %v, want %v", raw, want)
	}
	for k, v := range want {
		if raw[k] != v {
			t.Errorf("TEST %s: got %v, want %v", k, raw[k], v)
		}
	}
}

func TestTLS(t *testing.T) {
	cert := testcert.New(t, "tcp", "tcp.example.com")
	_, addr, _ := start(t, cert)
	conn, err := tls.Dial("tcp", addr, &tls.Config{
		RootCAs:    cert.Pool(),
		ServerName: "tcp.example.com",
		NextProtos: []string{"echo"},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, conn)
	if got := c.ask("IS_TLS"); got != "true\n" {
		t.Errorf("IS_TLS: got %q", got)
	}
	if got := c.ask("PING"); got != "PONG\n" {
		t.Errorf("PING: got %q", got)
	}
	var a TCPAssertions
	if err := json.Unmarshal([]byte(c.ask("TEST")), &a); err != nil {
		t.Fatal(err)
	}
	if a.Context != pod || !a.IsTLS || a.TLSAssertion == nil {
		t.Fatalf("TEST: got %+v", a)
	}
	st := conn.ConnectionState()
	want := TLSAssertions{
		Version:            tls.VersionName(st.Version),
		ServerName:         "tcp.example.com",
		NegotiatedProtocol: "echo",
		Curves:             st.CurveID.String(),
		CipherSuite:        tls.CipherSuiteName(st.CipherSuite),
	}
	if *a.TLSAssertion != want {
		t.Errorf("TEST tls: got %+v, want %+v", *a.TLSAssertion, want)
	}
	if want.Version != "TLS 1.3" || want.Curves == "" || want.CipherSuite == "" {
		t.Errorf("unexpected session %+v", want)
	}
}

func TestStopClosesConnections(t *testing.T) {
	addr, _, stop := start(t, testcert.New(t, "tcp"))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, conn)
	if got := c.ask("PING"); got != "PONG\n" {
		t.Fatalf("PING: got %q", got)
	}
	stop()
	if rest, err := c.r.ReadString('\n'); err == nil {
		t.Errorf("connection still open after stop, read %q", rest)
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Error("listener still accepting after stop")
	}
}

func TestServeNeedsTLSConfig(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := (&Server{}).Serve(context.Background(), nil, l); err == nil || !strings.Contains(err.Error(), "TLS") {
		t.Errorf("got %v, want an error about TLS", err)
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("TCP_PORT", "")
	t.Setenv("TLS_PORT", "9443")
	t.Setenv("TLS_SERVER_CERT", "/c")
	t.Setenv("TLS_SERVER_PRIV_KEY", "/k")
	t.Setenv("NAMESPACE", "ns")
	t.Setenv("INGRESS_NAME", "gw")
	t.Setenv("SERVICE_NAME", "svc")
	t.Setenv("POD_NAME", "p")
	cfg, err := ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	want := Config{TCPPort: 3000, TLSPort: 9443, TLSServerCert: "/c", TLSServerPrivKey: "/k",
		Context: Context{Namespace: "ns", Ingress: "gw", Service: "svc", Pod: "p"}}
	if cfg != want {
		t.Errorf("got %+v, want %+v", cfg, want)
	}
	t.Setenv("TCP_PORT", "http")
	if _, err := ConfigFromEnv(); err == nil {
		t.Error("a non-numeric TCP_PORT was accepted")
	}
}
