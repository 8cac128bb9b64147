package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/pki"
)

// callbacks observe the xDS streams of one go-control-plane server: they keep
// the stream gauges and request/NACK counters, log NACKs, and refuse proxies
// that do not say which gateway they belong to, or (with mTLS) whose client
// certificate names another gateway, or a Gateway that no longer exists
// (verify).
//
// They also stop SotW NACK loops. A SotW NACK carries the last version the
// proxy accepted, which is empty when it never accepted one; a cache seeing
// an empty version answers at once with everything it has, that is the
// rejected resources again, which the proxy rejects again, and so on.
// OnStreamRequest therefore rewrites the version_info of a NACK (of the
// latest response) to the rejected version, so the cache waits for a change
// before sending that type again. Delta xDS needs no such care: the cache
// only sends resources that changed.
type callbacks struct {
	log *slog.Logger
	m   *metrics.Metrics
	// mtls: streams are bound to the Gateway of the peer's verified client
	// certificate when they open (see auth.go).
	mtls bool
	// verify, when not nil, checks a client identity when a stream opens
	// and on unary fetches (checkUID).
	verify func(context.Context, pki.Identity) error

	// now is the clock of the proxies' sync records (time.Now); rev,
	// when set, counts their changes (Server.ProxyRevision).
	now func() time.Time
	rev *atomic.Uint64

	mu sync.Mutex
	// State of each open stream. The SotW and delta servers number their
	// streams independently, hence two maps.
	sotw  map[int64]*streamState
	delta map[int64]*streamState
}

type streamState struct {
	identity string               // mTLS: gateway of the client certificate
	id       pki.Identity         // mTLS: the client certificate's identity
	conn     net.Conn             // mTLS: the peer's connection, if tracked
	gateway  string               // node.cluster, bound by the first request
	nodeID   string               // node.id of the first request
	sent     map[string]sentState // SotW: last response sent, by type URL
	opened   time.Time
	// sync is what was sent of each type and what the proxy answered
	// (proxies.go).
	sync map[string]*typeSync
}

type sentState struct{ nonce, version string }

var _ serverv3.Callbacks = (*callbacks)(nil)

func newCallbacks(log *slog.Logger, m *metrics.Metrics) *callbacks {
	return &callbacks{log: log, m: m, now: time.Now, sotw: map[int64]*streamState{}, delta: map[int64]*streamState{}}
}

// bind returns the state of stream id in streams, binding the stream to the
// gateway named by node.cluster on its first request. Only the first request
// of a stream must carry the node. With mTLS, the stream was opened with an
// identity, which node.cluster must equal. The caller holds c.mu.
func (c *callbacks) bind(streams map[int64]*streamState, id int64, node *corev3.Node) (*streamState, error) {
	st, ok := streams[id]
	if c.mtls {
		if !ok {
			return nil, status.Error(codes.Unauthenticated, "stream has no client identity")
		}
		if err := authorize(st.identity, node); err != nil {
			return nil, err
		}
		ok = st.gateway != ""
	}
	cluster := node.GetCluster()
	switch {
	case cluster == "" && ok:
		return st, nil
	case cluster == "":
		return nil, status.Errorf(codes.InvalidArgument,
			"node %q has no cluster: set node.cluster (envoy --service-cluster) to <namespace>/<gateway>",
			node.GetId())
	case ok && cluster != st.gateway:
		return nil, status.Errorf(codes.InvalidArgument,
			"node.cluster changed from %q to %q on an open stream", st.gateway, cluster)
	case ok:
		return st, nil
	}
	if st == nil {
		st = c.newStreamState()
		streams[id] = st
	}
	st.gateway, st.nodeID = cluster, node.GetId()
	return st, nil
}

// open counts and logs a stream of kind (metrics.KindSotW or KindDelta)
// that opens and, when mTLS is on, binds it to the Gateway identity of the
// peer; streams are the open streams of kind.
func (c *callbacks) open(ctx context.Context, kind string, streams map[int64]*streamState, id int64, typeURL string) error {
	c.m.XDSStreams.WithLabelValues(kind).Inc()
	c.log.Debug("xds stream opened", "kind", kind, "stream", id,
		"type_url", typeURL, "peer", peerAddr(ctx))
	if !c.mtls {
		return nil
	}
	ident, cert, conn, err := peerIdentity(ctx)
	if err == nil && c.verify != nil {
		err = c.verify(ctx, ident)
	}
	if err != nil {
		c.log.Warn("xds stream refused", "kind", kind, "stream", id, "peer", peerAddr(ctx), "error", err)
		return err
	}
	c.log.Debug("xds client authenticated", "kind", kind, "stream", id, "gateway", ident.Gateway(),
		"uid", ident.UID, "serial", cert.SerialNumber.Text(16), "not_after", cert.NotAfter)
	c.mu.Lock()
	st := c.newStreamState()
	st.identity, st.id, st.conn = ident.Gateway(), ident, conn
	streams[id] = st
	c.mu.Unlock()
	return nil
}

