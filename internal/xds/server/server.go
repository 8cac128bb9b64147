// Package server serves the xDS resources of every Gateway to its Envoy
// proxies over gRPC, with go-control-plane's xDS server and, per Gateway
// and resource type, one of its LinearCaches for state-of-the-world
// streams and a deltaCache for delta streams (cache.go, delta.go), updated
// with the resources that changed only.
//
// A proxy is matched to its Gateway by node.cluster, which must be
// "<namespace>/<gateway>" (the same string as translate.Resources.Gateway).
// State-of-the-world and incremental (delta) xDS are both served through ADS;
// the per-type services (CDS, EDS, LDS, RDS, SDS) are registered too
// for proxies that do not use ADS. Every Gateway is served every type of
// servedTypes, so that resources of a type a Gateway no longer has are
// removed from its proxies; delta streams get route tables in VHDS form
// and their virtual hosts by VHDS (over ADS), state-of-the-world streams
// whole tables; large tables in scoped form come to both as a route config
// per host, scopes (SRDS) and a host-scope filter (ECDS). A change is
// applied in an order that never lets a proxy refer to what it lacks:
// clusters, load assignments, secrets, virtual hosts, route configs,
// scopes, filters, listeners; removals in the reverse order.
//
// # Transport security
//
// With Server.TLS set to a configuration that requires client certificates
// (TLSConfig, or ServerTLSConfig with a client CA pool) the server requires
// mTLS, and a proxy may only ask for the Gateway named by its client
// certificate (see auth.go): node.cluster must equal it, or the stream is
// refused with PermissionDenied. With Server.GatewayUID set (the
// controller), the certificate must also name the UID of the current
// Gateway object; after every Update the identities of open streams are
// checked again and the connections of a deleted or re-created Gateway's
// certificates are closed (security.go). Connections live at most
// MaxConnectionAge (30 minutes by default, plus a grace period), so every
// proxy re-authenticates with its current, short-lived certificate at
// least that often.
//
// Without client certificates (plaintext, or TLS without a client CA) any
// client that reaches the port may ask for any Gateway. Such a server
// therefore withholds Secrets — the private keys of HTTPS listeners —
// unless UnauthenticatedSecrets is set: every other resource is served, a
// proxy's HTTPS listeners wait for their certificate (Envoy's initial
// fetch timeout, 15 s) and then refuse TLS handshakes, and the server logs
// a warning per Gateway and reports portico_xds_secrets_withheld. Gateway
// status is not changed: the translation is valid; the transport is what
// keeps the keys back. Serve logs at WARN, and portico_xds_transport_security
// reports, whenever clients are not authenticated.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/pki"
	"github.com/portico-dev/portico/internal/proxysync"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// Defaults for the gRPC server built by Serve.
const (
	// MaxConcurrentStreams bounds the streams of one proxy connection. An
	// Envoy needs one ADS stream (or five without ADS); the margin covers
	// reconnect overlap.
	MaxConcurrentStreams = 1024
	// KeepaliveMinTime is the most frequent client keepalive ping accepted.
	KeepaliveMinTime = 15 * time.Second
	// KeepaliveTime is how long a connection may be idle before the server
	// pings it; KeepaliveTimeout is how long it waits for the ping ack
	// before closing the connection to a dead proxy.
	KeepaliveTime    = 30 * time.Second
	KeepaliveTimeout = 10 * time.Second
	// DefaultShutdownTimeout bounds GracefulStop in Serve before Stop.
	DefaultShutdownTimeout = 10 * time.Second
	// DefaultMaxConnectionAge is how long a proxy connection lives before
	// the server sends GOAWAY (gRPC adds ±10% jitter), and
	// DefaultMaxConnectionAgeGrace how long it then waits before closing
	// it: xDS streams never end on their own, so this is when the proxy
	// reconnects, with a new TLS handshake and its current certificate.
	DefaultMaxConnectionAge      = 30 * time.Minute
	DefaultMaxConnectionAgeGrace = time.Minute
	// MaxRequestBytes bounds a request from a proxy. Requests are small
	// but for one: a delta stream that reconnects lists every resource it
	// holds with its version (initial_resource_versions), about 100 bytes
	// each, 5 MB at 50,000 resources, beyond gRPC's default of 4 MiB. The
	// bound leaves room for 600,000. Responses have no bound of gRPC's on
	// the server, and Envoy's xDS client sets none by default.
	MaxRequestBytes = 64 << 20
)

