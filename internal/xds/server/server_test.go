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

// checkSotw checks that got has one response per type, each of version
// with exactly the resources of f.
func checkSotw(t *testing.T, got map[string]*discoveryv3.DiscoveryResponse, f fixture, version string) {
	t.Helper()
	for _, typ := range allTypes {
		r := got[typ]
		if r.GetVersionInfo() != version {
			t.Errorf("%s version = %q, want %q", typ, r.GetVersionInfo(), version)
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
	checkSotw(t, got, a1, "a1")

	// ACK everything: the server then waits on all five types.
	for _, typ := range allTypes {
		sotwAck(c, a1, got[typ])
	}
	eventually(t, "five open watches after ACK", func() bool { s, _ := e.watches(a1.gateway); return s == 5 })
	if v := e.metric(t, "portico_xds_requests_total",
		map[string]string{"kind": metrics.KindSotW, "type_url": resourcev3.ClusterType}); v != 2 {
		t.Errorf("CDS requests = %v, want 2", v)
	}

	// A change to gw-b only is not pushed to gw-a; a change to gw-a is,
	// and is the very next thing the stream carries (no resend of a1).
	b2 := gwB
	b2.timeout = 2 * time.Second
	e.update(t, a1.resources(t, "a1"), b2.resources(t, "b2"))
	a2 := gwA
	a2.timeout = 3 * time.Second
	e.update(t, a2.resources(t, "a2"), b2.resources(t, "b2"))
	got = recvTypes(t, c, sotwType, allTypes...)
	checkSotw(t, got, a2, "a2")
	cl := decodeCluster(t, got[resourcev3.ClusterType])
	if cl.GetConnectTimeout().AsDuration() != 3*time.Second {
		t.Errorf("cluster connect timeout = %v, want 3s", cl.GetConnectTimeout().AsDuration())
	}

	// NACK the clusters of a2 (version_info = last accepted, a1), ACK the rest.
	for _, typ := range allTypes {
		if typ != resourcev3.ClusterType {
			sotwAck(c, a2, got[typ])
		}
	}
	c.send(&discoveryv3.DiscoveryRequest{
		TypeUrl:       resourcev3.ClusterType,
		VersionInfo:   "a1",
		ResponseNonce: got[resourcev3.ClusterType].GetNonce(),
		ErrorDetail:   &status.Status{Code: int32(codes.InvalidArgument), Message: "bad cluster c1"},
	})
	nackLabels := map[string]string{"gateway": a1.gateway, "type_url": resourcev3.ClusterType}
	eventually(t, "NACK counted", func() bool { return e.metric(t, "portico_xds_nacks_total", nackLabels) == 1 })
	// The server does not resend the rejected snapshot: it waits on all
	// five types, and still holds a2 (the proxy keeps its last good config).
	eventually(t, "five open watches after NACK", func() bool { s, _ := e.watches(a1.gateway); return s == 5 })
	if snap, err := e.srv.Cache().GetSnapshot(a1.gateway); err != nil || snap.GetVersion(resourcev3.ClusterType) != "a2" {
		t.Fatalf("cached snapshot after NACK: %v, %v", snap, err)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "NACK") || !strings.Contains(logs, "bad cluster c1") ||
		!strings.Contains(logs, "rejected_version=a2") {
		t.Errorf("NACK not logged with its error:\n%s", logs)
	}

	// The next update reaches the proxy, on every type.
	a3 := a2
	a3.timeout = 4 * time.Second
	e.update(t, a3.resources(t, "a3"), b2.resources(t, "b2"))
	got = recvTypes(t, c, sotwType, allTypes...)
	checkSotw(t, got, a3, "a3")
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
	checkSotw(t, recvTypes(t, ca, sotwType, allTypes...), gwA, "a1")
	checkSotw(t, recvTypes(t, cb, sotwType, allTypes...), gwB, "b1")
}

func TestPerTypeService(t *testing.T) {
	e := startEnv(t)
	e.update(t, gwA.resources(t, "a1"))

	c := newClient(t, func(ctx context.Context) (bidi[*discoveryv3.DiscoveryRequest, *discoveryv3.DiscoveryResponse], error) {
		return clusterservice.NewClusterDiscoveryServiceClient(e.conn).StreamClusters(ctx)
	})
	c.send(&discoveryv3.DiscoveryRequest{Node: node(gwA.gateway)}) // type URL implied by CDS
	r := c.recv()
	if r.GetTypeUrl() != resourcev3.ClusterType || r.GetVersionInfo() != "a1" {
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
		if r.GetSystemVersionInfo() != "a1" || len(r.GetRemovedResources()) != 0 {
			t.Errorf("%s: system version %q, removed %v", typ, r.GetSystemVersionInfo(), r.GetRemovedResources())
		}
		deltaAck(c, r)
	}
	eventually(t, "five delta watches after ACK", func() bool { _, d := e.watches(a1.gateway); return d == 5 })
	if v := e.metric(t, "portico_xds_streams", map[string]string{"kind": metrics.KindDelta}); v != 1 {
		t.Errorf("delta streams = %v, want 1", v)
	}

	// Add c3, remove c1: CDS and EDS carry the change, RDS the new routes;
	// listeners and secrets are unchanged and not sent.
	a2 := gwA
	a2.clusters = []string{"c2", "c3"}
	e.update(t, a2.resources(t, "a2"), gwB.resources(t, "b1"))
	changed := []string{resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.RouteType}
	got = recvTypes(t, c, deltaType, changed...)
	for _, typ := range []string{resourcev3.ClusterType, resourcev3.EndpointType} {
		r := got[typ]
		if names := deltaNames(r); !slices.Equal(names, []string{a2.name("c3")}) {
			t.Errorf("%s added = %v, want [%s]", typ, names, a2.name("c3"))
		}
		if rm := r.GetRemovedResources(); !slices.Equal(rm, []string{a1.name("c1")}) {
			t.Errorf("%s removed = %v, want [%s]", typ, rm, a1.name("c1"))
		}
	}
	if names := deltaNames(got[resourcev3.RouteType]); !slices.Equal(names, []string{a2.routeName()}) {
		t.Errorf("RDS resources = %v", names)
	}

	// NACK the clusters, ACK the rest: nothing is resent.
	deltaAck(c, got[resourcev3.EndpointType])
	deltaAck(c, got[resourcev3.RouteType])
	c.send(&discoveryv3.DeltaDiscoveryRequest{
		TypeUrl:       resourcev3.ClusterType,
		ResponseNonce: got[resourcev3.ClusterType].GetNonce(),
		ErrorDetail:   &status.Status{Code: int32(codes.InvalidArgument), Message: "bad cluster c3"},
	})
	nackLabels := map[string]string{"gateway": a1.gateway, "type_url": resourcev3.ClusterType}
	eventually(t, "delta NACK counted", func() bool { return e.metric(t, "portico_xds_nacks_total", nackLabels) == 1 })
	eventually(t, "five delta watches after NACK", func() bool { _, d := e.watches(a1.gateway); return d == 5 })

	// A secret-only change: the next response is SDS, proving neither the
	// NACKed clusters nor anything else was resent in between.
	a3 := a2
	a3.cert = "cert-2"
	e.update(t, a3.resources(t, "a3"), gwB.resources(t, "b1"))
	r := c.recv()
	if r.GetTypeUrl() != resourcev3.SecretType || r.GetSystemVersionInfo() != "a3" {
		t.Fatalf("got %s version %s, want SDS a3", r.GetTypeUrl(), r.GetSystemVersionInfo())
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
	checkSotw(t, recvTypes(t, cb, sotwType, allTypes...), gwB, "b1")
	info := map[string]string{"gateway": gwB.gateway, "version": "b1"}
	if v := e.metric(t, "portico_xds_snapshot_info", info); v != 1 {
		t.Fatalf("snapshot_info{gw-b,b1} = %v, want 1", v)
	}

	e.update(t, gwA.resources(t, "a1"))
	if _, err := e.srv.Cache().GetSnapshot(gwB.gateway); err == nil {
		t.Fatal("gw-b snapshot still cached after removal")
	}
	if _, err := e.srv.Cache().GetSnapshot(gwA.gateway); err != nil {
		t.Fatalf("gw-a snapshot: %v", err)
	}
	if _, ok := metricValue(t, e.m.Registry, "portico_xds_snapshot_info", info); ok {
		t.Error("snapshot_info of removed gw-b still exported")
	}

	// A proxy of an unknown gateway waits until its snapshot appears.
	late := newSotwClient(t, e.conn)
	late.send(&discoveryv3.DiscoveryRequest{Node: node(gwB.gateway), TypeUrl: resourcev3.ClusterType})
	eventually(t, "watch of the unknown gateway", func() bool { s, _ := e.watches(gwB.gateway); return s == 1 })
	e.update(t, gwA.resources(t, "a1"), gwB.resources(t, "b3"))
	r := late.recv()
	if r.GetVersionInfo() != "b3" || !slices.Equal(sotwNames(t, r), gwB.clusterNames()) {
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
