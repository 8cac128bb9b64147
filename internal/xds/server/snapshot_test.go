package server

import (
	"context"
	"testing"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/xds/translate"
)

func typedGateway(path string, endpoint string) *ir.Gateway {
	return &ir.Gateway{
		Namespace: "ns", Name: "gw",
		Listeners: []*ir.Listener{{Name: "http-80", Port: 80, Protocol: ir.ProtocolHTTP, FilterChains: []*ir.FilterChain{{
			Name: "http-80",
			RouteConfig: &ir.RouteConfig{Name: "http-80", VirtualHosts: []*ir.VirtualHost{{Name: "*", Hostname: "*", Routes: []*ir.Route{{
				Name:    "r",
				Match:   ir.Match{Path: &ir.PathMatch{Type: ir.PathPrefix, Value: path}},
				Forward: &ir.Forward{Backends: []*ir.WeightedBackend{{Cluster: "ns/svc/80", Weight: 1}}},
			}}}}},
		}}}},
		Clusters: []*ir.Cluster{{Name: "ns/svc/80", Protocol: ir.UpstreamHTTP1, Endpoints: []ir.Endpoint{{Address: endpoint, Port: 8080}}}},
	}
}

// An update hands the cache the changed resources only: after a change of
// one route, the other types' resources are the very objects served before,
// and the consistency index follows the change.
func TestUpdateSetsChangedResourcesOnly(t *testing.T) {
	s := New(nil, nil)
	ctx := context.Background()
	x := translate.NewTranslator()
	first, err := x.Translate(typedGateway("/a", "10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, []*translate.Resources{first}); err != nil {
		t.Fatal(err)
	}
	before := cached(s, "ns/gw")
	second, err := x.Translate(typedGateway("/b", "10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, []*translate.Resources{second}); err != nil {
		t.Fatal(err)
	}
	after := cached(s, "ns/gw")
	for _, typ := range servedTypes {
		if len(after[typ]) != len(before[typ]) {
			t.Fatalf("%s: %d resources, want %d", typ, len(after[typ]), len(before[typ]))
		}
		for name, res := range after[typ] {
			if same := res == before[typ][name]; same == (typ == resourcev3.RouteType) {
				t.Errorf("%s %s: same object %v, want a new object for routes only", typ, name, same)
			}
		}
	}
	if got := len(s.cache.gws["ns/gw"].refs.count); got != 2 { // the route table and the load assignment
		t.Errorf("%d referenced resources, want 2", got)
	}
}

// cached returns the resources in the LinearCaches of gw by type and name.
func cached(s *Server, gw string) map[string]map[string]any {
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	out := map[string]map[string]any{}
	for typ, lc := range s.cache.gws[gw].types {
		out[typ] = map[string]any{}
		for name, res := range lc.GetResources() {
			out[typ][name] = res
		}
	}
	return out
}
