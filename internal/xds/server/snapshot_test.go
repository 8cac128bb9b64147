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

// Resources of the translate package give snapshots whose types are each
// versioned by their content, whose unchanged types are those of the
// previous snapshot, and that carry the version of every resource.
func TestSnapshotVersionsTypesByContent(t *testing.T) {
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
	snap1, _ := s.Cache().GetSnapshot("ns/gw")
	second, err := x.Translate(typedGateway("/b", "10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, []*translate.Resources{second}); err != nil {
		t.Fatal(err)
	}
	snap2, _ := s.Cache().GetSnapshot("ns/gw")
	for _, typ := range servedTypes {
		if got, want := snap2.GetVersion(typ), second.TypeVersion(typ); got != want || got == "" {
			t.Errorf("%s version %q, want %q", typ, got, want)
		}
		same := snap1.GetVersion(typ) == snap2.GetVersion(typ)
		if (typ == resourcev3.RouteType) == same {
			t.Errorf("%s: version changed %v, want a change of routes only", typ, !same)
		}
	}
	if snap2.GetVersionMap(resourcev3.RouteType)["ns/gw/http-80"] != second.ResourceVersions(resourcev3.RouteType)["ns/gw/http-80"] {
		t.Error("the snapshot does not carry the resource versions")
	}
	// Unchanged types share the previous snapshot's index.
	c1, c2 := snap1.GetResourcesAndTTL(resourcev3.ClusterType), snap2.GetResourcesAndTTL(resourcev3.ClusterType)
	if len(c1) != 1 || len(c2) != 1 || c1["ns/svc/80"].Resource != c2["ns/svc/80"].Resource {
		t.Error("the clusters of the previous snapshot were not reused")
	}
	if err := snap2.(interface{ Consistent() error }).Consistent(); err != nil {
		t.Error(err)
	}
}
