package server

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/pki"
)

const serverName = "portico-xds.portico-system.svc"

// testCA is a CA with helpers to issue the certificates of these tests.
type testCA struct {
	t  *testing.T
	ca *pki.CA
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	ca, err := pki.NewCA(time.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{t: t, ca: ca}
}

func (c *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.ca.Certificate())
	return p
}

func (c *testCA) keyPair(certPEM, keyPEM []byte, err error) *tls.Certificate {
	c.t.Helper()
	if err != nil {
		c.t.Fatal(err)
	}
	kp, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		c.t.Fatal(err)
	}
	return &kp
}

func (c *testCA) server() *tls.Certificate {
	return c.keyPair(c.ca.IssueServer(pki.ServerDNSNames("portico-system"),
		[]net.IP{net.ParseIP("127.0.0.1")}, time.Now(), time.Hour))
}

// client issues the certificate of gateway "<ns>/<name>", without UID.
func (c *testCA) client(gateway string) *tls.Certificate { return c.clientUID(gateway, "") }

// clientUID issues the certificate of gateway "<ns>/<name>" with uid.
func (c *testCA) clientUID(gateway, uid string) *tls.Certificate {
	ns, name, _ := strings.Cut(gateway, "/")
	return c.keyPair(c.ca.IssueClient(pki.Identity{Namespace: ns, Name: name, UID: uid}, time.Now(), time.Hour))
}

// anonymousClient is a certificate of the CA valid for client auth but
// without a Gateway identity.
func (c *testCA) anonymousClient() *tls.Certificate {
	c.t.Helper()
	caPair := c.keyPair(c.ca.CertPEM(), c.ca.KeyPEM(), nil)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		c.t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(42),
		Subject:      pkix.Name{CommonName: "anonymous"},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.ca.Certificate(), &key.PublicKey, caPair.PrivateKey.(crypto.Signer))
	if err != nil {
		c.t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.keyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil)
}

// startTLSEnv serves e.srv with mTLS configured by cfg on 127.0.0.1; e.conn
// is nil: dial a connection per client identity.
func startTLSEnv(t *testing.T, cfg *tls.Config) (e *env, addr string) {
	t.Helper()
	return startTLSEnvWith(t, cfg, nil)
}

// startTLSEnvWith is startTLSEnv with tweak applied to the Server before
// it serves.
func startTLSEnvWith(t *testing.T, cfg *tls.Config, tweak func(*Server)) (e *env, addr string) {
	t.Helper()
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := metrics.New()
	srv := New(log, m)
	srv.TLS = cfg
	if tweak != nil {
		tweak(srv)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, lis) }()
	var once sync.Once
	var stopErr error
	e = &env{srv: srv, m: m, logs: logs}
	e.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-served:
			case <-time.After(waitTimeout):
				stopErr = errors.New("Serve did not return after cancel")
			}
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := e.stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
		if t.Failed() {
			t.Logf("server logs:\n%s", logs.String())
		}
	})
	return e, lis.Addr().String()
}