// Server serves xDS snapshots, one per Gateway, keyed by node.cluster.
type Server struct {
	// ShutdownTimeout bounds the graceful stop of Serve; after it the
	// remaining connections are closed. Zero means DefaultShutdownTimeout.
	// Set it before calling Serve.
	ShutdownTimeout time.Duration
	// TLS, when not nil, makes Serve use TLS with this configuration. When
	// it asks for client certificates (ClientAuth is not NoClientCert, as
	// with TLSConfig) the server requires mTLS and binds each stream to
	// the Gateway of its verified client certificate. Nil serves plaintext
	// to any client. Set it before calling Update or Serve.
	TLS *tls.Config
	// UnauthenticatedSecrets serves Secrets (the TLS private keys of
	// HTTPS listeners) even when clients are not authenticated by a client
	// certificate (plaintext, or TLS without client certificates). Off,
	// such a server withholds them (see the package doc). Set it before
	// calling Update.
	UnauthenticatedSecrets bool
	// GatewayUID, when not nil and the server requires mTLS, is the UID
	// of the current Gateway of a name: a client certificate must name
	// it (see auth.go). Nil checks no UID (standalone: no Gateway UIDs).
	// Set it before calling Serve.
	GatewayUID UIDLookup
	// MaxConnectionAge and MaxConnectionAgeGrace bound the life of a
	// connection (see DefaultMaxConnectionAge). Zero means the default;
	// a negative MaxConnectionAge means no limit. Set them before Serve.
	MaxConnectionAge, MaxConnectionAgeGrace time.Duration

	log   *slog.Logger
	m     *metrics.Metrics
	sec   *securityMetrics
	cache *gatewayCache
	kicks kicker // after each Update: re-check open streams' identities

	mu       sync.Mutex           // serialises Update
	versions map[string]string    // gateway → version set in the cache
	since    map[string]time.Time // gateway → when its version was set
	withheld map[string]int       // gateway → Secrets not served

	// cbs are the callbacks of the running Serves, whose streams
	// ProxyReport lists.
	cbMu sync.Mutex
	cbs  map[*callbacks]struct{}
	// rev counts the changes of what ProxyReport reports.
	rev atomic.Uint64
}

// New returns a Server with an empty cache. A nil log discards
// logs; a nil m uses a private metrics.Metrics.
func New(log *slog.Logger, m *metrics.Metrics) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = metrics.New()
	}
	log = log.With("component", "xds-server")
	s := &Server{
		log:      log,
		m:        m,
		sec:      newSecurityMetrics(m),
		cache:    newGatewayCache(cacheLogger{log}),
		versions: map[string]string{},
		since:    map[string]time.Time{},
		withheld: map[string]int{},
		cbs:      map[*callbacks]struct{}{},
	}
	registerProxyCollector(m, s)
	return s
}

// Served returns the resources served to the proxies of gateway
// ("<namespace>/<name>"), and false when it is not served.
func (s *Server) Served(gateway string) (*translate.Resources, bool) {
	return s.cache.resources(gateway)
}

