package httpserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"sigs.k8s.io/gateway-api-conformance-images/internal/testcert"
)

var pod = Context{Namespace: "ns", Ingress: "gw", Service: "infra-backend-v1", Pod: "infra-backend-v1-abc"}

// syncBuffer collects the request log.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type addrs struct {
	http, h2c, https string
	log              *syncBuffer
	stop             func()
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// start serves s on loopback ports until the test ends; HTTPS only when s
// has a TLS configuration.
func start(t *testing.T, s *Server) addrs {
	t.Helper()
	a := addrs{log: &syncBuffer{}}
	s.Log = a.log
	ls := Listeners{HTTP: listen(t), H2C: listen(t)}
	a.http, a.h2c = ls.HTTP.Addr().String(), ls.H2C.Addr().String()
	if s.TLSConfig != nil {
		ls.HTTPS = listen(t)
		a.https = ls.HTTPS.Addr().String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ls) }()
	var once sync.Once
	a.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Serve: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("Serve did not return after its context ended")
			}
		})
	}
	t.Cleanup(a.stop)
	return a
}

func get(t *testing.T, c *http.Client, url string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if h := header.Get("Host"); h != "" {
		req.Host = h
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func client() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}

func decode(t *testing.T, body []byte) RequestAssertions {
	t.Helper()
	var a RequestAssertions
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("%v in %s", err, body)
	}
	return a
}

func TestEcho(t *testing.T) {
	a := start(t, &Server{Context: pod, HTTPPort: "3000"})
	resp, body := get(t, client(), "http://"+a.http+"/some//path/?q=1&delay=20ms", http.Header{
		"Host":  {"echo.example.com"},
		"X-Foo": {"a", "b"},
	})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if v := resp.Header.Get("X-Content-Type-Options"); v != "nosniff" {
		t.Errorf("X-Content-Type-Options %q", v)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"headers", "host", "httpPort", "ingress", "method", "namespace", "path", "pod", "proto", "service"}; !slices.Equal(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
	got := decode(t, body)
	if got.Path != "/some//path/?q=1&delay=20ms" || got.Host != "echo.example.com" || got.Method != "GET" ||
		got.Proto != "HTTP/1.1" || got.HTTPPort != "3000" || got.Context != pod || got.TLS != nil {
		t.Errorf("echo %+v", got)
	}
	if !slices.Equal(got.Headers["X-Foo"], []string{"a", "b"}) {
		t.Errorf("headers %v", got.Headers)
	}
	if want := "Echoing back request made to /some//path/?q=1&delay=20ms to client (127.0.0.1:"; !strings.Contains(a.log.String(), want) {
		t.Errorf("log %q lacks %q", a.log.String(), want)
	}
}

func TestDelay(t *testing.T) {
	a := start(t, &Server{})
	began := time.Now()
	resp, body := get(t, client(), "http://"+a.http+"/?delay=100ms", nil)
	if resp.StatusCode != 200 || time.Since(began) < 100*time.Millisecond {
		t.Errorf("status %d after %v", resp.StatusCode, time.Since(began))
	}
	resp, body = get(t, client(), "http://"+a.http+"/?delay=soon", nil)
	var msg struct{ Message string }
	if resp.StatusCode != 500 || json.Unmarshal(body, &msg) != nil || msg.Message == "" {
		t.Errorf("bad delay: status %d, body %s", resp.StatusCode, body)
	}
}

func TestEchoSetHeader(t *testing.T) {
	a := start(t, &Server{})
	const set = "X-Header-Set:foo, x-lower-case:bar,X-Dup:1,X-Dup: 2,"
	resp, _ := get(t, client(), "http://"+a.http+"/", http.Header{"X-Echo-Set-Header": {set, "X-Second:3"}})
	for k, want := range map[string]string{"X-Header-Set": "foo", "X-Lower-Case": "bar", "X-Dup": "1,2", "X-Second": "3"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: got %q, want %q", k, got, want)
		}
	}
	// The names keep their case on the wire.
	conn, err := net.Dial("tcp", a.http)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\nX-Echo-Set-Header: %s\r\nConnection: close\r\n\r\n", set)
	raw, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("\r\nx-lower-case: bar\r\n")) || !bytes.Contains(raw, []byte("\r\nX-Dup: 1,2\r\n")) {
		t.Errorf("raw response lacks the headers as written:\n%s", raw)
	}
}

