package server

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/portico-dev/portico/internal/metrics"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var (
	gwA = fixture{gateway: "ns/gw-a", clusters: []string{"c1", "c2"}}
	gwB = fixture{gateway: "ns/gw-b", clusters: []string{"b1"}}
)

// sotwSubscribe sends Envoy's initial ADS requests for all five types:
// wildcard for LDS and CDS, by name for RDS, EDS and SDS.
func sotwSubscribe(c *sotwClient, f fixture) {
	first := true
	for _, typ := range allTypes {
		req := &discoveryv3.DiscoveryRequest{TypeUrl: typ}
		if typ != resourcev3.ClusterType && typ != resourcev3.ListenerType {
			req.ResourceNames = f.names(typ)
		}
		if first {
			req.Node = node(f.gateway)
			first = false
		}
		c.send(req)
	}
}

// sotwAck acknowledges r, keeping the subscription of f.
func sotwAck(c *sotwClient, f fixture, r *discoveryv3.DiscoveryResponse) {
	req := &discoveryv3.DiscoveryRequest{
		TypeUrl:       r.GetTypeUrl(),
		VersionInfo:   r.GetVersionInfo(),
		ResponseNonce: r.GetNonce(),
	}
	if r.GetTypeUrl() != resourcev3.ClusterType && r.GetTypeUrl() != resourcev3.ListenerType {
		req.ResourceNames = f.names(r.GetTypeUrl())
	}
	c.send(req)
}

// checkSotw checks that got has f's resources of every type, with a
// version. (A SotW version_info is the LinearCache's update count, not the
// fixture's version: it only says which response a request acknowledges.)
func checkSotw(t *testing.T, got map[string]*discoveryv3.DiscoveryResponse, f fixture) {
	t.Helper()
	for _, typ := range allTypes {
		r := got[typ]
		if r.GetVersionInfo() == "" {
			t.Errorf("%s response without version", typ)
		}
		if names, want := sotwNames(t, r), f.names(typ); !slices.Equal(names, want) {
			t.Errorf("%s resources = %v, want %v", typ, names, want)
		}
	}
}

func TestSotWADS(t *testing.T) {
	e := startEnv(t)
	a1, b1 := gwA, gwB
	e.update(t, a1.resources(t, "a1"), b1.resources(t, "b1"))

	c := newSotwClient(t, e.conn)
	sotwSubscribe(c, a1)
	got := recvTypes(t, c, sotwType, allTypes...)
	checkSotw(t, got, a1)

	// ACK everything: the server then waits on all five types.
	for _, typ := range allTypes {
		sotwAck(c, a1, got[typ])
	}
	eventually(t, "ten requests (subscriptions and ACKs) received", func() bool { return e.requests(t, metrics.KindSotW) == 10 })
	if v := e.metric(t, "portico_xds_requests_total",
		map[string]string{"kind": metrics.KindSotW, "type_url": resourcev3.ClusterType}); v != 2 {
		t.Errorf("CDS requests = %v, want 2", v)
	}

	// A change to gw-b only is not pushed to gw-a; a change to gw-a's
	// clusters is, and is the very next thing the stream carries (nothing
	// unchanged is resent).
	b2 := gwB
	b2.timeout = 2 * time.Second
	e.update(t, a1.resources(t, "a1"), b2.resources(t, "b2"))
	a2 := gwA
	a2.timeout = 3 * time.Second
	e.update(t, a2.resources(t, "a2"), b2.resources(t, "b2"))
	r := c.recv()
	if r.GetTypeUrl() != resourcev3.ClusterType || !slices.Equal(sotwNames(t, r), a2.clusterNames()) {
		t.Fatalf("got %s %v, want the clusters of a2", r.GetTypeUrl(), sotwNames(t, r))
	}
	if cl := decodeCluster(t, r); cl.GetConnectTimeout().AsDuration() != 3*time.Second {
		t.Errorf("cluster connect timeout = %v, want 3s", cl.GetConnectTimeout().AsDuration())
	}
	// Their load assignments follow, the same but of a new version: Envoy
	// warms a changed cluster again and waits for them (cache.go rewarm).
	// Left unacknowledged, so that no assignment watch is open below.
	if re := c.recv(); re.GetTypeUrl() != resourcev3.EndpointType || !slices.Equal(sotwNames(t, re), a2.clusterNames()) {
		t.Fatalf("got %s %v, want the load assignments of a2's clusters", re.GetTypeUrl(), sotwNames(t, re))
	}

	// NACK the clusters of a2 (version_info = the last accepted).
	c.send(&discoveryv3.DiscoveryRequest{
		TypeUrl:       resourcev3.ClusterType,
		VersionInfo:   got[resourcev3.ClusterType].GetVersionInfo(),
		ResponseNonce: r.GetNonce(),
		ErrorDetail:   &status.Status{Code: int32(codes.InvalidArgument), Message: "bad cluster c1"},
	})
	nackLabels := map[string]string{"gateway": a1.gateway, "type_url": resourcev3.ClusterType}
	eventually(t, "NACK counted", func() bool { return e.metric(t, "portico_xds_nacks_total", nackLabels) == 1 })
	// The server does not resend the rejected clusters: it waits on the
	// other types, and still holds a2 (the proxy keeps its last good config).
	eventually(t, "the NACK received", func() bool { return e.requests(t, metrics.KindSotW) == 11 })
	if r, ok := e.srv.Served(a1.gateway); !ok || r.Version != "a2" {
		t.Fatalf("served after NACK: %v, %v", r, ok)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "NACK") || !strings.Contains(logs, "bad cluster c1") ||
		!strings.Contains(logs, "rejected_version="+r.GetVersionInfo()) {
		t.Errorf("NACK not logged with its error:\n%s", logs)
	}

	// The next update reaches the proxy: a new certificate, then new clusters.
	a3 := a2
	a3.cert = "cert-3"
	e.update(t, a3.resources(t, "a3"), b2.resources(t, "b2"))
	if r := c.recv(); r.GetTypeUrl() != resourcev3.SecretType || !slices.Equal(sotwNames(t, r), []string{a3.secretName()}) {
		t.Fatalf("got %s %v, want the secret of a3", r.GetTypeUrl(), sotwNames(t, r))
	}
	a4 := a3
	a4.timeout = 4 * time.Second
	e.update(t, a4.resources(t, "a4"), b2.resources(t, "b2"))
	r = c.recv()
	if r.GetTypeUrl() != resourcev3.ClusterType || decodeCluster(t, r).GetConnectTimeout().AsDuration() != 4*time.Second {
		t.Fatalf("got %s, want the clusters of a4", r.GetTypeUrl())
	}
	if n := e.metric(t, "portico_xds_nacks_total", nackLabels); n != 1 {
		t.Errorf("NACKs = %v, want 1", n)
	}
	if v := e.metric(t, "portico_xds_streams", map[string]string{"kind": metrics.KindSotW}); v != 1 {
		t.Errorf("sotw streams = %v, want 1", v)
	}
}

