package server

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/pki"
)

// recvDeltaUntil receives delta responses until each of types was seen
// with resources, and fails if a Secret with resources arrives first.
func recvDeltaUntil(t *testing.T, c *deltaClient, types ...string) map[string]*discoveryv3.DeltaDiscoveryResponse {
	t.Helper()
	got := map[string]*discoveryv3.DeltaDiscoveryResponse{}
	for len(got) < len(types) {
		r := c.recv()
		if r.GetTypeUrl() == resourcev3.SecretType && len(r.GetResources()) > 0 {
			t.Fatalf("secrets %v served to an unauthenticated client", deltaNames(r))
		}
		if slices.Contains(types, r.GetTypeUrl()) && len(r.GetResources()) > 0 {
			got[r.GetTypeUrl()] = r
		}
		deltaAck(c, r)
	}
	return got
}

// Plaintext by default serves every resource but Secrets, warns at startup
// and per Gateway, and says so in its metrics.
func TestPlaintextWithholdsSecrets(t *testing.T) {
	e := startEnvWith(t, nil)
	e.update(t, gwA.resources(t, "a1"), gwB.resources(t, "b1"))

	c := newDeltaClient(t, e.conn)
	deltaSubscribe(c, gwA.gateway)
	got := recvDeltaUntil(t, c, resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.ListenerType, resourcev3.RouteType)
	for typ, r := range got {
		if names, want := deltaNames(r), gwA.names(typ); !slices.Equal(names, want) {
			t.Errorf("%s resources = %v, want %v", typ, names, want)
		}
	}
	// A new certificate and a new cluster (so a new route table, sent
	// after the secret in make-before-break order): a secret would arrive
	// before the route.
	a2 := gwA
	a2.cert, a2.clusters = "cert-2", append(slices.Clone(gwA.clusters), "c9")
	e.update(t, a2.resources(t, "a2"), gwB.resources(t, "b1"))
	recvDeltaUntil(t, c, resourcev3.RouteType)

	// Nor by the unary SDS fetch.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	r, err := secretservice.NewSecretDiscoveryServiceClient(e.conn).FetchSecrets(ctx,
		&discoveryv3.DiscoveryRequest{Node: node(gwA.gateway), ResourceNames: []string{gwA.secretName()}})
	if err != nil {
		t.Fatalf("FetchSecrets: %v", err)
	}
	if len(r.GetResources()) != 0 {
		t.Errorf("FetchSecrets served %d secrets to an unauthenticated client", len(r.GetResources()))
	}

	for _, gw := range []string{gwA.gateway, gwB.gateway} {
		if v := e.metric(t, "portico_xds_secrets_withheld", map[string]string{"gateway": gw}); v != 1 {
			t.Errorf("portico_xds_secrets_withheld{gateway=%s} = %v, want 1", gw, v)
		}
	}
	if v := e.metric(t, "portico_xds_transport_security", map[string]string{"mode": ModePlaintext}); v != 1 {
		t.Errorf("portico_xds_transport_security{mode=plaintext} = %v, want 1", v)
	}
	if v := e.metric(t, "portico_xds_transport_security", map[string]string{"mode": ModeMTLS}); v != 0 {
		t.Errorf("portico_xds_transport_security{mode=mtls} = %v, want 0", v)
	}
	logs := e.logs.String()
	for _, want := range []string{
		`level=WARN msg="xDS is served without TLS`,
		`level=WARN msg="TLS secrets of this gateway are withheld`,
		"gateway=" + gwB.gateway,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q", want)
		}
	}
	if n := strings.Count(logs, "TLS secrets of this gateway are withheld"); n != 2 {
		t.Errorf("withheld warning logged %d times, want once per gateway (2)", n)
	}

	// A Gateway that goes away takes its gauge along.
	e.update(t, a2.resources(t, "a2"))
	if _, ok := metricValue(t, e.m.Registry, "portico_xds_secrets_withheld", map[string]string{"gateway": gwB.gateway}); ok {
		t.Error("withheld gauge of a removed gateway kept")
	}
}

// With UnauthenticatedSecrets, plaintext serves Secrets too (the other
// plaintext tests rely on it), and still warns that it does.
func TestPlaintextSecretsOptIn(t *testing.T) {
	e := startEnv(t)
	e.update(t, gwA.resources(t, "a1"))
	c := newDeltaClient(t, e.conn)
	deltaSubscribe(c, gwA.gateway)
	got := recvTypes(t, c, deltaType, allTypes...)
	if names := deltaNames(got[resourcev3.SecretType]); !slices.Equal(names, []string{gwA.secretName()}) {
		t.Errorf("secrets %v", names)
	}
	if _, ok := metricValue(t, e.m.Registry, "portico_xds_secrets_withheld", map[string]string{"gateway": gwA.gateway}); ok {
		t.Error("secrets reported withheld")
	}
	if !strings.Contains(e.logs.String(), "TLS private keys included") {
		t.Error("no warning that private keys go to unauthenticated clients")
	}
}

