package envoy

// The harness of the L4 tests (l4_test.go): IR fed straight to Portico's
// xDS server and through it to a real Envoy, without the Gateway API
// stage, so that the configuration the translator makes for TCP, TLS and
// UDP is tested by itself. Portico's xds/server runs in the test process;
// it, Envoy and the backends (Go servers of the test) all listen on
// 127.0.0.1 in one network namespace that has only a loopback, and the
// test's clients open their sockets in that namespace too. Envoy's
// listener ports are fixed: nothing else lives there.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/testenv"
	"github.com/portico-dev/portico/internal/xds/server"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// l4Stack is an xDS server, an Envoy and the test's backends in one
// isolated network namespace.
type l4Stack struct {
	t     testing.TB
	ns    *testenv.Netns
	xds   *server.Server
	port  int // of the xDS server
	envoy *testenv.Envoy
	wg    sync.WaitGroup // backend goroutines
	// delta: Envoy uses delta ADS (route tables in VHDS form) rather
	// than state-of-the-world ADS (whole tables). Set before start.
	delta bool
}

// newL4Stack makes the namespace and starts the xDS server in it; the
// test then starts its backends and calls start with its IR.
func newL4Stack(t testing.TB) *l4Stack {
	t.Helper()
	testenv.RequireEnvoy(t)
	testenv.RequireNetns(t)
	s := &l4Stack{t: t, ns: isolatedNamespace(t)}
	s.xds = server.New(nil, nil)
	// Plaintext xDS on the namespace's loopback: the keys of terminating
	// chains must reach Envoy anyway.
	s.xds.UnauthenticatedSecrets = true
	lis := s.listen("tcp")
	s.port = lis.Addr().(*net.TCPAddr).Port
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.xds.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("xds server: %v", err)
		}
	})
	// Backends stop before the namespace goes (cleanups run last first).
	t.Cleanup(s.wg.Wait)
	return s
}

// listen opens a TCP listener on 127.0.0.1 (a free port) in the
// namespace, closed when the test ends.
func (s *l4Stack) listen(network string) net.Listener {
	s.t.Helper()
	l, err := testenv.InNetns(s.ns, func() (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") })
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { l.Close() })
	return l
}

// listenPacket opens a UDP socket on 127.0.0.1 (a free port) in the
// namespace, closed when the test ends.
func (s *l4Stack) listenPacket() net.PacketConn {
	s.t.Helper()
	c, err := testenv.InNetns(s.ns, func() (net.PacketConn, error) { return net.ListenPacket("udp", "127.0.0.1:0") })
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { c.Close() })
	return c
}

// serve accepts connections on l until it is closed and handles each in
// a goroutine, with a deadline so that none outlives the test.
func (s *l4Stack) serve(l net.Listener, handle func(c net.Conn)) int {
	s.wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(20 * time.Second))
				handle(c)
			})
		}
	})
	return l.Addr().(*net.TCPAddr).Port
}

// tcpBackend is a TCP server on loopback in the namespace; it returns
// its port.
func (s *l4Stack) tcpBackend(handle func(c net.Conn)) int {
	return s.serve(s.listen("tcp"), handle)
}

// tlsEcho is a TLS server with cert that echoes what it reads.
func (s *l4Stack) tlsEcho(cert tls.Certificate) int {
	l := tls.NewListener(s.listen("tcp"), &tls.Config{Certificates: []tls.Certificate{cert}})
	return s.serve(l, func(c net.Conn) { io.Copy(c, c) })
}

// udpEcho is a UDP server that answers each datagram with name, ":" and
// the datagram; it returns its port.
func (s *l4Stack) udpEcho(name string) int {
	c := s.listenPacket()
	s.wg.Go(func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			c.WriteTo(append([]byte(name+":"), buf[:n]...), from)
		}
	})
	return c.LocalAddr().(*net.UDPAddr).Port
}

const l4Bootstrap = `node: {id: l4-envoy, cluster: %s}
dynamic_resources:
  ads_config:
    api_type: %s
    transport_api_version: V3
    set_node_on_first_message_only: true
    grpc_services: [{envoy_grpc: {cluster_name: portico-xds}}]
  lds_config: {resource_api_version: V3, ads: {}}
  cds_config: {resource_api_version: V3, ads: {}}
static_resources:
  clusters:
  - name: portico-xds
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
    load_assignment:
      cluster_name: portico-xds
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: 9901}}
`

// start translates gw (which must have no Problems), serves it, and
// starts an Envoy that gets it, waiting until every listener is active.
func (s *l4Stack) start(gw *ir.Gateway) {
	s.t.Helper()
	res, err := translate.Translate(gw)
	if err != nil {
		s.t.Fatal(err)
	}
	if len(res.Problems) != 0 {
		s.t.Fatalf("translation problems: %+v", res.Problems)
	}
	s.startWith(res)
}