func TestHealthAndStatus(t *testing.T) {
	a := start(t, &Server{})
	c := client()
	for path, want := range map[string]int{
		"/health":          200,
		"//health":         200,
		"/status/503":      503,
		"/status/204":      204,
		"/status/99":       400,
		"/status/abc":      400,
		"/status/5000":     400,
		"/status/201?x=1":  201,
		"/statusquo/":      200, // echoed
		"/status/404/more": 400,
	} {
		resp, body := get(t, c, "http://"+a.http+path, nil)
		if resp.StatusCode != want {
			t.Errorf("%s: status %d, want %d", path, resp.StatusCode, want)
		}
		if path == "/health" && string(body) != "OK" {
			t.Errorf("/health body %q", body)
		}
	}
}

func TestRetryResponseCode(t *testing.T) {
	a := start(t, &Server{Context: pod})
	c := client()
	url := "http://" + a.http + "/retry/code-500?uuid=one&succeedAfter=2&responseCode=503"
	for i, want := range []int{503, 503, 200, 200} {
		resp, body := get(t, c, url, nil)
		if resp.StatusCode != want {
			t.Fatalf("attempt %d: status %d, want %d", i+1, resp.StatusCode, want)
		}
		if want == 200 && decode(t, body).Pod != pod.Pod {
			t.Errorf("attempt %d: no echo in %s", i+1, body)
		}
	}
	// Counts are kept per uuid.
	if resp, _ := get(t, c, "http://"+a.http+"/retry/x?uuid=two&succeedAfter=1&responseCode=500", nil); resp.StatusCode != 500 {
		t.Errorf("other uuid: status %d", resp.StatusCode)
	}
	// delayRetry delays failing attempts.
	began := time.Now()
	resp, _ := get(t, c, "http://"+a.http+"/retry/x?uuid=three&succeedAfter=1&responseCode=502&delayRetry=100ms", nil)
	if resp.StatusCode != 502 || time.Since(began) < 100*time.Millisecond {
		t.Errorf("delayRetry: status %d after %v", resp.StatusCode, time.Since(began))
	}
	for _, q := range []string{"succeedAfter=1", "uuid=four", "uuid=four&succeedAfter=x"} {
		if resp, _ := get(t, c, "http://"+a.http+"/retry/x?"+q, nil); resp.StatusCode != 400 {
			t.Errorf("%s: status %d, want 400", q, resp.StatusCode)
		}
	}
}

func TestRetryConnectionReset(t *testing.T) {
	a := start(t, &Server{})
	attempt := func() (string, error) {
		conn, err := net.Dial("tcp", a.http)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		fmt.Fprint(conn, "GET /retry/reset?uuid=r&succeedAfter=1 HTTP/1.1\r\nHost: x\r\n\r\n")
		line, err := bufio.NewReader(conn).ReadString('\n')
		return line, err
	}
	if line, err := attempt(); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("first attempt: got %q, %v; want a connection reset", line, err)
	}
	if line, err := attempt(); err != nil || line != "HTTP/1.1 200 OK\r\n" {
		t.Errorf("second attempt: got %q, %v", line, err)
	}
}

func TestH2C(t *testing.T) {
	a := start(t, &Server{HTTPPort: "3000"})
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	h2 := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Protocols: &protocols}}
	defer h2.CloseIdleConnections()
	resp, body := get(t, h2, "http://"+a.h2c+"/h2c//path?x=y", nil)
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Fatalf("prior knowledge: status %d over %s: %s", resp.StatusCode, resp.Proto, body)
	}
	if got := decode(t, body); got.Proto != "HTTP/2.0" || got.Path != "/h2c//path?x=y" || got.HTTPPort != "3000" {
		t.Errorf("prior knowledge echo %+v", got)
	}

	resp, body = get(t, client(), "http://"+a.h2c+"/", nil)
	if resp.StatusCode != 400 || string(body) != "Expected h2c request" {
		t.Errorf("HTTP/1.1: status %d, body %q", resp.StatusCode, body)
	}
	resp, body = get(t, client(), "http://"+a.h2c+"/", http.Header{"Upgrade": {"h2c"}, "Connection": {"Upgrade"}})
	if resp.StatusCode != 200 || decode(t, body).Proto != "HTTP/1.1" {
		t.Errorf("HTTP/1.1 asking for h2c: status %d, body %s", resp.StatusCode, body)
	}
	// The plain HTTP port does not speak h2c.
	if _, err := h2.Get("http://" + a.http + "/"); err == nil {
		t.Error("the HTTP port answered a prior-knowledge HTTP/2 request")
	}
}

