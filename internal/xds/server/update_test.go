package server

import (
	"context"
	"strings"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/xds/translate"
)

func TestUpdateSkipsUnchangedVersion(t *testing.T) {
	m := metrics.New()
	s := New(nil, m)
	ctx := context.Background()
	if err := s.Update(ctx, []*translate.Resources{gwA.resources(t, "a1")}); err != nil {
		t.Fatal(err)
	}
	first, ok := s.Served(gwA.gateway)
	if !ok {
		t.Fatal("gw-a not served")
	}
	// Same version (even with other content): the resources are not replaced.
	changed := gwA
	changed.cert = "other"
	if err := s.Update(ctx, []*translate.Resources{changed.resources(t, "a1")}); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.Served(gwA.gateway); again != first {
		t.Error("resources replaced although the version did not change")
	}
	if err := s.Update(ctx, []*translate.Resources{changed.resources(t, "a2")}); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.Served(gwA.gateway); again == first || again.Version != "a2" {
		t.Error("resources not replaced on a new version")
	}
	if v, ok := metricValue(t, m.Registry, "portico_xds_snapshot_info",
		map[string]string{"gateway": gwA.gateway, "version": "a2"}); !ok || v != 1 {
		t.Errorf("snapshot_info{a2} = %v, %v", v, ok)
	}
	if _, ok := metricValue(t, m.Registry, "portico_xds_snapshot_info",
		map[string]string{"gateway": gwA.gateway, "version": "a1"}); ok {
		t.Error("snapshot_info{a1} still exported")
	}
}

func TestUpdateRejectsBadInputKeepingLastGood(t *testing.T) {
	s := New(nil, nil)
	ctx := context.Background()
	if err := s.Update(ctx, []*translate.Resources{gwA.resources(t, "a1"), gwB.resources(t, "b1")}); err != nil {
		t.Fatal(err)
	}

	// gw-a: an EDS cluster without its load assignment is inconsistent.
	bad := gwA.resources(t, "a2")
	bad.Endpoints = bad.Endpoints[:1]
	// gw-b: fine, and must be applied despite gw-a's error.
	b2 := gwB.resources(t, "b2")
	err := s.Update(ctx, []*translate.Resources{
		nil,
		bad,
		b2,
		gwB.resources(t, "b9"), // duplicate: ignored
		{Gateway: "", Version: "x"},
		{Gateway: "ns/no-version"},
	})
	if err == nil {
		t.Fatal("Update accepted bad input")
	}
	for _, want := range []string{"gateway ns/gw-a", "duplicate", "without gateway name", "ns/no-version: xds resources without version"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if r, ok := s.Served(gwA.gateway); !ok || r.Version != "a1" {
		t.Errorf("gw-a after a bad update: %v %v, want a1 kept", r, ok)
	}
	if r, ok := s.Served(gwB.gateway); !ok || r.Version != "b2" {
		t.Errorf("gw-b: %v %v, want b2", r, ok)
	}
	if _, ok := s.Served("ns/no-version"); ok {
		t.Error("resources without version were set")
	}

	// The same good input again applies gw-a: its failed version was not recorded.
	if err := s.Update(ctx, []*translate.Resources{gwA.resources(t, "a2"), b2}); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.Served(gwA.gateway); r.Version != "a2" {
		t.Error("gw-a not updated after the bad input was fixed")
	}

	// Empty input clears everything.
	if err := s.Update(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, gw := range []string{gwA.gateway, gwB.gateway} {
		if _, ok := s.Served(gw); ok {
			t.Errorf("%s still served", gw)
		}
	}
}

func TestCallbacksBindNode(t *testing.T) {
	c := newCallbacks(discardLogger(), metrics.New())
	ok := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error %v", err)
		}
	}
	// The node is only on the first request of a stream.
	ok(c.OnStreamDeltaRequest(1, &discoveryv3.DeltaDiscoveryRequest{Node: node("ns/gw"), TypeUrl: resourcev3.ClusterType}))
	ok(c.OnStreamDeltaRequest(1, &discoveryv3.DeltaDiscoveryRequest{TypeUrl: resourcev3.ListenerType}))
	// Stream ids of SotW and delta are independent.
	err := c.OnStreamRequest(1, &discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ClusterType})
	if grpcstatus.Code(err) != codes.InvalidArgument {
		t.Errorf("sotw request without node: %v, want InvalidArgument", err)
	}
	// A stream cannot switch gateway.
	err = c.OnStreamDeltaRequest(1, &discoveryv3.DeltaDiscoveryRequest{Node: node("ns/other"), TypeUrl: resourcev3.ClusterType})
	if grpcstatus.Code(err) != codes.InvalidArgument {
		t.Errorf("gateway switch: %v, want InvalidArgument", err)
	}
	c.OnDeltaStreamClosed(1, nil)
	if len(c.delta) != 0 {
		t.Errorf("stream state kept after close: %v", c.delta)
	}
	// Fetch requests need a cluster too.
	if err := c.OnFetchRequest(context.Background(), &discoveryv3.DiscoveryRequest{Node: node("")}); err == nil {
		t.Error("fetch without cluster accepted")
	}
	ok(c.OnFetchRequest(context.Background(), &discoveryv3.DiscoveryRequest{Node: node("ns/gw")}))
}
