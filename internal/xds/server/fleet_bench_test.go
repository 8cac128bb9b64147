package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// fleetGateway is a Gateway of namespace ns<g> shaped as the bench's
// workload: one HTTP listener, n routes, 50 per hostname, each to a
// service of its own with two endpoints. Route 0's path is path0.
func fleetGateway(g, n int, path0 string) *ir.Gateway {
	return shapedGateway(gatewayShape{namespace: fmt.Sprintf("ns%d", g), routes: n, perHost: 50, services: n, endpoints: 2}, path0)
}

// fleetStream is one delta ADS stream of the fleet benchmark: wildcard on
// every type, ACKing each response, noting when it first saw marker (at,
// then seen is closed).
type fleetStream struct {
	conn   *grpc.ClientConn
	mu     sync.Mutex
	marker []byte
	at     time.Time
	seen   chan struct{}
	types  map[string]bool
	ready  chan struct{}
}

func dialFleetStream(ctx context.Context, b *testing.B, addr, gateway string, id int) *fleetStream {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		b.Fatal(err)
	}
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		b.Fatal(err)
	}
	f := &fleetStream{conn: conn, types: map[string]bool{}, ready: make(chan struct{})}
	types := append([]string{resourcev3.VirtualHostType}, servedTypes...)
	for i, typ := range types {
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typ, ResourceNamesSubscribe: []string{"*"}}
		if i == 0 {
			req.Node = &corev3.Node{Id: fmt.Sprintf("fleet-%d", id), Cluster: gateway}
		}
		if err := stream.Send(req); err != nil {
			b.Fatal(err)
		}
	}
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			f.mu.Lock()
			if !f.types[r.GetTypeUrl()] {
				f.types[r.GetTypeUrl()] = true
				if len(f.types) == len(types) { // every type answered, even empty
					close(f.ready)
				}
			}
			if f.marker != nil {
				for _, res := range r.GetResources() {
					if bytes.Contains(res.GetResource().GetValue(), f.marker) {
						f.at = time.Now()
						close(f.seen)
						f.marker = nil
						break
					}
				}
			}
			f.mu.Unlock()
			_ = stream.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: r.GetTypeUrl(), ResponseNonce: r.GetNonce()})
		}
	}()
	return f
}

func (f *fleetStream) track(marker string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.marker, f.seen = []byte(marker), make(chan struct{})
	return f.seen
}

// BenchmarkFleetRouteChange measures one route change per Gateway pushed
// to a fleet of delta ADS streams on one server: 4 Gateways of 2,500
// routes, 1,000 streams (250 per Gateway, each on its own connection).
// An op is the change of one route in every Gateway, until every stream
// has received it; the p99 over streams is reported.
func BenchmarkFleetRouteChange(b *testing.B) {
	const gateways, routes, streams = 4, 2500, 1000
	x := translate.NewTranslator()
	res := make([][2]*translate.Resources, gateways)
	for g := range gateways {
		for i := range 2 {
			r, err := x.Translate(fleetGateway(g, routes, fmt.Sprintf("/fleet-%d-%d-marker", g, i)))
			if err != nil {
				b.Fatal(err)
			}
			res[g][i] = r
		}
	}
	s := New(slog.New(slog.DiscardHandler), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	update := func(i int) {
		all := make([]*translate.Resources, gateways)
		for g := range gateways {
			all[g] = res[g][i%2]
		}
		if err := s.Update(ctx, all); err != nil {
			b.Fatal(err)
		}
	}
	update(0)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, lis) }()
	defer func() { cancel(); <-done }()
	before := heapInuse()
	fleet := make([]*fleetStream, streams)
	for i := range streams {
		fleet[i] = dialFleetStream(ctx, b, lis.Addr().String(), fmt.Sprintf("ns%d/gw", i%gateways), i)
	}
	defer func() {
		for _, f := range fleet {
			f.conn.Close()
		}
	}()
	for _, f := range fleet {
		select {
		case <-f.ready:
		case <-time.After(2 * time.Minute):
			b.Fatal("a stream did not get its configuration")
		}
	}
	after := heapInuse()
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		seen := make([]chan struct{}, streams)
		for j, f := range fleet {
			seen[j] = f.track(fmt.Sprintf("/fleet-%d-%d-marker", j%gateways, (i+1)%2))
		}
		start := time.Now()
		update(i + 1)
		for j, c := range seen {
			select {
			case <-c:
				fleet[j].mu.Lock()
				lat = append(lat, fleet[j].at.Sub(start))
				fleet[j].mu.Unlock()
			case <-time.After(time.Minute):
				b.Fatal("a stream did not get the change")
			}
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(after-before)/streams/1024, "heap-KiB/stream")
}

// heapInuse is the heap in use after a collection. In the benchmark it is
// the server's and the clients' together (the clients keep their
// connections and no resources), so heap-KiB/stream bounds the server's.
func heapInuse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}
