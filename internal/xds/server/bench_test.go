package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// largeGateway is a Gateway with one HTTP listener and n routes: ten per
// hostname, each to one of n/5 services. Route 0's path is path0.
func largeGateway(n int, path0 string) *ir.Gateway {
	return shapedGateway(gatewayShape{namespace: "ns", routes: n, perHost: 10, services: n / 5, endpoints: 1}, path0)
}

// gatewayShape is the shape of a generated Gateway: routes, perHost of
// them on each hostname, each to one of services services (route i to
// service i%services), each with endpoints endpoints.
type gatewayShape struct {
	namespace                            string
	routes, perHost, services, endpoints int
}

// shapedGateway is a Gateway named gw of one HTTP listener in the shape s.
// Route 0's path is path0.
func shapedGateway(s gatewayShape, path0 string) *ir.Gateway {
	gw := &ir.Gateway{Namespace: s.namespace, Name: "gw"}
	rc := &ir.RouteConfig{Name: "http-80"}
	cluster := func(i int) string { return fmt.Sprintf("%s/svc%d/80", s.namespace, i) }
	var vh *ir.VirtualHost
	for i := range s.routes {
		if i%s.perHost == 0 {
			host := fmt.Sprintf("h%d.example.com", i/s.perHost)
			vh = &ir.VirtualHost{Name: host, Hostname: host}
			rc.VirtualHosts = append(rc.VirtualHosts, vh)
		}
		path := fmt.Sprintf("/p%d", i)
		if i == 0 {
			path = path0
		}
		vh.Routes = append(vh.Routes, &ir.Route{
			Name:    fmt.Sprintf("r%d", i),
			Match:   ir.Match{Path: &ir.PathMatch{Type: ir.PathPrefix, Value: path}},
			Forward: &ir.Forward{Backends: []*ir.WeightedBackend{{Cluster: cluster(i % s.services), Weight: 1}}},
		})
	}
	gw.Listeners = []*ir.Listener{{Name: "http-80", Port: 80, Protocol: ir.ProtocolHTTP,
		FilterChains: []*ir.FilterChain{{Name: "http-80", RouteConfig: rc}}}}
	for c := range s.services {
		var eps []ir.Endpoint
		for e := range s.endpoints {
			eps = append(eps, ir.Endpoint{Address: fmt.Sprintf("10.%d.%d.%d", c/250, c%250, e+1), Port: 8080})
		}
		gw.Clusters = append(gw.Clusters, &ir.Cluster{Name: cluster(c), Protocol: ir.UpstreamHTTP1, Endpoints: eps})
	}
	return gw
}

// BenchmarkUpdateRouteChange measures Server.Update for a change of one
// route in a Gateway of 10,000 routes and 2,000 clusters, with one proxy
// connected over delta ADS (wildcard on every type, virtual hosts too:
// delta clients get route tables by VHDS) that receives and
// acknowledges each push: the cost of handing one change to the cache and
// of the push it causes (b.N pushes are awaited). vhds: the table in VHDS
// form (the change is a virtual host); scoped: in scoped form, as by
// default at that size (the change is one host's route config).
func BenchmarkUpdateRouteChange(b *testing.B) {
	for _, form := range []struct {
		name string
		opts translate.Options
		// changes is the type a route change comes as.
		changes string
	}{
		{"vhds", translate.Options{ScopeAtRoutes: -1}, resourcev3.VirtualHostType},
		{"scoped", translate.Options{}, resourcev3.RouteType},
	} {
		b.Run(form.name, func(b *testing.B) {
			x := translate.NewTranslatorWith(form.opts)
			var res [2]*translate.Resources
			for i, p := range []string{"/a", "/b"} {
				r, err := x.Translate(largeGateway(10000, p))
				if err != nil {
					b.Fatal(err)
				}
				res[i] = r
			}
			s := New(slog.New(slog.DiscardHandler), nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if err := s.Update(ctx, []*translate.Resources{res[0]}); err != nil {
				b.Fatal(err)
			}
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- s.Serve(ctx, lis) }()
			defer func() { cancel(); <-done }()
			conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
			if err != nil {
				b.Fatal(err)
			}
			types := append([]string{resourcev3.VirtualHostType}, servedTypes...)
			for i, typ := range types {
				req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typ, ResourceNamesSubscribe: []string{"*"}}
				if i == 0 {
					req.Node = node("ns/gw")
				}
				if err := stream.Send(req); err != nil {
					b.Fatal(err)
				}
			}
			routes := make(chan int, 1024)
			go func() {
				for {
					r, err := stream.Recv()
					if err != nil {
						close(routes)
						return
					}
					_ = stream.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
					if r.GetTypeUrl() == form.changes {
						n := 0
						for _, res := range r.GetResources() {
							n += len(res.GetResource().GetValue())
						}
						routes <- n
					}
				}
			}()
			if _, ok := <-routes; !ok { // the initial push
				b.Fatal("stream ended")
			}
			bytes := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := s.Update(ctx, []*translate.Resources{res[(i+1)%2]}); err != nil {
					b.Fatal(err)
				}
				n, ok := <-routes
				if !ok {
					b.Fatal("stream ended")
				}
				bytes += n
			}
			b.ReportMetric(float64(bytes)/float64(b.N)/1024, "route-kB/op")
		})
	}
}
