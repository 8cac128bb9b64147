package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// randomGateway is a Gateway "ns/gw" with one or two HTTP listeners whose
// hostnames route to a random subset of six services.
func randomGateway(rnd *rand.Rand) *ir.Gateway {
	gw := &ir.Gateway{Namespace: "ns", Name: "gw"}
	used := map[int]bool{}
	for l := range 1 + rnd.IntN(2) {
		name := fmt.Sprintf("http-%d", 80+l)
		rc := &ir.RouteConfig{Name: name}
		for h := range 1 + rnd.IntN(3) {
			host := fmt.Sprintf("h%d.example.com", h+rnd.IntN(2)*3)
			if slices.ContainsFunc(rc.VirtualHosts, func(v *ir.VirtualHost) bool { return v.Name == host }) {
				continue
			}
			vh := &ir.VirtualHost{Name: host, Hostname: host}
			for r := range 1 + rnd.IntN(3) {
				svc := rnd.IntN(6)
				used[svc] = true
				vh.Routes = append(vh.Routes, &ir.Route{
					Name:    fmt.Sprintf("r%d", r),
					Match:   ir.Match{Path: &ir.PathMatch{Type: ir.PathPrefix, Value: fmt.Sprintf("/p%d", r)}},
					Forward: &ir.Forward{Backends: []*ir.WeightedBackend{{Cluster: fmt.Sprintf("ns/svc%d/80", svc), Weight: 1}}},
				})
			}
			rc.VirtualHosts = append(rc.VirtualHosts, vh)
		}
		gw.Listeners = append(gw.Listeners, &ir.Listener{Name: name, Port: uint32(80 + l), Protocol: ir.ProtocolHTTP,
			FilterChains: []*ir.FilterChain{{Name: name, RouteConfig: rc}}})
	}
	for svc := range 6 {
		if used[svc] {
			gw.Clusters = append(gw.Clusters, &ir.Cluster{Name: fmt.Sprintf("ns/svc%d/80", svc), Protocol: ir.UpstreamHTTP1,
				Endpoints: []ir.Endpoint{{Address: fmt.Sprintf("10.0.0.%d", 1+rnd.IntN(3)), Port: 8080}}})
		}
	}
	return gw
}

// spoil returns a copy of r (not built by the translate package) with one
// route configuration or load assignment dropped or an extra one added,
// or r itself when the dice say so.
func spoil(rnd *rand.Rand, r *translate.Resources) *translate.Resources {
	out := &translate.Resources{Gateway: r.Gateway, Version: r.Version + "-x",
		Listeners: r.Listeners, Clusters: r.Clusters,
		Endpoints: slices.Clone(r.Endpoints), Secrets: r.Secrets}
	routes := slices.Clone(r.Routes())
	switch rnd.IntN(5) {
	case 0:
		if len(out.Endpoints) > 0 {
			out.Endpoints = slices.Delete(out.Endpoints, 0, 1)
		}
	case 1:
		if len(routes) > 0 {
			routes = slices.Delete(routes, len(routes)-1, len(routes))
		}
	case 2:
		if len(out.Endpoints) > 0 {
			extra := proto.Clone(out.Endpoints[0]).(*endpointv3.ClusterLoadAssignment)
			extra.ClusterName = "ns/orphan/80"
			out.Endpoints = append(out.Endpoints, extra)
		}
	default:
		return r
	}
	out.SetRoutes(routes)
	return out
}

