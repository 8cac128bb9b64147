package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/incremental"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/status"
	"github.com/portico-dev/portico/internal/testenv/workload"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// BenchmarkFullTranslation: Gateway API objects → statuses, IR and Envoy
// resources of every Gateway (validated and content-hashed), one Gateway
// after the other. "parallel" translates the Gateways' IR to Envoy
// resources in parallel, as the pipeline does (translate.TranslateAll).
func BenchmarkFullTranslation(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		snap := workload.Snapshot(n)
		opts := gatewayapi.Options{ControllerName: workload.ControllerName}
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res := gatewayapi.Translate(snap, opts)
				for _, gw := range res.Gateways {
					if _, err := translate.Translate(gw); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run(fmt.Sprintf("routes=%d/parallel", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res := gatewayapi.Translate(snap, opts)
				_, errs := translate.TranslateAll(res.Gateways)
				if err := errors.Join(errs...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// nopSink takes xDS updates and statuses and drops them.
type nopSink struct{}

func (nopSink) Update(context.Context, []*translate.Resources) error { return nil }
func (nopSink) Publish(gatewayapi.StatusSet)                         {}

// benchPipeline returns a pipeline that has translated snap.
func benchPipeline(b *testing.B, snap *resource.Snapshot) *Pipeline {
	p := New(Config{ControllerName: workload.ControllerName, XDS: nopSink{}, Status: nopSink{}})
	p.process(context.Background(), snap, 0)
	if l := p.Latest(); l == nil || len(l.XDS) != workload.Gateways {
		b.Fatal("first translation failed")
	}
	return p
}

// BenchmarkIncrementalRouteChange: one HTTPRoute changes; the pipeline
// translates the change (Gateway API and xDS) and hands it off. The
// snapshot lists the change, as the Kubernetes provider's do; "diff"
// leaves it out, so that the pipeline compares the snapshots.
func BenchmarkIncrementalRouteChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, hint := range []bool{true, false} {
			name := fmt.Sprintf("routes=%d", n)
			if !hint {
				name += "/diff"
			}
			b.Run(name, func(b *testing.B) {
				snap := workload.Snapshot(n)
				p := benchPipeline(b, snap)
				routeChanges(b, p, snap, n, hint)
				if st := p.Latest().Stats; st.Mode != incremental.ModeRoutes || st.Gateways != 1 {
					b.Fatalf("stats %+v", st)
				}
			})
		}
	}
}

// routeChanges runs b.N route changes of snap (n routes) through p, the
// changes listed in the snapshot when hint, and reports the bytes a delta
// client of the Gateway is sent per change.
func routeChanges(b *testing.B, p *Pipeline, snap *resource.Snapshot, n int, hint bool) {
	changes(b, p, snap, func(s *resource.Snapshot, i int) *resource.Snapshot {
		s, _ = workload.ChangeRoute(s, (i*7919)%n, i)
		if !hint {
			s.Changes = nil
		}
		return s
	})
}

// changes runs b.N changes of snap made by change (the i-th from the
// snapshot before) through p, timing their processing only, and reports
// the bytes a delta client of the Gateway is sent per change.
func changes(b *testing.B, p *Pipeline, snap *resource.Snapshot, change func(*resource.Snapshot, int) *resource.Snapshot) {
	b.ReportAllocs()
	b.ResetTimer()
	var pushed int
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		snap = change(snap, i)
		prev := p.Latest()
		b.StartTimer()
		p.process(context.Background(), snap, 0)
		b.StopTimer()
		pushed += changedBytes(prev.XDS, p.Latest().XDS)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(pushed)/float64(b.N), "pushed-B/op")
}

// BenchmarkIncrementalRouteChangeOneHostname is
// BenchmarkIncrementalRouteChange with every route of a Gateway on one
// hostname: the change resends the whole virtual host (VHDS sends virtual
// hosts whole), so what is pushed grows with the routes of the hostname,
// not with the change.
func BenchmarkIncrementalRouteChangeOneHostname(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			snap := workload.OneHostname(n)
			routeChanges(b, benchPipeline(b, snap), snap, n, true)
		})
	}
}

// BenchmarkRouteToNewService: one HTTPRoute goes to a Service no route
// uses (a new cluster on its Gateway), then back (the cluster removed):
// the cost of a change of the cluster set, through the pipeline.
func BenchmarkRouteToNewService(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			snap := workload.Snapshot(n)
			p := benchPipeline(b, snap)
			const route = 7
			orig := snap.HTTPRoutes.Value(resource.Key{Namespace: fmt.Sprintf("team%d", route%workload.Namespaces),
				Name: fmt.Sprintf("route%d", route)}).Spec.Rules[1].BackendRefs[0].Name
			// The Service exists, unused, before the timed changes.
			snap, _ = workload.RouteToService(snap, route, "fresh")
			p.process(context.Background(), snap, 0)
			snap, _ = workload.RouteToService(snap, route, string(orig))
			p.process(context.Background(), snap, 0)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				svc := "fresh"
				if i%2 == 1 {
					svc = string(orig)
				}
				snap, _ = workload.RouteToService(snap, route, svc)
				b.StartTimer()
				p.process(context.Background(), snap, 0)
			}
			b.StopTimer()
			if st := p.Latest().Stats; st.Mode != incremental.ModeRoutes || st.Gateways != 1 {
				b.Fatalf("stats %+v", st)
			}
		})
	}
}

