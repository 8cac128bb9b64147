package envoy

// L4 forwarding through a real Envoy (harness in l4_harness_test.go): TLS
// passthrough and terminate selected by SNI, beside HTTPS on one port;
// TCP split by weight; UDP; and the shares of Invalid backends failing
// closed. Weighted shares are checked against Hoeffding bounds whose
// false-failure probability is below 1e-6 per test.

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/testenv"
)

const (
	l4Gateway = "default/l4"
	tlsPort   = 10443
	tcpPort   = 10900
	tcpPort2  = 10901
	udpPort   = 10053
	udpPort2  = 10054
)

func l4IR(listeners []*ir.Listener, clusters []*ir.Cluster, secrets ...*ir.Secret) *ir.Gateway {
	ns, name, _ := strings.Cut(l4Gateway, "/")
	return &ir.Gateway{Namespace: ns, Name: name, Listeners: listeners, Clusters: clusters, Secrets: secrets}
}

func passthrough(name string, sni string, cluster string) *ir.FilterChain {
	return &ir.FilterChain{Name: name, ServerNames: []string{sni},
		TCP: &ir.TCPForward{Name: "tlsroute/default/" + name + "/rule/0", Backends: []ir.WeightedBackend{backendTo(cluster, 1)}}}
}

// echoOver checks that the TLS connection c is with the server of cert
// and that what it sends comes back.
func echoOver(t *testing.T, c net.Conn, want cert, msg string) {
	t.Helper()
	if tc, ok := c.(interface{ ConnectionState() tls.ConnectionState }); ok {
		if got := tc.ConnectionState().PeerCertificates[0]; !got.Equal(want.leaf) {
			t.Errorf("%s: handshake with the certificate of %v, want %v", msg, got.DNSNames, want.leaf.DNSNames)
		}
	}
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		t.Fatal(err)
	}
	line, err := readLine(c)
	if err != nil || line != msg+"\n" {
		t.Errorf("%s: echoed %q, %v", msg, line, err)
	}
}

// TestTLSPassthroughBySNI: one HTTPS port, TLS passthrough chains chosen
// by SNI: each client reaches the backend of its server name (exact names
// before wildcards) and shakes hands with that backend's own certificate
// through Envoy; a server name no chain matches is accepted and closed
// without a TLS alert.
func TestTLSPassthroughBySNI(t *testing.T) {
	s := newL4Stack(t)
	certA := selfSigned(t, "a.example.com", "exact.wild.example.com")
	certB := selfSigned(t, "b.example.com", "other.wild.example.com")
	portA, portB := s.tlsEcho(certA.tls), s.tlsEcho(certB.tls)
	s.start(l4IR([]*ir.Listener{{Name: "tls", Port: tlsPort, Protocol: ir.ProtocolHTTPS, FilterChains: []*ir.FilterChain{
		passthrough("a", "a.example.com", "default/a/443"),
		passthrough("b", "b.example.com", "default/b/443"),
		passthrough("exact", "exact.wild.example.com", "default/a/443"),
		passthrough("wild", "*.wild.example.com", "default/b/443"),
	}}}, []*ir.Cluster{tcpCluster("default/a/443", portA), tcpCluster("default/b/443", portB)}))

	roots := poolOf(certA, certB)
	for _, c := range []struct {
		sni  string
		want cert
	}{
		{"a.example.com", certA}, {"b.example.com", certB},
		{"exact.wild.example.com", certA}, {"other.wild.example.com", certB},
	} {
		conn, _, err := s.tlsDial(tlsPort, c.sni, roots)
		if err != nil {
			t.Fatalf("SNI %s: %v", c.sni, err)
		}
		echoOver(t, conn, c.want, "hello "+c.sni)
		conn.Close()
	}
	s.rejectedWithoutAlert(tlsPort, "c.example.com", roots)
	if n := s.stat("listener.0.0.0.0_10443.no_filter_chain_match"); n == 0 {
		t.Errorf("no_filter_chain_match = %d after a client of an unknown server name", n)
	}
}