// openIdentities returns the tracked connections of the open streams by
// client identity, each connection once.
func (c *callbacks) openIdentities() map[pki.Identity][]net.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[pki.Identity][]net.Conn{}
	seen := map[net.Conn]bool{}
	for _, streams := range []map[int64]*streamState{c.sotw, c.delta} {
		for _, st := range streams {
			if st.conn == nil || seen[st.conn] {
				continue
			}
			seen[st.conn] = true
			out[st.id] = append(out[st.id], st.conn)
		}
	}
	return out
}

// closed counts, forgets and logs a stream of kind that closed.
func (c *callbacks) closed(kind string, streams map[int64]*streamState, id int64, node *corev3.Node) {
	c.m.XDSStreams.WithLabelValues(kind).Dec()
	c.mu.Lock()
	delete(streams, id)
	c.mu.Unlock()
	c.changed()
	c.log.Debug("xds stream closed", "kind", kind, "stream", id,
		"gateway", node.GetCluster(), "node", node.GetId())
}

// streamRequest is what request reads of a SotW or delta request.
type streamRequest interface {
	GetNode() *corev3.Node
	GetTypeUrl() string
	GetResponseNonce() string
	GetErrorDetail() *rpcstatus.Status
}

// request binds stream id of kind to its Gateway (bind), counts the request
// and logs a NACK; a refused request is logged and its error returned. A
// SotW NACK also logs the version it rejects and the one it names, which
// is the last one accepted (version_info); it returns the rejected version
// when the NACK is of the latest response of its type (see the callbacks
// doc), "" otherwise. Delta streams record no response, so theirs is "".
func (c *callbacks) request(kind string, streams map[int64]*streamState, id int64, req streamRequest, accepted string) (rejected string, err error) {
	c.mu.Lock()
	st, err := c.bind(streams, id, req.GetNode())
	var gw, nodeID string
	if err == nil {
		gw, nodeID = st.gateway, st.nodeID
		c.recordRequest(st, req)
		if req.GetErrorDetail() != nil {
			if last, ok := st.sent[req.GetTypeUrl()]; ok && last.nonce == req.GetResponseNonce() {
				rejected = last.version
			}
		}
	}
	c.mu.Unlock()
	if err != nil {
		c.log.Warn("xds request refused", "kind", kind, "stream", id,
			"type_url", req.GetTypeUrl(), "error", err)
		return "", err
	}
	c.m.XDSRequests.WithLabelValues(kind, req.GetTypeUrl()).Inc()
	if req.GetErrorDetail() != nil {
		var versions []any
		if kind == metrics.KindSotW {
			versions = []any{"rejected_version", rejected, "accepted_version", accepted}
		}
		c.nack(kind, id, gw, nodeID, req.GetTypeUrl(), req.GetResponseNonce(),
			req.GetErrorDetail().GetMessage(), versions...)
	}
	return rejected, nil
}

// responded logs a response sent on stream id of kind.
func (c *callbacks) responded(kind string, id int64, node *corev3.Node, typeURL, version, nonce string, resources int, attrs ...any) {
	c.log.Debug("xds response sent", append([]any{"kind", kind, "stream", id,
		"gateway", node.GetCluster(), "type_url", typeURL,
		"version", version, "nonce", nonce, "resources", resources}, attrs...)...)
}

func (c *callbacks) OnStreamOpen(ctx context.Context, id int64, typeURL string) error {
	return c.open(ctx, metrics.KindSotW, c.sotw, id, typeURL)
}

func (c *callbacks) OnStreamClosed(id int64, node *corev3.Node) {
	c.closed(metrics.KindSotW, c.sotw, id, node)
}

func (c *callbacks) OnStreamRequest(id int64, req *discoveryv3.DiscoveryRequest) error {
	rejected, err := c.request(metrics.KindSotW, c.sotw, id, req, req.GetVersionInfo())
	if rejected != "" {
		// See the callbacks doc: wait for a snapshot newer than the
		// rejected one instead of resending it.
		req.VersionInfo = rejected
	}
	return err
}

func (c *callbacks) OnStreamResponse(_ context.Context, id int64, req *discoveryv3.DiscoveryRequest, resp *discoveryv3.DiscoveryResponse) {
	c.mu.Lock()
	if st, ok := c.sotw[id]; ok {
		st.sent[resp.GetTypeUrl()] = sentState{nonce: resp.GetNonce(), version: resp.GetVersionInfo()}
		c.recordSotwResponse(st, resp)
	}
	c.mu.Unlock()
	c.responded(metrics.KindSotW, id, req.GetNode(), resp.GetTypeUrl(), resp.GetVersionInfo(), resp.GetNonce(), len(resp.GetResources()))
}