// BenchmarkEndpointChange: the endpoints of one Service change; only the
// load assignment of its cluster is computed again.
func BenchmarkEndpointChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			snap := workload.Snapshot(n)
			p := benchPipeline(b, snap)
			changes(b, p, snap, func(s *resource.Snapshot, i int) *resource.Snapshot {
				r := (i * 7919) % n
				s, _ = workload.ChangeEndpoints(s, r, r/workload.RoutesPerService, i)
				return s
			})
			if st := p.Latest().Stats; st.Mode != incremental.ModeEndpoints || st.Gateways != 1 {
				b.Fatalf("stats %+v", st)
			}
		})
	}
}

// deltaForms are the lists of Resources a delta client is served: route
// tables in VHDS form and their virtual hosts (translate's vhds.go), or
// in scoped form with their scopes and host-scope filters (scoped.go).
var deltaForms = []string{resourcev3.ListenerType, translate.VHDSRouteType, resourcev3.VirtualHostType,
	resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.SecretType,
	resourcev3.ScopedRouteType, resourcev3.ExtensionConfigType}

// changedBytes is the encoded size of the resources that differ between
// two hand-offs (translate.Diff): what delta xDS sends to one proxy of each
// changed Gateway (without framing).
func changedBytes(prev, cur []*translate.Resources) int {
	return changedBytesOf(prev, cur, nil)
}

// changedBytesOf is changedBytes of the resources keep accepts (all when
// keep is nil).
func changedBytesOf(prev, cur []*translate.Resources, keep func(typ, name string) bool) int {
	old := map[string]*translate.Resources{}
	for _, r := range prev {
		old[r.Gateway] = r
	}
	n := 0
	for _, r := range cur {
		o := old[r.Gateway]
		if o == r {
			continue
		}
		for _, typ := range deltaForms {
			changed, _ := translate.Diff(o, r, typ)
			for _, res := range changed {
				if keep == nil || keep(typ, cachev3.GetResourceName(res)) {
					n += proto.Size(res)
				}
			}
		}
	}
	return n
}

// TestRouteChangeBytes reports the size of what a single-route change
// pushes to a delta client (-v), and that it is the two virtual hosts
// holding the route: its hostname's in the HTTP and the HTTPS table of its
// Gateway, by VHDS, or, for tables in scoped form (at 10,000 routes), the
// route configs of that hostname.
func TestRouteChangeBytes(t *testing.T) {
	sizes := []int{1000}
	if !testing.Short() {
		sizes = append(sizes, 10000)
	}
	for _, n := range sizes {
		snap := workload.Snapshot(n)
		sink := &countingSink{}
		p := New(Config{ControllerName: workload.ControllerName, XDS: sink})
		p.process(context.Background(), snap, 0)
		prev := p.Latest()
		snap, _ = workload.ChangeRoute(snap, 42, 1)
		p.process(context.Background(), snap, 0)
		cur := p.Latest()
		var rcs []string
		for i, r := range cur.XDS {
			if r == prev.XDS[i] {
				continue
			}
			for _, typ := range deltaForms {
				changed, removed := translate.Diff(prev.XDS[i], r, typ)
				for _, res := range changed {
					rcs = append(rcs, fmt.Sprintf("%s %s (%d B)", typ, cachev3.GetResourceName(res), proto.Size(res)))
				}
				for _, name := range removed {
					rcs = append(rcs, "removed "+name)
				}
			}
		}
		total := changedBytes(prev.XDS, cur.XDS)
		t.Logf("routes=%d: a single-route change pushes %d B: %v", n, total, rcs)
		oneHost := func(s string) bool {
			return strings.HasPrefix(s, resourcev3.VirtualHostType+" ") || strings.HasPrefix(s, translate.VHDSRouteType+" ")
		}
		if len(rcs) != 2 || !oneHost(rcs[0]) || !oneHost(rcs[1]) {
			t.Errorf("changed resources %v, want the virtual hosts of the route's hostname in the HTTP and HTTPS tables of its Gateway", rcs)
		}
	}
}

// updateSink signals every xDS update.
type updateSink struct{ updated chan struct{} }

func (s updateSink) Update(context.Context, []*translate.Resources) error {
	s.updated <- struct{}{}
	return nil
}

// BenchmarkSubmitToUpdate: the latency of an isolated change through the
// running loop, from Submit to the xDS sink's Update, with the real
// translators and status writer (not leading). Each change comes after
// the pause that follows the previous translation: the loop is idle.
func BenchmarkSubmitToUpdate(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			snap := workload.Snapshot(n)
			sink := updateSink{updated: make(chan struct{}, 1)}
			w := status.New(status.Config{ControllerName: workload.ControllerName})
			p := New(Config{ControllerName: workload.ControllerName, XDS: sink, Status: w})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = p.Run(ctx) }()
			wctx, wcancel := context.WithCancel(context.Background())
			wdone := make(chan struct{})
			go func() { defer close(wdone); w.Run(wctx) }()
			defer func() { cancel(); <-done; wcancel(); <-wdone }()
			p.Submit(snap)
			<-sink.updated
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				snap, _ = workload.ChangeRoute(snap, (i*7919)%n, i)
				time.Sleep(DefaultDebounce + time.Millisecond) // idle: the pause is over
				b.StartTimer()
				p.Submit(snap)
				<-sink.updated
			}
			b.StopTimer()
			if st := p.Latest().Stats; st.Mode != incremental.ModeRoutes {
				b.Fatalf("stats %+v", st)
			}
		})
	}
}