// A connection lives at most MaxConnectionAge (and its grace): its
// streams end, and the client reconnects with a new handshake.
func TestMaxConnectionAgeClosesStreams(t *testing.T) {
	e := startEnvWith(t, func(s *Server) {
		s.UnauthenticatedSecrets = true
		s.MaxConnectionAge, s.MaxConnectionAgeGrace = 300*time.Millisecond, 200*time.Millisecond
	})
	e.update(t, gwA.resources(t, "a1"))
	c := newDeltaClient(t, e.conn)
	deltaSubscribe(c, gwA.gateway)
	recvTypes(t, c, deltaType, allTypes...)
	err := c.recvErr() // fails the test if the stream lives on for waitTimeout
	if code := grpcstatus.Code(err); code != codes.Unavailable {
		t.Errorf("stream ended with %v, want Unavailable (connection closed)", err)
	}
	// The same ClientConn reconnects and is served again.
	again := newDeltaClient(t, e.conn)
	deltaSubscribe(again, gwA.gateway)
	recvTypes(t, again, deltaType, allTypes...)
}

// The maximum connection age defaults to 30 minutes (and a minute's
// grace); a negative one is no limit.
func TestMaxConnectionAgeDefaults(t *testing.T) {
	for _, tc := range []struct {
		age, grace, wantAge, wantGrace time.Duration
	}{
		{0, 0, 30 * time.Minute, time.Minute},
		{time.Hour, 0, time.Hour, time.Minute},
		{time.Hour, 5 * time.Second, time.Hour, 5 * time.Second},
		{-1, 0, 0, 0},
	} {
		s := &Server{MaxConnectionAge: tc.age, MaxConnectionAgeGrace: tc.grace}
		kp := s.keepaliveParams()
		if kp.MaxConnectionAge != tc.wantAge || kp.MaxConnectionAgeGrace != tc.wantGrace {
			t.Errorf("age %v grace %v: got %v %v, want %v %v", tc.age, tc.grace,
				kp.MaxConnectionAge, kp.MaxConnectionAgeGrace, tc.wantAge, tc.wantGrace)
		}
		if kp.Time != KeepaliveTime || kp.Timeout != KeepaliveTimeout {
			t.Errorf("keepalive %v %v", kp.Time, kp.Timeout)
		}
	}
}

// uids is a settable UIDLookup.
type uids struct {
	mu sync.Mutex
	m  map[string]string // "ns/name" → uid
}

func (u *uids) set(gw, uid string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if uid == "" {
		delete(u.m, gw)
	} else {
		u.m[gw] = uid
	}
}

func (u *uids) lookup(_ context.Context, ns, name string) (string, bool, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	uid, ok := u.m[ns+"/"+name]
	return uid, ok, nil
}

