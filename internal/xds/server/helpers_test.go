package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// waitTimeout bounds every wait of these tests (a receive, a condition).
const waitTimeout = 10 * time.Second

// allTypes are the five resource types a gateway is served, in xDS order.
var allTypes = []string{
	resourcev3.ClusterType,
	resourcev3.EndpointType,
	resourcev3.ListenerType,
	resourcev3.RouteType,
	resourcev3.SecretType,
}

// fixture describes the resources of one gateway: an HTTPS listener using
// RDS and SDS, a route configuration with one route per cluster, EDS
// clusters with their load assignments, and the listener's certificate.
type fixture struct {
	gateway  string   // "<namespace>/<name>"
	clusters []string // cluster short names
	timeout  time.Duration
	cert     string // certificate body, to change the secret
}

func (f fixture) name(short string) string { return f.gateway + "/" + short }

func (f fixture) listenerName() string { return f.name("https") }
func (f fixture) routeName() string    { return f.name("https") }
func (f fixture) secretName() string   { return f.name("cert") }

func (f fixture) clusterNames() []string {
	var out []string
	for _, c := range f.clusters {
		out = append(out, f.name(c))
	}
	sort.Strings(out)
	return out
}

// names returns the resource names of typeURL, sorted.
func (f fixture) names(typeURL string) []string {
	switch typeURL {
	case resourcev3.ClusterType, resourcev3.EndpointType:
		return f.clusterNames()
	case resourcev3.ListenerType:
		return []string{f.listenerName()}
	case resourcev3.RouteType:
		return []string{f.routeName()}
	case resourcev3.SecretType:
		return []string{f.secretName()}
	}
	return nil
}

func ads() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
}

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatalf("anypb.New: %v", err)
	}
	return a
}

// resources builds the gateway's resources with the given version.
func (f fixture) resources(t *testing.T, version string) *translate.Resources {
	t.Helper()
	timeout := f.timeout
	if timeout == 0 {
		timeout = time.Second
	}
	cert := f.cert
	if cert == "" {
		cert = "cert-1"
	}

	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: "https",
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    ads(),
			RouteConfigName: f.routeName(),
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       wellknown.Router,
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(t, &routerv3.Router{})},
		}},
	}
	tlsCtx := &tlsv3.DownstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: f.secretName(), SdsConfig: ads()}},
	}}
	listener := &listenerv3.Listener{
		Name: f.listenerName(),
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address:       "0.0.0.0",
			PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8443},
		}}},
		FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{{
				Name:       wellknown.HTTPConnectionManager,
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(t, hcm)},
			}},
			TransportSocket: &corev3.TransportSocket{
				Name:       wellknown.TransportSocketTLS,
				ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: mustAny(t, tlsCtx)},
			},
		}},
	}

	vh := &routev3.VirtualHost{Name: f.name("vh"), Domains: []string{"*"}}
	var clusters, endpoints []types.Resource
	for i, name := range f.clusterNames() {
		vh.Routes = append(vh.Routes, &routev3.Route{
			Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/" + f.clusters[i]}},
			Action: &routev3.Route_Route{Route: &routev3.RouteAction{
				ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: name},
			}},
		})
		clusters = append(clusters, &clusterv3.Cluster{
			Name:                 name,
			ConnectTimeout:       durationpb.New(timeout),
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig:     &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads()},
		})
		endpoints = append(endpoints, &endpointv3.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{
				LbEndpoints: []*endpointv3.LbEndpoint{{
					HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
						Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
							Address:       endpointIP(name),
							PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080},
						}}},
					}},
				}},
			}},
		})
	}
	routes := &routev3.RouteConfiguration{Name: f.routeName(), VirtualHosts: []*routev3.VirtualHost{vh}}
	secret := &tlsv3.Secret{
		Name: f.secretName(),
		Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: cert}},
			PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "key"}},
		}},
	}

	res := &translate.Resources{
		Gateway:   f.gateway,
		Version:   version,
		Listeners: []types.Resource{listener},
		Clusters:  clusters,
		Endpoints: endpoints,
		Secrets:   []types.Resource{secret},
	}
	res.SetRoutes([]types.Resource{routes})
	for _, group := range [][]types.Resource{res.Listeners, res.Routes(), res.Clusters, res.Endpoints, res.Secrets} {
		for _, r := range group {
			if v, ok := r.(interface{ ValidateAll() error }); ok {
				if err := v.ValidateAll(); err != nil {
					t.Fatalf("fixture %s: invalid %T: %v", f.gateway, r, err)
				}
			}
		}
	}
	return res
}

// endpointIP derives a stable backend address from a cluster name, so that a
// cluster's load assignment does not change when other clusters do.
func endpointIP(cluster string) string {
	sum := 0
	for _, b := range []byte(cluster) {
		sum += int(b)
	}
	return fmt.Sprintf("10.0.%d.%d", sum/250%250, sum%250+1)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// syncBuffer is a goroutine-safe log sink.
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

// env is a Server serving on 127.0.0.1 and a client connection to it.
type env struct {
	srv  *Server
	m    *metrics.Metrics
	logs *syncBuffer
	conn *grpc.ClientConn
	stop func() error // cancels Serve and returns its result
}

// startEnv serves plaintext, Secrets included (UnauthenticatedSecrets):
// the tests of the xDS protocol use it.
func startEnv(t *testing.T) *env {
	t.Helper()
	return startEnvWith(t, func(s *Server) { s.UnauthenticatedSecrets = true })
}

// startEnvWith is startEnv with tweak (instead of UnauthenticatedSecrets)
// applied to the Server before it serves.
func startEnvWith(t *testing.T, tweak func(*Server)) *env {
	t.Helper()
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m := metrics.New()
	srv := New(log, m)
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

	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		cancel()
		t.Fatalf("grpc.NewClient: %v", err)
	}
	var once sync.Once
	var stopErr error
	e := &env{srv: srv, m: m, logs: logs, conn: conn}
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
		conn.Close()
		if err := e.stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
		if t.Failed() {
			t.Logf("server logs:\n%s", logs.String())
		}
	})
	return e
}

