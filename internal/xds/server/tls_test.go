package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/portico-dev/portico/internal/metrics"
)

// swapSource is a CertSource whose certificate and pool tests replace.
type swapSource struct {
	cur atomic.Pointer[[2]any]
}

func (s *swapSource) set(cert *tls.Certificate, pool *x509.CertPool) {
	s.cur.Store(&[2]any{cert, pool})
}

func (s *swapSource) Current() (*tls.Certificate, *x509.CertPool, error) {
	c := s.cur.Load()
	if c == nil {
		return nil, nil, errors.New("not ready")
	}
	return c[0].(*tls.Certificate), c[1].(*x509.CertPool), nil
}

// handshake performs a TLS handshake with a TLSConfig(src) listener and
// returns the server's leaf certificate.
func handshake(t *testing.T, addr string, client *tls.Config) (*x509.Certificate, error) {
	t.Helper()
	d := &net.Dialer{Timeout: waitTimeout}
	conn, err := tls.DialWithDialer(d, "tcp", addr, client)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// With TLS 1.3 the client finishes first: a refused client certificate
	// shows on the first read.
	_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	var b [1]byte
	if _, err := conn.Read(b[:]); err != nil && !isTimeout(err) {
		return nil, err
	}
	return conn.ConnectionState().PeerCertificates[0], nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// tlsListener accepts connections and completes their server handshakes
// with cfg, keeping them open until the client closes, until the test ends.
func tlsListener(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	lis, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if c.(*tls.Conn).Handshake() == nil {
					_, _ = io.Copy(io.Discard, c) // until the client closes
				}
			}()
		}
	}()
	t.Cleanup(func() { lis.Close(); <-done })
	return lis.Addr().String()
}

func TestTLSConfig(t *testing.T) {
	cfg := TLSConfig(CertSourceFunc(func() (*tls.Certificate, *x509.CertPool, error) { return nil, nil, nil }))
	if cfg.MinVersion != tls.VersionTLS12 || cfg.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Errorf("MinVersion %x ClientAuth %v", cfg.MinVersion, cfg.ClientAuth)
	}
	if _, err := cfg.GetConfigForClient(&tls.ClientHelloInfo{}); err == nil {
		t.Error("a source without certificate gave a config")
	}
}

func TestTLSConfigReloads(t *testing.T) {
	ca1, ca2 := newTestCA(t), newTestCA(t)
	src := &swapSource{}
	addr := tlsListener(t, TLSConfig(src))
	client := func(ca *testCA, trust *x509.CertPool) *tls.Config {
		return &tls.Config{ServerName: serverName, RootCAs: trust,
			Certificates: []tls.Certificate{*ca.client(gwA.gateway)}}
	}

	// Not ready: every handshake fails.
	if _, err := handshake(t, addr, client(ca1, ca1.pool())); err == nil {
		t.Fatal("handshake succeeded before the source had a certificate")
	}

	srv1 := ca1.server()
	src.set(srv1, ca1.pool())
	leaf, err := handshake(t, addr, client(ca1, ca1.pool()))
	if err != nil {
		t.Fatalf("handshake with the first certificate: %v", err)
	}
	if !leaf.Equal(srv1.Leaf) {
		t.Errorf("served %v, want the first certificate", leaf.SerialNumber)
	}

	// Same CA, renewed serving certificate: picked up by the next handshake.
	srv1b := ca1.server()
	src.set(srv1b, ca1.pool())
	if leaf, err = handshake(t, addr, client(ca1, ca1.pool())); err != nil || !leaf.Equal(srv1b.Leaf) {
		t.Fatalf("after renewal: leaf %v, err %v", leaf, err)
	}

	// CA rotation with overlap: new certificate from ca2, both CAs trusted
	// for clients, so a client still holding ca1's certificate connects.
	both := ca1.pool()
	both.AddCert(ca2.ca.Certificate())
	srv2 := ca2.server()
	src.set(srv2, both)
	for name, c := range map[string]*tls.Config{"old client cert": client(ca1, ca2.pool()), "new client cert": client(ca2, ca2.pool())} {
		if leaf, err = handshake(t, addr, c); err != nil || !leaf.Equal(srv2.Leaf) {
			t.Errorf("%s during overlap: leaf %v, err %v", name, leaf, err)
		}
	}

	// The old CA dropped: its client certificates are refused.
	src.set(srv2, ca2.pool())
	if _, err := handshake(t, addr, client(ca1, ca2.pool())); err == nil {
		t.Error("client certificate of a dropped CA accepted")
	}
	if _, err := handshake(t, addr, client(ca2, ca2.pool())); err != nil {
		t.Errorf("client certificate of the current CA: %v", err)
	}

	// TLS older than 1.2 is refused.
	old := client(ca2, ca2.pool())
	old.MinVersion, old.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	if _, err := handshake(t, addr, old); err == nil {
		t.Error("TLS 1.1 handshake succeeded")
	}
}

func TestMTLSServerPicksUpRotation(t *testing.T) {
	// Through the xDS server: after a rotation, a new connection sees the
	// new certificate and CA, without restarting Serve.
	ca1, ca2 := newTestCA(t), newTestCA(t)
	src := &swapSource{}
	src.set(ca1.server(), ca1.pool())
	e, addr := startTLSEnv(t, TLSConfig(src))
	e.update(t, gwA.resources(t, "a1"))

	c1 := newSotwClient(t, dialTLS(t, addr, ca1.client(gwA.gateway), ca1.pool()))
	sotwSubscribe(c1, gwA)
	checkSotw(t, recvTypes(t, c1, sotwType, allTypes...), gwA)

	src.set(ca2.server(), ca2.pool())
	c2 := newSotwClient(t, dialTLS(t, addr, ca2.client(gwA.gateway), ca2.pool()))
	sotwSubscribe(c2, gwA)
	checkSotw(t, recvTypes(t, c2, sotwType, allTypes...), gwA)

	conn := dialTLS(t, addr, ca1.client(gwA.gateway), ca1.pool())
	if err := refusal(t, conn, metrics.KindSotW, gwA.gateway); grpcstatus.Code(err) != codes.Unavailable {
		t.Errorf("client of the replaced CA: %v, want Unavailable", err)
	}
}