// Update replaces the set of served Gateways with res: the resources of
// each gateway whose version changed are set (waking the proxies watching
// them, see gatewayCache), and each gateway absent from res stops being
// served. A gateway whose resources are inconsistent keeps its previous
// ones; such failures are returned joined, after all other gateways were
// updated. Update does not block on proxies; ctx is unused.
func (s *Server) Update(_ context.Context, res []*translate.Resources) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.kicks.kick()
	withhold := s.withholdSecrets()
	s.cache.mu.Lock()
	s.cache.withholdSecrets = withhold
	s.cache.mu.Unlock()

	var errs []error
	present := make(map[string]bool, len(res))
	for _, r := range res {
		if r == nil {
			continue
		}
		gw := r.Gateway
		if gw == "" {
			errs = append(errs, errors.New("xds resources without gateway name"))
			continue
		}
		if present[gw] {
			errs = append(errs, fmt.Errorf("gateway %s: duplicate xds resources, first kept", gw))
			continue
		}
		present[gw] = true
		if r.Version == "" {
			errs = append(errs, fmt.Errorf("gateway %s: xds resources without version", gw))
			continue
		}
		if old, ok := s.versions[gw]; ok && old == r.Version {
			continue
		}
		if err := s.cache.set(gw, r); err != nil {
			// The version is not recorded, so the next Update retries.
			errs = append(errs, fmt.Errorf("xds version %s: %w", r.Version, err))
			s.log.Error("xds resources rejected, keeping the previous ones",
				"gateway", gw, "version", r.Version, "error", err)
			continue
		}
		s.versions[gw] = r.Version
		s.since[gw] = time.Now()
		s.rev.Add(1)
		if withhold {
			s.noteWithheld(gw, len(r.Secrets))
		}
		s.m.SetSnapshotVersion(gw, r.Version)
		s.log.Info("xds resources updated", "gateway", gw, "version", r.Version)
	}

	var gone []string
	for gw := range s.versions {
		if !present[gw] {
			gone = append(gone, gw)
		}
	}
	sort.Strings(gone)
	for _, gw := range gone {
		s.cache.remove(gw)
		delete(s.versions, gw)
		delete(s.since, gw)
		s.rev.Add(1)
		s.noteWithheld(gw, 0)
		s.m.DeleteGateway(gw)
		s.log.Info("xds gateway no longer served", "gateway", gw)
	}
	return errors.Join(errs...)
}

// ProxyReport is the replica's report of its proxies (package
// proxysync): the Gateways it serves with their versions, and the sync
// record of every open stream, sorted by gateway, node id and stream.
func (s *Server) ProxyReport(replica string) proxysync.Report {
	rep := proxysync.Report{Replica: replica, Time: time.Now(), Gateways: []proxysync.GatewayVersion{}, Proxies: []proxysync.Proxy{}}
	s.mu.Lock()
	for gw, v := range s.versions {
		rep.Gateways = append(rep.Gateways, proxysync.GatewayVersion{Gateway: gw, Version: v, Since: s.since[gw]})
	}
	s.mu.Unlock()
	sort.Slice(rep.Gateways, func(i, j int) bool { return rep.Gateways[i].Gateway < rep.Gateways[j].Gateway })
	s.cbMu.Lock()
	for cb := range s.cbs {
		rep.Proxies = cb.proxies(replica, rep.Proxies)
	}
	s.cbMu.Unlock()
	sort.Slice(rep.Proxies, func(i, j int) bool {
		a, b := &rep.Proxies[i], &rep.Proxies[j]
		if a.Gateway != b.Gateway {
			return a.Gateway < b.Gateway
		}
		if a.NodeID != b.NodeID {
			return a.NodeID < b.NodeID
		}
		return a.Stream < b.Stream
	})
	return rep
}

// ProxyRevision counts the changes of what ProxyReport reports, but for
// the time: equal revisions, equal reports.
func (s *Server) ProxyRevision() uint64 { return s.rev.Load() }

// servedTypes are the resource types of a Gateway's snapshot.
var servedTypes = []resourcev3.Type{
	resourcev3.ListenerType, resourcev3.RouteType, resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.SecretType,
	// Route tables in scoped form: their scopes (SRDS) and host-scope
	// filters (ECDS), see translate's scoped.go.
	resourcev3.ScopedRouteType, resourcev3.ExtensionConfigType,
}

// ServerOptions returns the default gRPC options of Serve: keepalive
// enforcement and parameters, the maximum connection age and the stream
// limit. Options passed to Serve are applied after these and so override
// them.
func ServerOptions() []grpc.ServerOption { return (&Server{}).options() }

// options are the gRPC options of s: ServerOptions with s's maximum
// connection age.
func (s *Server) options() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.MaxRecvMsgSize(MaxRequestBytes),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{
			MinTime:             KeepaliveMinTime,
			PermitWithoutStream: true,
		}),
		grpc.KeepaliveParams(s.keepaliveParams()),
	}
}