func (c *callbacks) OnDeltaStreamOpen(ctx context.Context, id int64, typeURL string) error {
	return c.open(ctx, metrics.KindDelta, c.delta, id, typeURL)
}

func (c *callbacks) OnDeltaStreamClosed(id int64, node *corev3.Node) {
	c.closed(metrics.KindDelta, c.delta, id, node)
}

func (c *callbacks) OnStreamDeltaRequest(id int64, req *discoveryv3.DeltaDiscoveryRequest) error {
	// Unlike SotW, the delta server calls this before filling in the node
	// of requests that omit it; bind remembers it from the first request.
	_, err := c.request(metrics.KindDelta, c.delta, id, req, "")
	return err
}

func (c *callbacks) OnStreamDeltaResponse(id int64, req *discoveryv3.DeltaDiscoveryRequest, resp *discoveryv3.DeltaDiscoveryResponse) {
	c.mu.Lock()
	if st, ok := c.delta[id]; ok {
		c.recordDeltaResponse(st, resp)
	}
	c.mu.Unlock()
	c.responded(metrics.KindDelta, id, req.GetNode(), resp.GetTypeUrl(), resp.GetSystemVersionInfo(), resp.GetNonce(),
		len(resp.GetResources()), "removed", len(resp.GetRemovedResources()))
}

func (c *callbacks) OnFetchRequest(ctx context.Context, req *discoveryv3.DiscoveryRequest) error {
	if c.mtls {
		ident, _, _, err := peerIdentity(ctx)
		if err == nil && c.verify != nil {
			err = c.verify(ctx, ident)
		}
		if err == nil {
			err = authorize(ident.Gateway(), req.GetNode())
		}
		if err != nil {
			c.log.Warn("xds request refused", "kind", metrics.KindFetch,
				"type_url", req.GetTypeUrl(), "peer", peerAddr(ctx), "error", err)
			return err
		}
	}
	if req.GetNode().GetCluster() == "" {
		err := status.Errorf(codes.InvalidArgument,
			"node %q has no cluster: set node.cluster to <namespace>/<gateway>", req.GetNode().GetId())
		c.log.Warn("xds request refused", "kind", metrics.KindFetch,
			"type_url", req.GetTypeUrl(), "error", err)
		return err
	}
	c.m.XDSRequests.WithLabelValues(metrics.KindFetch, req.GetTypeUrl()).Inc()
	if req.GetErrorDetail() != nil {
		c.nack(metrics.KindFetch, 0, req.GetNode().GetCluster(), req.GetNode().GetId(), req.GetTypeUrl(),
			req.GetResponseNonce(), req.GetErrorDetail().GetMessage(), "accepted_version", req.GetVersionInfo())
	}
	return nil
}

func (c *callbacks) OnFetchResponse(*discoveryv3.DiscoveryRequest, *discoveryv3.DiscoveryResponse) {}

// nack records a proxy's rejection of the last response of typeURL. The
// cache keeps serving the last snapshot; the proxy keeps its last good
// config until a new snapshot version is set.
func (c *callbacks) nack(kind string, id int64, gw, nodeID, typeURL, nonce, msg string, attrs ...any) {
	c.m.XDSNacks.WithLabelValues(gw, typeURL).Inc()
	args := append([]any{"kind", kind, "stream", id, "gateway", gw, "node", nodeID,
		"type_url", typeURL, "nonce", nonce, "error", msg}, attrs...)
	c.log.Warn("xds config rejected by proxy (NACK)", args...)
}

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// cacheLogger adapts slog to go-control-plane's logger. The cache is
// chatty: its Info goes to Debug and its Warn (e.g. an ADS request naming
// only part of a snapshot's resources, normal while a proxy warms up) to Info.
type cacheLogger struct{ log *slog.Logger }

func (l cacheLogger) Debugf(format string, args ...any) { l.logf(slog.LevelDebug, format, args) }
func (l cacheLogger) Infof(format string, args ...any)  { l.logf(slog.LevelDebug, format, args) }
func (l cacheLogger) Warnf(format string, args ...any)  { l.logf(slog.LevelInfo, format, args) }
func (l cacheLogger) Errorf(format string, args ...any) { l.logf(slog.LevelError, format, args) }

func (l cacheLogger) logf(level slog.Level, format string, args []any) {
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) {
		return
	}
	l.log.Log(ctx, level, fmt.Sprintf(format, args...), "source", "go-control-plane")
}