// With GatewayUID, a certificate must name the current Gateway's UID: the
// certificate of a deleted, or deleted and re-created, Gateway is refused,
// and the streams already open with it are closed on the next Update.
func TestMTLSRefusesCertificateOfRecreatedGateway(t *testing.T) {
	ca := newTestCA(t)
	live := &uids{m: map[string]string{gwA.gateway: "0a0a", gwB.gateway: "0b0b"}}
	e, addr := startTLSEnvWith(t, TLSConfig(staticSource(ca.server(), ca.pool())), func(s *Server) {
		s.GatewayUID = live.lookup
	})
	e.update(t, gwA.resources(t, "a1"), gwB.resources(t, "b1"))

	oldCert := ca.clientUID(gwA.gateway, "0a0a")
	open := newDeltaClient(t, dialTLS(t, addr, oldCert, ca.pool()))
	deltaSubscribe(open, gwA.gateway)
	recvTypes(t, open, deltaType, allTypes...)
	bStream := newDeltaClient(t, dialTLS(t, addr, ca.clientUID(gwB.gateway, "0b0b"), ca.pool()))
	deltaSubscribe(bStream, gwB.gateway)
	for _, r := range recvTypes(t, bStream, deltaType, allTypes...) {
		deltaAck(bStream, r)
	}

	// Gateway A is deleted and re-created: a new UID. The next Update
	// (the translation of that change) closes the old certificate's
	// connection; gw-b's stream is untouched.
	live.set(gwA.gateway, "1a1a")
	e.update(t, gwA.resources(t, "a2"), gwB.resources(t, "b1"))
	if err := open.recvErr(); grpcstatus.Code(err) != codes.Unavailable {
		t.Errorf("stream of the old certificate ended with %v, want Unavailable (connection closed)", err)
	}
	eventually(t, "revoked connection counted", func() bool {
		return e.metric(t, "portico_xds_revoked_connections_total", nil) == 1
	})
	b2 := gwB
	b2.cert = "cert-b2"
	e.update(t, gwA.resources(t, "a2"), b2.resources(t, "b2"))
	if r := bStream.recv(); r.GetTypeUrl() != resourcev3.SecretType {
		t.Errorf("gw-b got %s, want its secret change", r.GetTypeUrl())
	}

	// A new stream with the old certificate is refused, so is one without
	// UID, and unary fetches; the new certificate is served.
	for name, cert := range map[string]*tls.Certificate{"old uid": oldCert, "no uid": ca.client(gwA.gateway)} {
		expectRefused(t, name, dialTLS(t, addr, cert, ca.pool()), gwA.gateway, func(ctx context.Context, conn *grpc.ClientConn, req *discoveryv3.DiscoveryRequest) error {
			_, err := secretservice.NewSecretDiscoveryServiceClient(conn).FetchSecrets(ctx, req)
			return err
		})
	}
	if logs := e.logs.String(); !strings.Contains(logs, "a deleted gateway of that name") ||
		!strings.Contains(logs, "closing xDS connections of a revoked client certificate") {
		t.Error("refusal or revocation not logged")
	}
	fresh := newDeltaClient(t, dialTLS(t, addr, ca.clientUID(gwA.gateway, "1a1a"), ca.pool()))
	deltaSubscribe(fresh, gwA.gateway)
	recvTypes(t, fresh, deltaType, allTypes...)

	// Deleted for good: refused, and the open stream closed.
	live.set(gwA.gateway, "")
	e.update(t, gwB.resources(t, "b2"))
	if err := fresh.recvErr(); grpcstatus.Code(err) != codes.Unavailable {
		t.Errorf("stream of a deleted gateway ended with %v, want Unavailable", err)
	}
	conn := dialTLS(t, addr, ca.clientUID(gwA.gateway, "1a1a"), ca.pool())
	if err := refusal(t, conn, metrics.KindDelta, gwA.gateway); grpcstatus.Code(err) != codes.Unauthenticated ||
		!strings.Contains(err.Error(), "does not exist") {
		t.Errorf("certificate of a deleted gateway: %v, want Unauthenticated", err)
	}
}

// Connections live at most MaxConnectionAge, so a proxy presents its
// current certificate again: here a rotated one (the Gateway re-created,
// which the server learns only from its lookup, with no Update).
func TestMaxConnectionAgeReauthenticates(t *testing.T) {
	ca := newTestCA(t)
	live := &uids{m: map[string]string{gwA.gateway: "0a0a"}}
	e, addr := startTLSEnvWith(t, TLSConfig(staticSource(ca.server(), ca.pool())), func(s *Server) {
		s.GatewayUID = live.lookup
		s.MaxConnectionAge, s.MaxConnectionAgeGrace = 300*time.Millisecond, 200*time.Millisecond
	})
	e.update(t, gwA.resources(t, "a1"))

	var current atomic.Pointer[tls.Certificate]
	current.Store(ca.clientUID(gwA.gateway, "0a0a"))
	var handshakes atomic.Int32
	cfg := &tls.Config{RootCAs: ca.pool(), ServerName: serverName, MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			handshakes.Add(1)
			return current.Load(), nil
		}}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := newDeltaClient(t, conn)
	deltaSubscribe(c, gwA.gateway)
	recvTypes(t, c, deltaType, allTypes...)

	live.set(gwA.gateway, "1a1a")
	current.Store(ca.clientUID(gwA.gateway, "1a1a"))
	if err := c.recvErr(); grpcstatus.Code(err) != codes.Unavailable {
		t.Errorf("stream ended with %v, want Unavailable", err)
	}
	again := newDeltaClient(t, conn)
	deltaSubscribe(again, gwA.gateway)
	recvTypes(t, again, deltaType, allTypes...)
	if n := handshakes.Load(); n < 2 {
		t.Errorf("%d TLS handshakes, want a new one after the connection's maximum age", n)
	}
}