func decodeCluster(t *testing.T, r *discoveryv3.DiscoveryResponse) *clusterv3.Cluster {
	t.Helper()
	cl := &clusterv3.Cluster{}
	if err := r.GetResources()[0].UnmarshalTo(cl); err != nil {
		t.Fatalf("unmarshal cluster: %v", err)
	}
	return cl
}

func TestSotWOnlyOwnGateway(t *testing.T) {
	e := startEnv(t)
	e.update(t, gwA.resources(t, "a1"), gwB.resources(t, "b1"))

	ca, cb := newSotwClient(t, e.conn), newSotwClient(t, e.conn)
	sotwSubscribe(ca, gwA)
	sotwSubscribe(cb, gwB)
	checkSotw(t, recvTypes(t, ca, sotwType, allTypes...), gwA)
	checkSotw(t, recvTypes(t, cb, sotwType, allTypes...), gwB)
}

func TestPerTypeService(t *testing.T) {
	e := startEnv(t)
	e.update(t, gwA.resources(t, "a1"))

	c := newClient(t, func(ctx context.Context) (bidi[*discoveryv3.DiscoveryRequest, *discoveryv3.DiscoveryResponse], error) {
		return clusterservice.NewClusterDiscoveryServiceClient(e.conn).StreamClusters(ctx)
	})
	c.send(&discoveryv3.DiscoveryRequest{Node: node(gwA.gateway)}) // type URL implied by CDS
	r := c.recv()
	if r.GetTypeUrl() != resourcev3.ClusterType || r.GetVersionInfo() == "" {
		t.Fatalf("CDS response type %s version %s", r.GetTypeUrl(), r.GetVersionInfo())
	}
	if names := sotwNames(t, r); !slices.Equal(names, gwA.clusterNames()) {
		t.Errorf("clusters = %v, want %v", names, gwA.clusterNames())
	}
}

// deltaSubscribe sends the initial delta requests for all five types, all
// wildcard: legacy (no names) for CDS and LDS, explicit "*" for the others.
func deltaSubscribe(c *deltaClient, cluster string) {
	for i, typ := range allTypes {
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typ}
		if typ != resourcev3.ClusterType && typ != resourcev3.ListenerType {
			req.ResourceNamesSubscribe = []string{"*"}
		}
		if i == 0 {
			req.Node = node(cluster)
		}
		c.send(req)
	}
}