// keepaliveParams are the keepalive parameters of s, the maximum
// connection age among them (zero: gRPC's infinity).
func (s *Server) keepaliveParams() keepalive.ServerParameters {
	kp := keepalive.ServerParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}
	age, grace := s.MaxConnectionAge, s.MaxConnectionAgeGrace
	if age == 0 {
		age = DefaultMaxConnectionAge
	}
	if grace <= 0 {
		grace = DefaultMaxConnectionAgeGrace
	}
	if age > 0 {
		kp.MaxConnectionAge, kp.MaxConnectionAgeGrace = age, grace
	}
	return kp
}

// Serve serves xDS over gRPC on lis until ctx is done, then stops gracefully,
// waiting at most ShutdownTimeout before closing remaining connections. Open
// xDS streams end when ctx is done. opts are added to ServerOptions (and the
// credentials of TLS); pass TLS credentials through the TLS field, not opts,
// so that streams are authorized. It returns nil after a shutdown caused by ctx, or the error
// that made the gRPC server fail. lis is closed on return.
func (s *Server) Serve(ctx context.Context, lis net.Listener, opts ...grpc.ServerOption) error {
	all := s.options()
	if s.TLS != nil {
		all = append(all, grpc.Creds(trackingCreds{credentials.NewTLS(s.TLS)}))
	}
	gs := grpc.NewServer(append(all, opts...)...)
	// Each Serve has its own xDS server (whose stream handlers end with
	// ctx) and its own callbacks (stream ids are per xDS server).
	cb := newCallbacks(s.log, s.m)
	cb.rev = &s.rev
	cb.mtls = s.authenticated()
	if cb.mtls && s.GatewayUID != nil {
		lookup := s.GatewayUID
		cb.verify = func(ctx context.Context, id pki.Identity) error { return checkUID(ctx, lookup, id) }
	}
	xds := serverv3.NewServer(ctx, s.cache, cb)
	register(gs, xds)
	s.cbMu.Lock()
	s.cbs[cb] = struct{}{}
	s.cbMu.Unlock()
	defer func() {
		s.cbMu.Lock()
		delete(s.cbs, cb)
		s.cbMu.Unlock()
	}()

	s.sec.setMode(s.Mode())
	s.warnInsecure(lis.Addr().String())
	revalidated := make(chan struct{})
	rctx, stopRevalidate := context.WithCancel(ctx)
	if cb.verify != nil {
		go func() {
			defer close(revalidated)
			s.revalidateLoop(rctx, cb)
		}()
	} else {
		close(revalidated)
	}
	defer func() {
		stopRevalidate()
		<-revalidated
	}()

	serveErr := make(chan error, 1)
	go func() { serveErr <- gs.Serve(lis) }()
	s.log.Info("xds server listening", "address", lis.Addr().String(), "mode", s.Mode(),
		"unauthenticated_secrets", s.UnauthenticatedSecrets)

	select {
	case err := <-serveErr:
		gs.Stop()
		return fmt.Errorf("xds server: %w", err)
	case <-ctx.Done():
	}

	timeout := s.ShutdownTimeout
	if timeout <= 0 {
		timeout = DefaultShutdownTimeout
	}
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		s.log.Warn("xds server graceful stop timed out, closing connections", "timeout", timeout)
		gs.Stop()
		<-stopped
	}
	if err := <-serveErr; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("xds server: %w", err)
	}
	s.log.Info("xds server stopped")
	return nil
}

func register(gs *grpc.Server, xds serverv3.Server) {
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(gs, xds)
	clusterservice.RegisterClusterDiscoveryServiceServer(gs, xds)
	endpointservice.RegisterEndpointDiscoveryServiceServer(gs, xds)
	listenerservice.RegisterListenerDiscoveryServiceServer(gs, xds)
	routeservice.RegisterRouteDiscoveryServiceServer(gs, xds)
	secretservice.RegisterSecretDiscoveryServiceServer(gs, xds)
}