// The cache's update check, which looks only at what an update touches,
// agrees with go-control-plane's Snapshot.Consistent over all resources,
// over random sequences of updates (some spoiled); and after each accepted
// update the LinearCaches hold exactly the update's resources, but for
// the whole route tables, which stay those of the last update before a
// state-of-the-world watch of route tables (here: catchUpRoutes).
func TestCacheChecksLikeSnapshotConsistent(t *testing.T) {
	for seed := range uint64(40) {
		rnd := rand.New(rand.NewPCG(seed, 7))
		x := translate.NewTranslator()
		s := New(nil, nil)
		accepted, rejected := 0, 0
		var sotw *translate.Resources // whose route tables the LinearCache should hold
		for step := range 30 {
			res, err := x.Translate(randomGateway(rnd))
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			r := spoil(rnd, res)
			_, want := r.Snapshot()
			got := s.Update(context.Background(), []*translate.Resources{r})
			if (got == nil) != (want == nil) {
				t.Fatalf("seed %d step %d: Update error %v, Snapshot.Consistent %v", seed, step, got, want)
			}
			if got != nil {
				rejected++
				continue
			}
			accepted++
			// Whole route tables are brought up to date when a
			// state-of-the-world stream watches them, and only then, for
			// Resources that have a VHDS form.
			if !r.HasVHDS() || rnd.IntN(3) == 0 {
				if r.HasVHDS() {
					catchUpRoutes(t, s, "ns/gw")
				}
				sotw = r
			}
			held := cached(s, "ns/gw")
			for typ, list := range r.ByType() {
				if typ == resourcev3.RouteType {
					list = nil
					if sotw != nil {
						list = sotw.Routes()
					}
				}
				if len(held[typ]) != len(list) {
					t.Fatalf("seed %d step %d: %s: cache holds %d, want %d", seed, step, typ, len(held[typ]), len(list))
				}
				for _, res := range list {
					if h, ok := held[typ][cachev3.GetResourceName(res)].(types.Resource); !ok || !proto.Equal(decoded(t, h), decoded(t, res)) {
						t.Fatalf("seed %d step %d: %s %s differs", seed, step, typ, cachev3.GetResourceName(res))
					}
				}
			}
		}
		if accepted == 0 || rejected == 0 {
			t.Fatalf("seed %d: %d updates accepted, %d rejected: want some of each", seed, accepted, rejected)
		}
	}
}

// A removed Gateway's cache is kept while its proxies watch (they keep
// their configuration, a new proxy waits), dropped when the last watch
// ends, and served again when the Gateway comes back.
func TestRemovedGatewayCache(t *testing.T) {
	e := startEnv(t)
	e.update(t, gwA.resources(t, "a1"), gwB.resources(t, "b1"))
	c := newSotwClient(t, e.conn)
	c.send(&discoveryv3.DiscoveryRequest{Node: node(gwB.gateway), TypeUrl: resourcev3.ClusterType})
	if r := c.recv(); !slices.Equal(sotwNames(t, r), gwB.clusterNames()) {
		t.Fatalf("clusters %v", sotwNames(t, r))
	}
	e.update(t, gwA.resources(t, "a1"))
	late := newSotwClient(t, e.conn)
	late.send(&discoveryv3.DiscoveryRequest{Node: node(gwB.gateway), TypeUrl: resourcev3.ClusterType})
	eventually(t, "the late proxy waits", func() bool { return e.srv.cache.pendingWatches(gwB.gateway) == 1 })

	c.close()
	late.close()
	eventually(t, "gw-b's cache dropped", func() bool { return e.srv.cache.pendingWatches(gwB.gateway) == -1 })

	again := newSotwClient(t, e.conn)
	again.send(&discoveryv3.DiscoveryRequest{Node: node(gwB.gateway), TypeUrl: resourcev3.ClusterType})
	eventually(t, "the next proxy waits", func() bool { return e.srv.cache.pendingWatches(gwB.gateway) == 1 })
	e.update(t, gwA.resources(t, "a1"), gwB.resources(t, "b2"))
	if r := again.recv(); !slices.Equal(sotwNames(t, r), gwB.clusterNames()) {
		t.Fatalf("clusters %v", sotwNames(t, r))
	}
}