func (e *env) update(t *testing.T, res ...*translate.Resources) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := e.srv.Update(ctx, res); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

// eventually polls cond until it holds or waitTimeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// metricValue returns the value of the series of name with exactly labels,
// and whether it exists.
func metricValue(t *testing.T, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; !ok || v != lp.GetValue() {
					continue series
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func (e *env) metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	v, _ := metricValue(t, e.m.Registry, name, labels)
	return v
}

// requests returns the number of requests of kind (metrics.KindSotW or
// KindDelta) the server received, of every served type.
func (e *env) requests(t *testing.T, kind string) float64 {
	t.Helper()
	var n float64
	for _, typ := range servedTypes {
		n += e.metric(t, "portico_xds_requests_total", map[string]string{"kind": kind, "type_url": typ})
	}
	return n
}

// bidi is the client side of an xDS stream.
type bidi[Req, Resp any] interface {
	Send(Req) error
	Recv() (Resp, error)
}

// client reads a stream in the background so that every receive can have a
// deadline.
type client[Req, Resp any] struct {
	t      *testing.T
	stream bidi[Req, Resp]
	resps  chan Resp
	err    chan error
	cancel context.CancelFunc // ends the stream
}

// close ends the stream (the server sees it closed).
func (c *client[Req, Resp]) close() { c.cancel() }

func newClient[Req, Resp any](t *testing.T, open func(context.Context) (bidi[Req, Resp], error)) *client[Req, Resp] {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := open(ctx)
	if err != nil {
		cancel()
		t.Fatalf("open stream: %v", err)
	}
	c := &client[Req, Resp]{t: t, stream: stream, resps: make(chan Resp), err: make(chan error, 1), cancel: cancel}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			r, err := stream.Recv()
			if err != nil {
				c.err <- err
				return
			}
			select {
			case c.resps <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return c
}

func (c *client[Req, Resp]) send(req Req) {
	c.t.Helper()
	if err := c.stream.Send(req); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

func (c *client[Req, Resp]) recv() Resp {
	c.t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case r := <-c.resps:
		return r
	case err := <-c.err:
		c.t.Fatalf("stream ended: %v", err)
	case <-timer.C:
		c.t.Fatalf("no response within %v", waitTimeout)
	}
	panic("unreachable")
}

// recvErr waits for the stream to end and returns its error.
func (c *client[Req, Resp]) recvErr() error {
	c.t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	select {
	case r := <-c.resps:
		c.t.Fatalf("unexpected response %v", r)
	case err := <-c.err:
		return err
	case <-timer.C:
		c.t.Fatalf("stream not ended within %v", waitTimeout)
	}
	return nil
}

type sotwClient = client[*discoveryv3.DiscoveryRequest, *discoveryv3.DiscoveryResponse]
type deltaClient = client[*discoveryv3.DeltaDiscoveryRequest, *discoveryv3.DeltaDiscoveryResponse]

func newSotwClient(t *testing.T, conn *grpc.ClientConn) *sotwClient {
	return newClient(t, func(ctx context.Context) (bidi[*discoveryv3.DiscoveryRequest, *discoveryv3.DiscoveryResponse], error) {
		return discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	})
}

func newDeltaClient(t *testing.T, conn *grpc.ClientConn) *deltaClient {
	return newClient(t, func(ctx context.Context) (bidi[*discoveryv3.DeltaDiscoveryRequest, *discoveryv3.DeltaDiscoveryResponse], error) {
		return discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	})
}

func node(cluster string) *corev3.Node {
	return &corev3.Node{Id: "envoy-" + strings.ReplaceAll(cluster, "/", "-"), Cluster: cluster}
}

// recvTypes receives one response for each of types, in any order, and
// returns them by type URL.
func recvTypes[Req, Resp any](t *testing.T, c *client[Req, Resp], typeOf func(Resp) string, types ...string) map[string]Resp {
	t.Helper()
	out := map[string]Resp{}
	for range types {
		r := c.recv()
		typ := typeOf(r)
		if !slices.Contains(types, typ) {
			t.Fatalf("unexpected response of type %s, want one of %v", typ, types)
		}
		if _, dup := out[typ]; dup {
			t.Fatalf("second response of type %s before one of each of %v", typ, types)
		}
		out[typ] = r
	}
	return out
}

func sotwType(r *discoveryv3.DiscoveryResponse) string       { return r.GetTypeUrl() }
func deltaType(r *discoveryv3.DeltaDiscoveryResponse) string { return r.GetTypeUrl() }

// sotwNames decodes the resources of r and returns their names, sorted.
func sotwNames(t *testing.T, r *discoveryv3.DiscoveryResponse) []string {
	t.Helper()
	var out []string
	for _, a := range r.GetResources() {
		if a.GetTypeUrl() != r.GetTypeUrl() {
			t.Fatalf("resource of type %s in a %s response", a.GetTypeUrl(), r.GetTypeUrl())
		}
		m, err := a.UnmarshalNew()
		if err != nil {
			t.Fatalf("unmarshal %s: %v", a.GetTypeUrl(), err)
		}
		out = append(out, cachev3.GetResourceName(m))
	}
	sort.Strings(out)
	return out
}

func deltaNames(r *discoveryv3.DeltaDiscoveryResponse) []string {
	var out []string
	for _, res := range r.GetResources() {
		out = append(out, res.GetName())
	}
	sort.Strings(out)
	return out
}
