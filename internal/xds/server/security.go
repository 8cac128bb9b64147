package server

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/pki"
)

// Transport security modes of the xDS server (the "mode" label of
// portico_xds_transport_security).
const (
	// ModePlaintext: no TLS (Server.TLS nil). Anyone who reaches the
	// port may ask for any Gateway's configuration.
	ModePlaintext = "plaintext"
	// ModeTLS: TLS without client certificates. The traffic is private,
	// but clients are not authenticated: anyone may still ask for any
	// Gateway's configuration.
	ModeTLS = "tls"
	// ModeMTLS: client certificates required; a proxy gets only the
	// Gateway its certificate names.
	ModeMTLS = "mtls"
)

var modes = []string{ModePlaintext, ModeTLS, ModeMTLS}

// Mode is the transport security of s, from its TLS configuration: mutual
// TLS when TLS is set and asks for client certificates.
func (s *Server) Mode() string {
	switch {
	case s.TLS == nil:
		return ModePlaintext
	case s.TLS.ClientAuth == tls.NoClientCert:
		return ModeTLS
	}
	return ModeMTLS
}

// authenticated: streams are bound to the Gateway of a client certificate.
func (s *Server) authenticated() bool { return s.Mode() == ModeMTLS }

// withholdSecrets: Secrets (TLS private keys) are not served, because
// clients are not authenticated and UnauthenticatedSecrets is off.
func (s *Server) withholdSecrets() bool { return !s.authenticated() && !s.UnauthenticatedSecrets }

// securityMetrics are the xDS server's gauges of its transport security.
type securityMetrics struct {
	// mode is 1 for the mode being served, 0 for the others.
	mode *prometheus.GaugeVec
	// withheld counts the Secrets of each Gateway not served.
	withheld *prometheus.GaugeVec
	// revoked counts connections closed because their client
	// certificate no longer names a current Gateway.
	revoked prometheus.Counter
}

func newSecurityMetrics(m *metrics.Metrics) *securityMetrics {
	sm := &securityMetrics{
		mode: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Subsystem: "xds", Name: "transport_security",
			Help: "1 for the transport security the xDS server uses (plaintext, tls: no client authentication, " +
				"mtls: client certificates naming the Gateway), 0 for the others. Alert on mode!=\"mtls\".",
		}, []string{"mode"}),
		withheld: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Subsystem: "xds", Name: "secrets_withheld",
			Help: "Secrets (TLS private keys) of a Gateway not served because xDS clients are not authenticated; " +
				"the Gateway's HTTPS listeners do not serve.",
		}, []string{"gateway"}),
		revoked: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metrics.Namespace, Subsystem: "xds", Name: "revoked_connections_total",
			Help: "xDS connections closed because their client certificate names a Gateway that was deleted or re-created.",
		}),
	}
	sm.mode = registerCollector(m.Registry, sm.mode)
	sm.withheld = registerCollector(m.Registry, sm.withheld)
	sm.revoked = registerCollector(m.Registry, sm.revoked)
	return sm
}

// registerCollector registers c, or returns the equal collector already registered
// (several Servers may share one metrics.Metrics).
func registerCollector[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}

func (sm *securityMetrics) setMode(mode string) {
	for _, m := range modes {
		v := 0.0
		if m == mode {
			v = 1
		}
		sm.mode.WithLabelValues(m).Set(v)
	}
}

// warnInsecure logs, at WARN, what an xDS server without client
// authentication exposes.
func (s *Server) warnInsecure(addr string) {
	mode := s.Mode()
	if mode == ModeMTLS {
		return
	}
	what := "without TLS"
	if mode == ModeTLS {
		what = "over TLS without client certificates"
	}
	if s.UnauthenticatedSecrets {
		s.log.Warn("xDS is served "+what+": any client that reaches "+addr+
			" gets the configuration of every Gateway, TLS private keys included (unauthenticated secrets are on)",
			"address", addr, "mode", mode)
		return
	}
	s.log.Warn("xDS is served "+what+": any client that reaches "+addr+
		" gets the configuration of every Gateway. TLS private keys (SDS Secrets) are withheld, "+
		"so HTTPS listeners will not serve; use mutual TLS, or turn on unauthenticated secrets on a trusted network",
		"address", addr, "mode", mode)
}

// noteWithheld records and logs, once per change, the Secrets of gw that
// are not served. Called with s.mu held.
func (s *Server) noteWithheld(gw string, n int) {
	if n == s.withheld[gw] {
		return
	}
	if n == 0 {
		delete(s.withheld, gw)
		s.sec.withheld.DeleteLabelValues(gw)
		return
	}
	s.withheld[gw] = n
	s.sec.withheld.WithLabelValues(gw).Set(float64(n))
	s.log.Warn("TLS secrets of this gateway are withheld: xDS clients are not authenticated, "+
		"so its HTTPS listeners will not serve (Envoy waits for the secrets, then refuses TLS handshakes)",
		"gateway", gw, "secrets", n, "mode", s.Mode())
}

// trackingCreds are TLS server credentials whose AuthInfo also carries the
// connection, so that the server can close the connection of a proxy whose
// certificate was revoked (every stream on it ends, and the proxy has to
// reconnect and authenticate again).
type trackingCreds struct {
	credentials.TransportCredentials
}

// connInfo is the AuthInfo of trackingCreds.
type connInfo struct {
	credentials.TLSInfo
	conn net.Conn
}

func (c trackingCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return conn, info, err
	}
	if t, ok := info.(credentials.TLSInfo); ok {
		return conn, connInfo{TLSInfo: t, conn: conn}, nil
	}
	return conn, info, nil
}

func (c trackingCreds) Clone() credentials.TransportCredentials {
	return trackingCreds{c.TransportCredentials.Clone()}
}

// kicker broadcasts "check again" to every Serve's revalidation loop.
type kicker struct {
	mu sync.Mutex
	ch chan struct{}
}

func (k *kicker) wait() <-chan struct{} {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ch == nil {
		k.ch = make(chan struct{})
	}
	return k.ch
}

func (k *kicker) kick() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ch != nil {
		close(k.ch)
	}
	k.ch = make(chan struct{})
}

// revalidateLoop re-checks the identities of cb's open streams each time
// the server is kicked (after every Update), until ctx is done.
func (s *Server) revalidateLoop(ctx context.Context, cb *callbacks) {
	next := s.kicks.wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-next:
		}
		// Take the next channel before checking, so that a kick during
		// the check causes another one.
		next = s.kicks.wait()
		s.revalidate(ctx, cb)
	}
}

// revalidate closes the connections of cb's streams whose client
// certificate no longer names a current Gateway (checkUID), once per
// identity.
func (s *Server) revalidate(ctx context.Context, cb *callbacks) {
	byID := cb.openIdentities()
	ids := make([]pki.Identity, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].URI() < ids[j].URI() })
	for _, id := range ids {
		err := checkUID(ctx, s.GatewayUID, id)
		if err == nil || ctx.Err() != nil {
			continue
		}
		if isUnavailable(err) {
			s.log.Warn("could not re-check xDS client identities", "gateway", id.Gateway(), "error", err)
			continue
		}
		conns := byID[id]
		s.log.Warn("closing xDS connections of a revoked client certificate", "gateway", id.Gateway(),
			"uid", id.UID, "connections", len(conns), "error", err)
		for _, c := range conns {
			_ = c.Close()
			s.sec.revoked.Inc()
		}
	}
}

func isUnavailable(err error) bool { return status.Code(err) == codes.Unavailable }