// TestTLSTerminate: a chain with a certificate (by SDS) terminates TLS
// and forwards the plaintext to a TCP backend that speaks first: the
// client sees Envoy's certificate and the backend's welcome before it
// sends anything, and the backend reads exactly the client's bytes (no
// PROXY protocol header). A terminating chain whose only backend is
// Invalid closes its connections before any TLS.
func TestTLSTerminate(t *testing.T) {
	s := newL4Stack(t)
	envoyCert := selfSigned(t, "t.example.com", "broken.example.com")
	backend := s.tcpBackend(func(c net.Conn) {
		io.WriteString(c, "welcome from the backend\n")
		line, err := readLine(c)
		if err != nil {
			return
		}
		fmt.Fprintf(c, "got %q\n", line)
	})
	term := func(name, sni string, backends ...ir.WeightedBackend) *ir.FilterChain {
		return &ir.FilterChain{Name: name, ServerNames: []string{sni}, CertificateSecrets: []string{"default/t-cert"},
			TCP: &ir.TCPForward{Name: "tlsroute/default/" + name + "/rule/0", Backends: backends}}
	}
	s.start(l4IR([]*ir.Listener{{Name: "tls", Port: tlsPort, Protocol: ir.ProtocolHTTPS, FilterChains: []*ir.FilterChain{
		term("t", "t.example.com", backendTo("default/plain/9000", 1)),
		term("broken", "broken.example.com", ir.WeightedBackend{Invalid: true, Weight: 1}),
	}}}, []*ir.Cluster{tcpCluster("default/plain/9000", backend)},
		&ir.Secret{Name: "default/t-cert", Cert: envoyCert.certPEM, Key: envoyCert.keyPEM}))

	roots := poolOf(envoyCert)
	c, _, err := s.tlsDial(tlsPort, "t.example.com", roots)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.ConnectionState().PeerCertificates[0]; !got.Equal(envoyCert.leaf) {
		t.Errorf("handshake with the certificate of %v, want Envoy's", got.DNSNames)
	}
	if line, err := readLine(c); err != nil || line != "welcome from the backend\n" {
		t.Fatalf("first line %q, %v; want the backend's welcome", line, err)
	}
	io.WriteString(c, "hello\n")
	if line, err := readLine(c); err != nil || line != fmt.Sprintf("got %q\n", "hello\n") {
		t.Errorf("reply %q, %v", line, err)
	}
	s.rejectedWithoutAlert(tlsPort, "broken.example.com", roots)
}

// TestTLSMixedPort: an HTTPS chain (Envoy terminates and routes HTTP) and
// a TLS passthrough chain on one listener, both serving.
func TestTLSMixedPort(t *testing.T) {
	s := newL4Stack(t)
	envoyCert := selfSigned(t, "web.example.com")
	certA := selfSigned(t, "a.example.com")
	portA := s.tlsEcho(certA.tls)
	web := s.listen("tcp")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "web %s %s", r.Host, r.URL.Path)
	})}
	go srv.Serve(web)
	t.Cleanup(func() { srv.Close() })
	rc := &ir.RouteConfig{Name: "tls/web", VirtualHosts: []*ir.VirtualHost{{Name: "web", Hostname: "web.example.com",
		Routes: []*ir.Route{{Name: "httproute/default/web/rule/0/match/0",
			Forward: &ir.Forward{Backends: []*ir.WeightedBackend{{Cluster: "default/web/80", Weight: 1}}}}}}}}
	s.start(l4IR([]*ir.Listener{{Name: "tls", Port: tlsPort, Protocol: ir.ProtocolHTTPS, FilterChains: []*ir.FilterChain{
		passthrough("a", "a.example.com", "default/a/443"),
		{Name: "web", ServerNames: []string{"web.example.com"}, CertificateSecrets: []string{"default/web-cert"}, RouteConfig: rc},
	}}}, []*ir.Cluster{
		tcpCluster("default/a/443", portA),
		{Name: "default/web/80", Protocol: ir.UpstreamHTTP1, Endpoints: []ir.Endpoint{{Address: "127.0.0.1", Port: uint32(web.Addr().(*net.TCPAddr).Port)}}},
	}, &ir.Secret{Name: "default/web-cert", Cert: envoyCert.certPEM, Key: envoyCert.keyPEM}))

	roots := poolOf(envoyCert, certA)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// web.example.com is Envoy's listener on the namespace's loopback.
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return s.ns.DialContext(ctx, network, fmt.Sprintf("127.0.0.1:%d", tlsPort))
		},
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2: true,
	}}
	resp, err := client.Get(fmt.Sprintf("https://web.example.com:%d/x", tlsPort))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != fmt.Sprintf("web web.example.com:%d /x", tlsPort) {
		t.Errorf("HTTPS: %d %q", resp.StatusCode, body)
	}
	if resp.TLS == nil || !resp.TLS.PeerCertificates[0].Equal(envoyCert.leaf) {
		t.Error("HTTPS not served with Envoy's certificate")
	}
	c, _, err := s.tlsDial(tlsPort, "a.example.com", roots)
	if err != nil {
		t.Fatal(err)
	}
	echoOver(t, c, certA, "passthrough beside HTTPS")
	c.Close()
}