func deltaAck(c *deltaClient, r *discoveryv3.DeltaDiscoveryResponse) {
	c.send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
}

func TestDeltaADS(t *testing.T) {
	e := startEnv(t)
	a1 := gwA
	e.update(t, a1.resources(t, "a1"), gwB.resources(t, "b1"))

	c := newDeltaClient(t, e.conn)
	deltaSubscribe(c, a1.gateway)
	got := recvTypes(t, c, deltaType, allTypes...)
	for _, typ := range allTypes {
		r := got[typ]
		if names, want := deltaNames(r), a1.names(typ); !slices.Equal(names, want) {
			t.Errorf("%s resources = %v, want %v", typ, names, want)
		}
		if len(r.GetRemovedResources()) != 0 {
			t.Errorf("%s: removed %v", typ, r.GetRemovedResources())
		}
		for _, res := range r.GetResources() {
			if res.GetVersion() == "" {
				t.Errorf("%s %s without version", typ, res.GetName())
			}
		}
		deltaAck(c, r)
	}
	eventually(t, "ten requests (subscriptions and ACKs) received", func() bool { return e.requests(t, metrics.KindDelta) == 10 })
	if v := e.metric(t, "portico_xds_streams", map[string]string{"kind": metrics.KindDelta}); v != 1 {
		t.Errorf("delta streams = %v, want 1", v)
	}

	// Add c3, remove c1: make before break. The stream carries the new
	// cluster and its endpoints, then the routes to it, and only then the
	// removals; listeners and secrets are unchanged and not sent.
	a2 := gwA
	a2.clusters = []string{"c2", "c3"}
	e.update(t, a2.resources(t, "a2"), gwB.resources(t, "b1"))
	type step struct {
		typ     string
		added   []string
		removed []string
	}
	want := []step{
		{resourcev3.ClusterType, []string{a2.name("c3")}, nil},
		{resourcev3.EndpointType, []string{a2.name("c3")}, nil},
		{resourcev3.RouteType, []string{a2.routeName()}, nil},
		{resourcev3.ClusterType, nil, []string{a1.name("c1")}},
		{resourcev3.EndpointType, nil, []string{a1.name("c1")}},
	}
	got = map[string]*discoveryv3.DeltaDiscoveryResponse{}
	for i, w := range want {
		r := c.recv()
		if r.GetTypeUrl() != w.typ || !slices.Equal(deltaNames(r), w.added) || !slices.Equal(r.GetRemovedResources(), w.removed) {
			t.Fatalf("response %d: %s +%v -%v, want %s +%v -%v", i, r.GetTypeUrl(), deltaNames(r), r.GetRemovedResources(), w.typ, w.added, w.removed)
		}
		if i < 3 {
			deltaAck(c, r)
		}
		got[r.GetTypeUrl()] = r
	}

	// NACK the clusters' removal, ACK the rest: nothing is resent.
	deltaAck(c, got[resourcev3.EndpointType])
	c.send(&discoveryv3.DeltaDiscoveryRequest{
		TypeUrl:       resourcev3.ClusterType,
		ResponseNonce: got[resourcev3.ClusterType].GetNonce(),
		ErrorDetail:   &status.Status{Code: int32(codes.InvalidArgument), Message: "bad cluster c3"},
	})
	nackLabels := map[string]string{"gateway": a1.gateway, "type_url": resourcev3.ClusterType}
	eventually(t, "delta NACK counted", func() bool { return e.metric(t, "portico_xds_nacks_total", nackLabels) == 1 })
	eventually(t, "the NACK and ACKs received", func() bool { return e.requests(t, metrics.KindDelta) == 15 })

	// A secret-only change: the next response is SDS, proving neither the
	// NACKed clusters nor anything else was resent in between.
	a3 := a2
	a3.cert = "cert-2"
	e.update(t, a3.resources(t, "a3"), gwB.resources(t, "b1"))
	r := c.recv()
	if r.GetTypeUrl() != resourcev3.SecretType {
		t.Fatalf("got %s, want SDS", r.GetTypeUrl())
	}
	if names := deltaNames(r); !slices.Equal(names, []string{a3.secretName()}) {
		t.Errorf("SDS resources = %v", names)
	}
}