// The unary Fetch RPC answers from the same cache.
func TestFetch(t *testing.T) {
	s := New(nil, nil)
	x := translate.NewTranslator()
	res, err := x.Translate(typedGateway("/a", "10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	req := &discoveryv3.DiscoveryRequest{Node: node("ns/gw"), TypeUrl: resourcev3.ClusterType}
	if _, err := s.cache.Fetch(context.Background(), req); err == nil {
		t.Fatal("fetch before any update succeeded")
	}
	if err := s.Update(context.Background(), []*translate.Resources{res}); err != nil {
		t.Fatal(err)
	}
	resp, err := s.cache.Fetch(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	out, err := resp.GetDiscoveryResponse()
	if err != nil || len(out.GetResources()) != 1 || out.GetVersionInfo() != res.TypeVersion(resourcev3.ClusterType) {
		t.Fatalf("fetch = %v, %v", out, err)
	}
	req.VersionInfo = out.GetVersionInfo()
	if _, err := s.cache.Fetch(context.Background(), req); err == nil {
		t.Error("fetch of the current version answered")
	}
}

// decoded returns res encoded and decoded again: the message a proxy gets
// (the cache may hold wire forms, see translate/wire.go).
func decoded(t *testing.T, res types.Resource) types.Resource {
	t.Helper()
	b, err := cachev3.MarshalResource(res)
	if err != nil {
		t.Fatal(err)
	}
	out := res.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// A proxy that rejects its very first response (so its NACK carries an
// empty version) is not sent the same resources again: the next response
// it gets is that of the next change.
func TestSotWFirstResponseNackedNoLoop(t *testing.T) {
	e := startEnv(t)
	e.update(t, gwA.resources(t, "a1"))
	c := newSotwClient(t, e.conn)
	c.send(&discoveryv3.DiscoveryRequest{Node: node(gwA.gateway), TypeUrl: resourcev3.ClusterType})
	r := c.recv()
	c.send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType, ResponseNonce: r.GetNonce(),
		ErrorDetail: &status.Status{Code: int32(codes.InvalidArgument), Message: "no"}})
	eventually(t, "the NACK received", func() bool { return e.requests(t, metrics.KindSotW) == 2 })
	a2 := gwA
	a2.clusters = []string{"c9"}
	e.update(t, a2.resources(t, "a2"))
	// Make before break: c9 comes first, next to the clusters it replaces.
	if r := c.recv(); !slices.Contains(sotwNames(t, r), a2.name("c9")) {
		t.Fatalf("got clusters %v, want a2's c9 (the rejected ones were resent?)", sotwNames(t, r))
	}
}

// A changed EDS cluster whose endpoints did not change gets its load
// assignment sent again (Envoy warms the cluster again and waits for it);
// unchanged clusters and assignments that changed anyway are left as
// they are.
func TestRewarmChangedClusters(t *testing.T) {
	cla := func(name string) types.Resource { return &endpointv3.ClusterLoadAssignment{ClusterName: name} }
	eds := func(name string) types.Resource {
		return &clusterv3.Cluster{Name: name, EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{ServiceName: name}}
	}
	r := &translate.Resources{Endpoints: []types.Resource{cla("a"), cla("b"), cla("c")}}
	got := rewarm(typeDiff{changed: []types.Resource{eds("a"), eds("b")}}, typeDiff{changed: []types.Resource{cla("b")}, removed: []string{"z"}}, r)
	var names []string
	for _, e := range got.changed {
		names = append(names, cachev3.GetResourceName(e))
	}
	if !slices.Equal(names, []string{"b", "a"}) || !slices.Equal(got.removed, []string{"z"}) {
		t.Errorf("endpoint changes %v, removed %v; want [b a], [z]", names, got.removed)
	}
	if same := rewarm(typeDiff{}, typeDiff{changed: []types.Resource{cla("b")}}, r); len(same.changed) != 1 {
		t.Errorf("no cluster changed, yet %d assignments", len(same.changed))
	}
}

// catchUpRoutes does for gw what a new state-of-the-world watch of route
// tables does first.
func catchUpRoutes(t *testing.T, s *Server, gw string) {
	t.Helper()
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	if err := s.cache.gws[gw].catchUpRoutes(); err != nil {
		t.Fatal(err)
	}
}