// startWith serves res and starts an Envoy that gets it, waiting until
// every listener is active.
func (s *l4Stack) startWith(res *translate.Resources) {
	s.t.Helper()
	if err := s.xds.Update(context.Background(), []*translate.Resources{res}); err != nil {
		s.t.Fatal(err)
	}
	api := "GRPC"
	if s.delta {
		api = "DELTA_GRPC"
	}
	s.envoy = testenv.StartEnvoy(s.t, testenv.EnvoyOptions{
		Bootstrap: fmt.Sprintf(l4Bootstrap, res.Gateway, api, s.port),
		Args:      []string{"--concurrency", "2"},
		Wrap:      s.ns.Wrap,
		Dial:      s.ns.DialContext,
	})
	if err := s.envoy.WaitLive(30 * time.Second); err != nil {
		s.t.Fatal(err)
	}
	want := int64(len(res.Listeners))
	err := s.envoy.WaitFor(30*time.Second, fmt.Sprintf("%d listeners active", want), func(ctx context.Context) (bool, error) {
		st, err := s.envoy.Stats(ctx, "^listener_manager\\.total_listeners_")
		if err != nil {
			return false, err
		}
		if st["listener_manager.total_listeners_active"] != want || st["listener_manager.total_listeners_warming"] != 0 {
			return false, fmt.Errorf("listener stats %v", st)
		}
		return true, nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

// dial opens a TCP connection to 127.0.0.1:port in the namespace.
func (s *l4Stack) dial(port int) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.ns.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
}

// stat is an Envoy counter or gauge.
func (s *l4Stack) stat(name string) int64 {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := s.envoy.Stat(ctx, name)
	if err != nil {
		s.t.Fatal(err)
	}
	return n
}

// recordingConn keeps every byte read from its connection.
type recordingConn struct {
	net.Conn
	mu   sync.Mutex
	read []byte
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.read = append(c.read, p[:n]...)
	c.mu.Unlock()
	return n, err
}

// tlsDial connects to port and shakes hands as a TLS client with sni,
// trusting roots. The raw connection records what the server sent.
func (s *l4Stack) tlsDial(port int, sni string, roots *x509.CertPool) (*tls.Conn, *recordingConn, error) {
	raw, err := s.dial(port)
	if err != nil {
		return nil, nil, err
	}
	rec := &recordingConn{Conn: raw}
	c := tls.Client(rec, &tls.Config{ServerName: sni, RootCAs: roots, MinVersion: tls.VersionTLS12})
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.Handshake(); err != nil {
		c.Close()
		return nil, rec, err
	}
	return c, rec, nil
}

// closedQuietly reports whether err is the end of a connection closed by
// its peer (FIN or RST), not a TLS alert or a timeout.
func closedQuietly(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		return false // a TLS alert
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// rejectedWithoutAlert checks that a TLS client to port with sni gets its
// TCP connection accepted and then closed, with not a byte of TLS (no
// alert, no handshake) from the other side.
func (s *l4Stack) rejectedWithoutAlert(port int, sni string, roots *x509.CertPool) {
	s.t.Helper()
	c, rec, err := s.tlsDial(port, sni, roots)
	if rec == nil {
		s.t.Fatalf("SNI %s: TCP connection not accepted: %v", sni, err)
	}
	if err == nil {
		c.Close()
		s.t.Fatalf("SNI %s: handshake succeeded with %v", sni, c.ConnectionState().PeerCertificates[0].DNSNames)
	}
	if !closedQuietly(err) {
		s.t.Errorf("SNI %s: handshake ended with %v, want the connection closed (EOF or reset)", sni, err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.read) != 0 {
		s.t.Errorf("SNI %s: the proxy sent %d bytes (%x), want none (no TLS alert)", sni, len(rec.read), rec.read)
	}
}

// cert is a self-signed certificate for names.
type cert struct {
	tls     tls.Certificate
	leaf    *x509.Certificate
	certPEM []byte
	keyPEM  []byte
}

func selfSigned(t *testing.T, names ...string) cert {
	t.Helper()
	certPEM, keyPEM, err := testenv.SelfSignedCert(names...)
	if err != nil {
		t.Fatal(err)
	}
	c := cert{certPEM: certPEM, keyPEM: keyPEM}
	if c.tls, err = tls.X509KeyPair(c.certPEM, c.keyPEM); err != nil {
		t.Fatal(err)
	}
	if c.leaf, err = x509.ParseCertificate(c.tls.Certificate[0]); err != nil {
		t.Fatal(err)
	}
	return c
}

func poolOf(certs ...cert) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c.leaf)
	}
	return p
}

// tcpCluster is a TCP cluster of one endpoint on loopback.
func tcpCluster(name string, port int) *ir.Cluster {
	return &ir.Cluster{Name: name, Protocol: ir.UpstreamTCP, Endpoints: []ir.Endpoint{{Address: "127.0.0.1", Port: uint32(port)}}}
}

func backendTo(cluster string, weight uint32) ir.WeightedBackend {
	return ir.WeightedBackend{Cluster: cluster, Weight: weight}
}

// hoeffding is the deviation ε of a frequency over n independent trials
// from its probability that is exceeded (either way) with probability at
// most fail: 2·exp(-2nε²) = fail.
func hoeffding(n int, fail float64) float64 {
	return math.Sqrt(math.Log(2/fail) / (2 * float64(n)))
}

// checkShare checks that got of n trials is within the Hoeffding bound
// (false failure below 1e-7) of the share p.
func checkShare(t *testing.T, what string, got, n int, p float64) {
	t.Helper()
	eps := hoeffding(n, 1e-7)
	if f := float64(got) / float64(n); math.Abs(f-p) > eps {
		t.Errorf("%s: %d of %d (%.3f), want %.3f ± %.3f", what, got, n, f, p, eps)
	}
}

// readLine reads up to a newline.
func readLine(c net.Conn) (string, error) {
	var b strings.Builder
	buf := make([]byte, 1)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			b.WriteByte(buf[0])
			if buf[0] == '\n' {
				return b.String(), nil
			}
		}
		if err != nil {
			return b.String(), err
		}
	}
}