func TestWebsocket(t *testing.T) {
	a := start(t, &Server{})
	ws, err := websocket.Dial("ws://"+a.http+"/ws", "", "http://gateway/TestWebsocket")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := ws.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, sent := range []frame{
		{[]byte("Websocket Support!"), websocket.TextFrame},
		{[]byte{1, 2, 3, 4, 5, 6, 7}, websocket.BinaryFrame},
	} {
		if err := frameCodec.Send(ws, &sent); err != nil {
			t.Fatal(err)
		}
		var got frame
		if err := frameCodec.Receive(ws, &got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.payload, sent.payload) || got.kind != sent.kind {
			t.Errorf("sent %v, got %v", sent, got)
		}
	}
	// Stopping the server closes open websockets.
	a.stop()
	var s string
	if err := websocket.Message.Receive(ws, &s); err == nil {
		t.Errorf("websocket still open after stop, read %q", s)
	}
}

func TestHTTPSClientCertificates(t *testing.T) {
	serverCert := testcert.New(t, "echo", "echo.example.com")
	trusted := testcert.New(t, "trusted client")
	untrusted := testcert.New(t, "untrusted client")
	certFile, keyFile := serverCert.Files(t)
	caFile, _ := trusted.Files(t)
	cfg, err := ServerTLSConfig(certFile, keyFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ClientAuth != tls.VerifyClientCertIfGiven {
		t.Errorf("ClientAuth %v", cfg.ClientAuth)
	}
	a := start(t, &Server{Context: pod, TLSConfig: cfg})
	httpsClient := func(cert *testcert.Pair) *http.Client {
		tc := &tls.Config{RootCAs: serverCert.Pool(), ServerName: "echo.example.com"}
		if cert != nil {
			// Present the certificate whatever CAs the server names
			// (tls.Config.Certificates would skip an untrusted one).
			tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				return &cert.TLS, nil
			}
		}
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: tc, ForceAttemptHTTP2: true, DisableKeepAlives: true,
		}}
	}
	for _, tc := range []struct {
		name  string
		cert  *testcert.Pair
		peers []string
	}{
		{"no client certificate", nil, nil},
		{"trusted client certificate", &trusted, []string{string(trusted.CertPEM)}},
	} {
		resp, body := get(t, httpsClient(tc.cert), "https://"+a.https+"/tls", nil)
		got := decode(t, body)
		if resp.StatusCode != 200 || got.TLS == nil {
			t.Fatalf("%s: status %d: %s", tc.name, resp.StatusCode, body)
		}
		if got.TLS.Version != "TLSv1.3" || got.TLS.ServerName != "echo.example.com" || got.TLS.NegotiatedProtocol != "h2" ||
			got.TLS.CipherSuite == "" || got.Proto != "HTTP/2.0" || got.Path != "/tls" {
			t.Errorf("%s: echo %+v, tls %+v", tc.name, got, *got.TLS)
		}
		if !slices.Equal(got.TLS.PeerCertificates, tc.peers) {
			t.Errorf("%s: peer certificates %q", tc.name, got.TLS.PeerCertificates)
		}
	}
	if resp, err := httpsClient(&untrusted).Get("https://" + a.https + "/"); err == nil {
		resp.Body.Close()
		t.Errorf("a client certificate from an unknown CA was accepted: status %d", resp.StatusCode)
	}

	// Without a client CA bundle, no certificate is asked for.
	cfg, err = ServerTLSConfig(certFile, keyFile, "")
	if err != nil || cfg.ClientAuth != tls.NoClientCert || cfg.ClientCAs != nil {
		t.Errorf("no client CA: %v, %v", cfg, err)
	}
	if cfg, err := ServerTLSConfig("", "", caFile); cfg != nil || err != nil {
		t.Errorf("no server certificate: %v, %v", cfg, err)
	}
}

func TestConfigFromEnv(t *testing.T) {
	for k, v := range map[string]string{
		"HTTP_PORT": "", "H2C_PORT": "4001", "HTTPS_PORT": "",
		"TLS_SERVER_CERT": "/c", "TLS_SERVER_PRIVKEY": "/k", "TLS_CLIENT_CACERTS": "/ca",
		"NAMESPACE": "ns", "INGRESS_NAME": "gw", "SERVICE_NAME": "svc", "POD_NAME": "p",
	} {
		t.Setenv(k, v)
	}
	cfg, err := ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	want := Config{HTTPPort: 3000, H2CPort: 4001, HTTPSPort: 8443, TLSServerCert: "/c", TLSServerPrivKey: "/k",
		TLSClientCACerts: "/ca", Context: Context{Namespace: "ns", Ingress: "gw", Service: "svc", Pod: "p"}}
	if cfg != want {
		t.Errorf("got %+v, want %+v", cfg, want)
	}
	t.Setenv("H2C_PORT", "-1")
	if _, err := ConfigFromEnv(); err == nil {
		t.Error("a negative H2C_PORT was accepted")
	}
}