// tcpNames counts which backend (by the line it sends first) serves each
// of n connections to port, 8 at a time; "" counts connections closed
// before a line.
func (s *l4Stack) tcpNames(port, n int) map[string]int {
	s.t.Helper()
	var mu sync.Mutex
	out := map[string]int{}
	var failed atomic.Value
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 8 {
		wg.Go(func() {
			for int(next.Add(1)) <= n {
				c, err := s.dial(port)
				if err != nil {
					failed.Store(err)
					return
				}
				c.SetDeadline(time.Now().Add(10 * time.Second))
				line, err := readLine(c)
				c.Close()
				if err != nil && !(line == "" && closedQuietly(err)) {
					failed.Store(fmt.Errorf("read %q: %w", line, err))
					return
				}
				mu.Lock()
				out[strings.TrimSpace(line)]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		s.t.Fatalf("connections to %d: %v", port, err)
	}
	return out
}

// TestTCPWeighted: a TCP listener split 3:1 with a weight-0 backend sends
// about three quarters of the connections to the first, a quarter to the
// second and none to the third; a listener whose backends are one valid
// and one Invalid, 1:1, closes about half of its connections at once
// (never sending them elsewhere); one whose only backend is Invalid
// closes all. The backends speak first: Envoy connects upstream without
// waiting for the client.
func TestTCPWeighted(t *testing.T) {
	s := newL4Stack(t)
	var accepted [3]atomic.Int64
	ports := make([]int, 3)
	for i, name := range []string{"a", "b", "c"} {
		ports[i] = s.tcpBackend(func(c net.Conn) {
			accepted[i].Add(1)
			io.WriteString(c, name+"\n")
		})
	}
	invalid := ir.WeightedBackend{Invalid: true, Weight: 1}
	tcpListener := func(name string, port uint32, backends ...ir.WeightedBackend) *ir.Listener {
		return &ir.Listener{Name: name, Port: port, Protocol: ir.ProtocolTCP, FilterChains: []*ir.FilterChain{{Name: name,
			TCP: &ir.TCPForward{Name: "tcproute/default/" + name + "/rule/0", Backends: backends}}}}
	}
	s.start(l4IR([]*ir.Listener{
		tcpListener("split", tcpPort, backendTo("default/a/9000", 3), backendTo("default/b/9000", 1), backendTo("default/c/9000", 0)),
		tcpListener("half-invalid", tcpPort2, backendTo("default/c/9000", 1), invalid),
		tcpListener("invalid", tcpPort2+1, invalid),
	}, []*ir.Cluster{tcpCluster("default/a/9000", ports[0]), tcpCluster("default/b/9000", ports[1]), tcpCluster("default/c/9000", ports[2])}))

	const n = 500
	got := s.tcpNames(tcpPort, n)
	if got["a"]+got["b"] != n || got["c"] != 0 {
		t.Fatalf("connections served: %v, want %d by a and b only", got, n)
	}
	checkShare(t, "backend a (weight 3 of 4)", got["a"], n, 0.75)
	checkShare(t, "backend b (weight 1 of 4)", got["b"], n, 0.25)
	if c := accepted[2].Load(); c != 0 {
		t.Errorf("the weight-0 backend accepted %d connections", c)
	}

	const m = 300
	got = s.tcpNames(tcpPort2, m)
	if got["c"]+got[""] != m {
		t.Fatalf("connections of the half-invalid route: %v", got)
	}
	checkShare(t, "valid half", got["c"], m, 0.5)
	checkShare(t, "invalid half closed", got[""], m, 0.5)
	if c := accepted[2].Load(); c != int64(got["c"]) {
		t.Errorf("backend c accepted %d connections, %d got its line", c, got["c"])
	}
	before := accepted[0].Load() + accepted[1].Load() + accepted[2].Load()
	if got := s.tcpNames(tcpPort2+1, 20); got[""] != 20 {
		t.Errorf("connections of the all-invalid route: %v, want all closed", got)
	}
	if after := accepted[0].Load() + accepted[1].Load() + accepted[2].Load(); after != before {
		t.Errorf("an all-invalid route reached backends (%d connections)", after-before)
	}
}

// udpExchange sends msg from a new client socket to port and returns the
// reply and its source; it resends a few times (a datagram may be sent
// before Envoy is ready), on the same socket and so in the same session.
func (s *l4Stack) udpExchange(port int, msg string, tries int) (string, net.Addr, error) {
	c, err := testenv.InNetns(s.ns, func() (net.PacketConn, error) { return net.ListenPacket("udp", "127.0.0.1:0") })
	if err != nil {
		return "", nil, err
	}
	defer c.Close()
	to := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}
	buf := make([]byte, 2048)
	for range tries {
		if _, err := c.WriteTo([]byte(msg), to); err != nil {
			return "", nil, err
		}
		c.SetReadDeadline(time.Now().Add(time.Second))
		n, from, err := c.ReadFrom(buf)
		if err == nil {
			return string(buf[:n]), from, nil
		}
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			return "", nil, err
		}
	}
	return "", nil, fmt.Errorf("no reply to %q after %d tries", msg, tries)
}

// TestUDPForwarding: a UDP listener forwards datagrams to UDP echo
// servers and their replies come back from the listener's address; split
// 1:1, new client sockets (sessions) reach both. A UDP route whose only
// backend is Invalid drops datagrams.
func TestUDPForwarding(t *testing.T) {
	s := newL4Stack(t)
	portA, portB := s.udpEcho("a"), s.udpEcho("b")
	udpListener := func(name string, port uint32, backends ...ir.WeightedBackend) *ir.Listener {
		return &ir.Listener{Name: name, Port: port, Protocol: ir.ProtocolUDP,
			UDP: &ir.UDPForward{Name: "udproute/default/" + name + "/rule/0", Backends: backends}}
	}
	udpCluster := func(name string, port int) *ir.Cluster {
		return &ir.Cluster{Name: name, Protocol: ir.UpstreamUDP, Endpoints: []ir.Endpoint{{Address: "127.0.0.1", Port: uint32(port)}}}
	}
	s.start(l4IR([]*ir.Listener{
		udpListener("dns", udpPort, backendTo("default/a/53/udp", 1), backendTo("default/b/53/udp", 1)),
		udpListener("dropped", udpPort2, ir.WeightedBackend{Invalid: true, Weight: 1}),
	}, []*ir.Cluster{udpCluster("default/a/53/udp", portA), udpCluster("default/b/53/udp", portB)}))

	const n = 100
	got := map[string]int{}
	for i := range n {
		msg := fmt.Sprintf("ping %d", i)
		reply, from, err := s.udpExchange(udpPort, msg, 10)
		if err != nil {
			t.Fatal(err)
		}
		if ua, ok := from.(*net.UDPAddr); !ok || !ua.IP.Equal(net.IPv4(127, 0, 0, 1)) || ua.Port != udpPort {
			t.Fatalf("reply from %v, want the listener's 127.0.0.1:%d", from, udpPort)
		}
		name, echoed, _ := strings.Cut(reply, ":")
		if echoed != msg {
			t.Fatalf("reply %q to %q", reply, msg)
		}
		got[name]++
	}
	if got["a"]+got["b"] != n {
		t.Fatalf("sessions served: %v", got)
	}
	checkShare(t, "sessions of backend a", got["a"], n, 0.5)
	checkShare(t, "sessions of backend b", got["b"], n, 0.5)

	const noRoute = "udp.udproute_default_dropped_rule_0.downstream_sess_no_route"
	c, err := testenv.InNetns(s.ns, func() (net.PacketConn, error) { return net.ListenPacket("udp", "127.0.0.1:0") })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WriteTo([]byte("dropped?"), &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: udpPort2}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the datagram counted as without a route", func() error {
		if v := s.stat(noRoute); v < 1 {
			return fmt.Errorf("%s = %d", noRoute, v)
		}
		return nil
	})
	// Dropped, not answered: Envoy has handled it by now.
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	buf := make([]byte, 64)
	if k, from, err := c.ReadFrom(buf); err == nil {
		t.Errorf("a datagram of the all-invalid route was answered by %v: %q", from, bytes.TrimSpace(buf[:k]))
	}
}