// dialTLS connects to addr presenting cert (none if nil) and trusting roots.
func dialTLS(t *testing.T, addr string, cert *tls.Certificate, roots *x509.CertPool) *grpc.ClientConn {
	t.Helper()
	cfg := &tls.Config{RootCAs: roots, ServerName: serverName, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// staticSource serves one fixed certificate and client CA pool.
func staticSource(cert *tls.Certificate, pool *x509.CertPool) CertSource {
	return CertSourceFunc(func() (*tls.Certificate, *x509.CertPool, error) { return cert, pool, nil })
}

// refusal opens a stream of kind ("sotw" or "delta") on conn, sends one
// request for cluster, and returns the error that ends the stream (opening,
// sending or receiving); it fails the test if a response arrives.
// expectRefused checks that conn is refused (Unauthenticated) for gateway
// on SotW and Delta streams and on a unary fetch.
func expectRefused(t *testing.T, name string, conn *grpc.ClientConn, gateway string,
	fetch func(context.Context, *grpc.ClientConn, *discoveryv3.DiscoveryRequest) error) {
	t.Helper()
	for _, kind := range []string{metrics.KindSotW, metrics.KindDelta} {
		if err := refusal(t, conn, kind, gateway); grpcstatus.Code(err) != codes.Unauthenticated {
			t.Errorf("%s, %s: %v, want Unauthenticated", name, kind, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := fetch(ctx, conn, &discoveryv3.DiscoveryRequest{Node: node(gateway)}); grpcstatus.Code(err) != codes.Unauthenticated {
		t.Errorf("%s, fetch: %v, want Unauthenticated", name, err)
	}
}

func refusal(t *testing.T, conn *grpc.ClientConn, kind, cluster string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	ads := discoveryv3.NewAggregatedDiscoveryServiceClient(conn)
	var recv func() (any, error)
	switch kind {
	case metrics.KindSotW:
		s, err := ads.StreamAggregatedResources(ctx)
		if err != nil {
			return err
		}
		if err := s.Send(&discoveryv3.DiscoveryRequest{Node: node(cluster), TypeUrl: resourcev3.ClusterType}); err != nil {
			_, err = s.Recv() // the reason is on the receive side
			return err
		}
		recv = func() (any, error) { return s.Recv() }
	default:
		s, err := ads.DeltaAggregatedResources(ctx)
		if err != nil {
			return err
		}
		if err := s.Send(&discoveryv3.DeltaDiscoveryRequest{Node: node(cluster), TypeUrl: resourcev3.ClusterType}); err != nil {
			_, err = s.Recv()
			return err
		}
		recv = func() (any, error) { return s.Recv() }
	}
	r, err := recv()
	if err == nil {
		t.Fatalf("%s stream as %s got a response: %v", kind, cluster, r)
	}
	return err
}

// noForeignNames fails if any name belongs to another gateway than own.
func noForeignNames(t *testing.T, typ string, names []string, own fixture) {
	t.Helper()
	for _, n := range names {
		if !strings.HasPrefix(n, own.gateway+"/") {
			t.Errorf("%s: resource %q of another gateway in the stream of %s", typ, n, own.gateway)
		}
	}
}

func TestMTLSSotWServesOwnGatewayOnly(t *testing.T) {
	ca := newTestCA(t)
	e, addr := startTLSEnv(t, TLSConfig(staticSource(ca.server(), ca.pool())))
	e.update(t, gwA.resources(t, "a1"), gwB.resources(t, "b1"))
	conn := dialTLS(t, addr, ca.client(gwA.gateway), ca.pool())

	// Envoy's subscription, plus explicit requests for every resource of
	// gw-b by name: the cache looks them up in gw-a's snapshot only.
	c := newSotwClient(t, conn)
	first := true
	for _, typ := range allTypes {
		req := &discoveryv3.DiscoveryRequest{TypeUrl: typ}
		if typ != resourcev3.ClusterType && typ != resourcev3.ListenerType {
			req.ResourceNames = append(gwA.names(typ), gwB.names(typ)...)
		}
		if first {
			req.Node, first = node(gwA.gateway), false
		}
		c.send(req)
	}
	got := recvTypes(t, c, sotwType, allTypes...)
	checkSotw(t, got, gwA)
	for _, typ := range allTypes {
		noForeignNames(t, typ, sotwNames(t, got[typ]), gwA)
		sotwAck(c, gwA, got[typ])
	}
	eventually(t, "ten requests (subscriptions and ACKs) received", func() bool { return e.requests(t, metrics.KindSotW) == 10 })

	// A change of gw-b (a new secret) is not pushed to gw-a; the next
	// response is gw-a's own change.
	b2 := gwB
	b2.cert = "cert-b2"
	e.update(t, gwA.resources(t, "a1"), b2.resources(t, "b2"))
	a2 := gwA
	a2.cert = "cert-a2"
	e.update(t, a2.resources(t, "a2"), b2.resources(t, "b2"))
	r := c.recv()
	if r.GetTypeUrl() != resourcev3.SecretType || !slices.Equal(sotwNames(t, r), []string{gwA.secretName()}) {
		t.Fatalf("got %s %v, want the secret of gw-a", r.GetTypeUrl(), sotwNames(t, r))
	}
	noForeignNames(t, r.GetTypeUrl(), sotwNames(t, r), gwA)
}

func TestMTLSDeltaServesOwnGatewayOnly(t *testing.T) {
	ca := newTestCA(t)
	e, addr := startTLSEnv(t, TLSConfig(staticSource(ca.server(), ca.pool())))
	e.update(t, gwA.resources(t, "a1"), gwB.resources(t, "b1"))
	conn := dialTLS(t, addr, ca.client(gwA.gateway), ca.pool())

	c := newDeltaClient(t, conn)
	for i, typ := range allTypes {
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typ,
			ResourceNamesSubscribe: append([]string{"*"}, gwB.names(typ)...)}
		if i == 0 {
			req.Node = node(gwA.gateway)
		}
		c.send(req)
	}
	got := recvTypes(t, c, deltaType, allTypes...)
	for _, typ := range allTypes {
		r := got[typ]
		if names, want := deltaNames(r), gwA.names(typ); !slices.Equal(names, want) {
			t.Errorf("%s resources = %v, want %v", typ, names, want)
		}
		noForeignNames(t, typ, deltaNames(r), gwA)
		deltaAck(c, r)
	}
	eventually(t, "ten requests (subscriptions and ACKs) received", func() bool { return e.requests(t, metrics.KindDelta) == 10 })

	b2 := gwB
	b2.cert = "cert-b2"
	e.update(t, gwA.resources(t, "a1"), b2.resources(t, "b2"))
	a2 := gwA
	a2.cert = "cert-a2"
	e.update(t, a2.resources(t, "a2"), b2.resources(t, "b2"))
	r := c.recv()
	if r.GetTypeUrl() != resourcev3.SecretType {
		t.Fatalf("got %s, want SDS", r.GetTypeUrl())
	}
	if names := deltaNames(r); !slices.Equal(names, []string{gwA.secretName()}) {
		t.Errorf("SDS resources = %v, want [%s]", names, gwA.secretName())
	}
}

func TestMTLSOtherGatewayPermissionDenied(t *testing.T) {
	ca := newTestCA(t)
	e, addr := startTLSEnv(t, TLSConfig(staticSource(ca.server(), ca.pool())))
	e.update(t, gwA.resources(t, "a1"), gwB.resources(t, "b1"))
	conn := dialTLS(t, addr, ca.client(gwA.gateway), ca.pool())

	for _, kind := range []string{metrics.KindSotW, metrics.KindDelta} {
		if err := refusal(t, conn, kind, gwB.gateway); grpcstatus.Code(err) != codes.PermissionDenied {
			t.Errorf("%s as gw-b with gw-a's certificate: %v, want PermissionDenied", kind, err)
		}
	}

	// Switching gateway on an open stream is refused too.
	c := newSotwClient(t, conn)
	sotwSubscribe(c, gwA)
	got := recvTypes(t, c, sotwType, allTypes...)
	c.send(&discoveryv3.DiscoveryRequest{Node: node(gwB.gateway), TypeUrl: resourcev3.ClusterType,
		VersionInfo: got[resourcev3.ClusterType].GetVersionInfo(), ResponseNonce: got[resourcev3.ClusterType].GetNonce()})
	if err := c.recvErr(); grpcstatus.Code(err) != codes.PermissionDenied {
		t.Errorf("switch to gw-b on an open stream: %v, want PermissionDenied", err)
	}

	// And so are unary fetches.
	cds := clusterservice.NewClusterDiscoveryServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, err := cds.FetchClusters(ctx, &discoveryv3.DiscoveryRequest{Node: node(gwB.gateway)}); grpcstatus.Code(err) != codes.PermissionDenied {
		t.Errorf("fetch as gw-b: %v, want PermissionDenied", err)
	}
	r, err := cds.FetchClusters(ctx, &discoveryv3.DiscoveryRequest{Node: node(gwA.gateway)})
	if err != nil || !slices.Equal(sotwNames(t, r), gwA.clusterNames()) {
		t.Errorf("fetch as gw-a: %v, %v", r, err)
	}
	if !strings.Contains(e.logs.String(), "does not match the gateway") {
		t.Error("refusal not logged")
	}
	eventually(t, "streams closed", func() bool {
		return e.metric(t, "portico_xds_streams", map[string]string{"kind": metrics.KindSotW}) == 0 &&
			e.metric(t, "portico_xds_streams", map[string]string{"kind": metrics.KindDelta}) == 0
	})
}

func TestMTLSRefusesClientsWithoutValidCertificate(t *testing.T) {
	ca, other := newTestCA(t), newTestCA(t)
	e, addr := startTLSEnv(t, TLSConfig(staticSource(ca.server(), ca.pool())))
	e.update(t, gwA.resources(t, "a1"))

	for _, tc := range []struct {
		name string
		cert *tls.Certificate
	}{
		{"no certificate", nil},
		{"certificate of another CA", other.client(gwA.gateway)},
		{"server certificate", ca.server()}, // not valid for client auth
	} {
		conn := dialTLS(t, addr, tc.cert, ca.pool())
		for _, kind := range []string{metrics.KindSotW, metrics.KindDelta} {
			// The TLS handshake fails: the connection never carries RPCs
			// (the client sees a connection error: a TLS alert, or a
			// reset or broken pipe if the server closed first).
			err := refusal(t, conn, kind, gwA.gateway)
			if grpcstatus.Code(err) != codes.Unavailable {
				t.Errorf("%s, %s: %v, want a TLS handshake failure", tc.name, kind, err)
			}
		}
	}

	// A client that does not trust the server's CA does not connect either.
	conn := dialTLS(t, addr, ca.client(gwA.gateway), other.pool())
	if err := refusal(t, conn, metrics.KindSotW, gwA.gateway); grpcstatus.Code(err) != codes.Unavailable {
		t.Errorf("client not trusting the server: %v, want Unavailable", err)
	}
}

func TestMTLSStreamWithoutIdentityUnauthenticated(t *testing.T) {
	// Should client certificates be optional at the TLS layer (a
	// misconfiguration), streams without a Gateway identity are still
	// refused.
	ca := newTestCA(t)
	cfg := TLSConfig(staticSource(ca.server(), ca.pool()))
	inner := cfg.GetConfigForClient
	cfg.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		c, err := inner(h)
		if c != nil {
			c.ClientAuth = tls.VerifyClientCertIfGiven
		}
		return c, err
	}
	e, addr := startTLSEnv(t, cfg)
	e.update(t, gwA.resources(t, "a1"))

	for name, cert := range map[string]*tls.Certificate{"no certificate": nil, "no identity": ca.anonymousClient()} {
		expectRefused(t, name, dialTLS(t, addr, cert, ca.pool()), gwA.gateway, func(ctx context.Context, conn *grpc.ClientConn, req *discoveryv3.DiscoveryRequest) error {
			_, err := clusterservice.NewClusterDiscoveryServiceClient(conn).FetchClusters(ctx, req)
			return err
		})
	}
	if !strings.Contains(e.logs.String(), "xds stream refused") {
		t.Error("refusal not logged")
	}
}