// writePEM writes data to dir/name and returns the path.
func writePEM(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// serverFiles issues a serving certificate of ca into dir (tls.crt,
// tls.key) and returns the paths.
func serverFiles(t *testing.T, ca *testCA, dir string) (certFile, keyFile string) {
	t.Helper()
	certPEM, keyPEM, err := ca.ca.IssueServer(pki.ServerDNSNames("portico-system"), nil, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, dir, "tls.crt", certPEM), writePEM(t, dir, "tls.key", keyPEM)
}

// Standalone's TLS from files: with a client CA, mutual TLS with the same
// Gateway identities as the controller's (no UID checked), Secrets
// served; the files are re-read when they change. Without one, TLS
// without client authentication, Secrets withheld.
func TestFileSourceMTLSAndTLS(t *testing.T) {
	ca := newTestCA(t)
	dir := t.TempDir()
	certFile, keyFile := serverFiles(t, ca, dir)
	caFile := writePEM(t, dir, "ca.crt", ca.ca.CertPEM())
	src, err := NewFileSource(certFile, keyFile, caFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, addr := startTLSEnv(t, ServerTLSConfig(src, true))
	if m := e.srv.Mode(); m != ModeMTLS {
		t.Fatalf("mode %s, want mtls", m)
	}
	e.update(t, gwA.resources(t, "a1"), gwB.resources(t, "b1"))

	c := newDeltaClient(t, dialTLS(t, addr, ca.client(gwA.gateway), ca.pool()))
	deltaSubscribe(c, gwA.gateway)
	got := recvTypes(t, c, deltaType, allTypes...)
	if names := deltaNames(got[resourcev3.SecretType]); !slices.Equal(names, []string{gwA.secretName()}) {
		t.Errorf("secrets over mTLS: %v", names)
	}
	conn := dialTLS(t, addr, ca.client(gwA.gateway), ca.pool())
	if err := refusal(t, conn, metrics.KindDelta, gwB.gateway); grpcstatus.Code(err) != codes.PermissionDenied {
		t.Errorf("gw-a's certificate asking for gw-b: %v, want PermissionDenied", err)
	}
	if err := refusal(t, dialTLS(t, addr, nil, ca.pool()), metrics.KindDelta, gwA.gateway); grpcstatus.Code(err) != codes.Unavailable {
		t.Errorf("no client certificate: %v, want a handshake failure", err)
	}

	// Rotated on disk: the next handshake serves the new certificate.
	before, _, _ := src.Current()
	serverFiles(t, ca, dir)
	after, _, _ := src.Current()
	if after.Leaf.SerialNumber.Cmp(before.Leaf.SerialNumber) == 0 {
		t.Error("rotated certificate file not picked up")
	}
	// Broken on disk: the last good one stays.
	writePEM(t, dir, "tls.key", []byte("junk"))
	if kept, _, _ := src.Current(); kept != after {
		t.Error("a broken key file replaced the loaded certificate")
	}

	// TLS without a client CA: any client, no Secrets.
	plain, err := NewFileSource(certFile, filepath.Join(t.TempDir(), "missing.key"), "", nil)
	if err == nil || plain != nil {
		t.Fatalf("NewFileSource with a missing key: %v", err)
	}
	dir2 := t.TempDir()
	certFile2, keyFile2 := serverFiles(t, ca, dir2)
	tlsOnly, err := NewFileSource(certFile2, keyFile2, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	e2, addr2 := startTLSEnv(t, ServerTLSConfig(tlsOnly, false))
	if m := e2.srv.Mode(); m != ModeTLS {
		t.Fatalf("mode %s, want tls", m)
	}
	e2.update(t, gwA.resources(t, "a1"))
	c2 := newDeltaClient(t, dialTLS(t, addr2, nil, ca.pool()))
	deltaSubscribe(c2, gwA.gateway)
	recvDeltaUntil(t, c2, resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.ListenerType, resourcev3.RouteType)
	if v := e2.metric(t, "portico_xds_transport_security", map[string]string{"mode": ModeTLS}); v != 1 {
		t.Errorf("transport_security{mode=tls} = %v", v)
	}
	if !strings.Contains(e2.logs.String(), "xDS is served over TLS without client certificates") {
		t.Error("no warning for TLS without client authentication")
	}
}

func TestNewFileSourceErrors(t *testing.T) {
	dir := t.TempDir()
	junk := writePEM(t, dir, "junk.pem", []byte("junk"))
	ca := newTestCA(t)
	certFile, keyFile := serverFiles(t, ca, dir)
	for name, args := range map[string][3]string{
		"no key":       {certFile, "", ""},
		"junk cert":    {junk, keyFile, ""},
		"junk CA":      {certFile, keyFile, junk},
		"missing CA":   {certFile, keyFile, filepath.Join(dir, "nope")},
		"missing cert": {filepath.Join(dir, "nope"), keyFile, ""},
	} {
		if _, err := NewFileSource(args[0], args[1], args[2], nil); err == nil {
			t.Errorf("%s: no error", name)
		} else if errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