func TestGatewayRemoval(t *testing.T) {
	e := startEnv(t)
	e.update(t, gwA.resources(t, "a1"), gwB.resources(t, "b1"))
	cb := newSotwClient(t, e.conn)
	sotwSubscribe(cb, gwB)
	checkSotw(t, recvTypes(t, cb, sotwType, allTypes...), gwB)
	info := map[string]string{"gateway": gwB.gateway, "version": "b1"}
	if v := e.metric(t, "portico_xds_snapshot_info", info); v != 1 {
		t.Fatalf("snapshot_info{gw-b,b1} = %v, want 1", v)
	}

	e.update(t, gwA.resources(t, "a1"))
	if _, ok := e.srv.Served(gwB.gateway); ok {
		t.Fatal("gw-b still served after removal")
	}
	if _, ok := e.srv.Served(gwA.gateway); !ok {
		t.Fatal("gw-a not served")
	}
	if _, ok := metricValue(t, e.m.Registry, "portico_xds_snapshot_info", info); ok {
		t.Error("snapshot_info of removed gw-b still exported")
	}

	// A proxy of an unknown gateway waits until its snapshot appears.
	late := newSotwClient(t, e.conn)
	late.send(&discoveryv3.DiscoveryRequest{Node: node(gwB.gateway), TypeUrl: resourcev3.ClusterType})
	eventually(t, "watch of the unknown gateway", func() bool { return e.srv.cache.pendingWatches(gwB.gateway) == 1 })
	e.update(t, gwA.resources(t, "a1"), gwB.resources(t, "b3"))
	r := late.recv()
	if r.GetVersionInfo() == "" || !slices.Equal(sotwNames(t, r), gwB.clusterNames()) {
		t.Fatalf("late proxy got version %s resources %v", r.GetVersionInfo(), sotwNames(t, r))
	}
}

func TestRefusesNodeWithoutCluster(t *testing.T) {
	e := startEnv(t)
	e.update(t, gwA.resources(t, "a1"))

	c := newSotwClient(t, e.conn)
	c.send(&discoveryv3.DiscoveryRequest{Node: node(""), TypeUrl: resourcev3.ClusterType})
	if err := c.recvErr(); grpcstatus.Code(err) != codes.InvalidArgument {
		t.Errorf("sotw stream error = %v, want InvalidArgument", err)
	}

	d := newDeltaClient(t, e.conn)
	d.send(&discoveryv3.DeltaDiscoveryRequest{Node: node(""), TypeUrl: resourcev3.ClusterType})
	if err := d.recvErr(); grpcstatus.Code(err) != codes.InvalidArgument {
		t.Errorf("delta stream error = %v, want InvalidArgument", err)
	}
	if !strings.Contains(e.logs.String(), "has no cluster") {
		t.Error("refusal not logged")
	}
	eventually(t, "streams closed", func() bool {
		return e.metric(t, "portico_xds_streams", map[string]string{"kind": metrics.KindSotW}) == 0 &&
			e.metric(t, "portico_xds_streams", map[string]string{"kind": metrics.KindDelta}) == 0
	})
}

func TestServeStopsOnCancel(t *testing.T) {
	e := startEnv(t)
	e.update(t, gwA.resources(t, "a1"))
	c := newSotwClient(t, e.conn)
	sotwSubscribe(c, gwA)
	recvTypes(t, c, sotwType, allTypes...)
	d := newDeltaClient(t, e.conn)
	deltaSubscribe(d, gwA.gateway)
	recvTypes(t, d, deltaType, allTypes...)

	// Open streams end with the server; Serve returns nil.
	if err := e.stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if err := c.recvErr(); err == nil {
		t.Error("sotw stream still open after stop")
	}
	if err := d.recvErr(); err == nil {
		t.Error("delta stream still open after stop")
	}
	for _, kind := range []string{metrics.KindSotW, metrics.KindDelta} {
		if v := e.metric(t, "portico_xds_streams", map[string]string{"kind": kind}); v != 0 {
			t.Errorf("%s streams after stop = %v, want 0", kind, v)
		}
	}
}

func TestServeReturnsListenerError(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := New(nil, nil).Serve(ctx, lis); err == nil {
		t.Fatal("Serve on a closed listener returned nil")
	}
}

func TestShutdownTimeoutStopsLingeringConnections(t *testing.T) {
	// With a shutdown timeout too short for the graceful stop, Serve falls
	// back to Stop and still returns cleanly, closing the open stream.
	e := startEnv(t)
	e.srv.ShutdownTimeout = time.Nanosecond
	e.update(t, gwA.resources(t, "a1"))
	c := newSotwClient(t, e.conn)
	sotwSubscribe(c, gwA)
	recvTypes(t, c, sotwType, allTypes...)
	if err := e.stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if err := c.recvErr(); err == nil {
		t.Error("stream still open after stop")
	}
}
