package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/incremental"
	"github.com/portico-dev/portico/internal/testenv/workload"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// BenchmarkIncrementalRouteChangeSplit is BenchmarkIncrementalRouteChange
// without and with the route split by hostname (translate.Options). Besides
// pushed-B/op it reports https-B/op, the part of it that is HTTPS route
// configs: the workload's HTTPS listeners serve a wildcard hostname, one filter
// chain for all hostnames, which the split leaves as it is.
func BenchmarkIncrementalRouteChangeSplit(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, split := range []translate.RouteSplit{translate.RouteSplitNone, translate.RouteSplitHostname} {
			b.Run(fmt.Sprintf("routes=%d/split=%s", n, split), func(b *testing.B) {
				snap := workload.Snapshot(n)
				p := New(Config{ControllerName: workload.ControllerName, XDS: nopSink{}, Status: nopSink{},
					XDSOptions: translate.Options{RouteSplit: split}})
				p.process(context.Background(), snap, 0)
				if l := p.Latest(); l == nil || len(l.XDS) != workload.Gateways {
					b.Fatal("first translation failed")
				}
				b.ReportAllocs()
				b.ResetTimer()
				var pushed, https int
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					snap, _ = workload.ChangeRoute(snap, (i*7919)%n, i)
					prev := p.Latest()
					b.StartTimer()
					p.process(context.Background(), snap, 0)
					b.StopTimer()
					pushed += changedBytes(prev.XDS, p.Latest().XDS)
					https += changedHTTPSRouteBytes(prev.XDS, p.Latest().XDS)
					b.StartTimer()
				}
				b.StopTimer()
				b.ReportMetric(float64(pushed)/float64(b.N), "pushed-B/op")
				b.ReportMetric(float64(https)/float64(b.N), "https-B/op")
				if st := p.Latest().Stats; st.Mode != incremental.ModeRoutes || st.Gateways != 1 {
					b.Fatalf("stats %+v", st)
				}
			})
		}
	}
}

// changedHTTPSRouteBytes is the part of changedBytes that is route
// configs of HTTPS listeners.
func changedHTTPSRouteBytes(prev, cur []*translate.Resources) int {
	return changedBytesOf(prev, cur, func(typ, name string) bool {
		return typ == resourcev3.RouteType && strings.Contains(name, "/https-")
	})
}

// With the split, a single-route change sends one hostname's route config
// for the HTTP listener, and no Listener or scope.
func TestRouteChangeSplit(t *testing.T) {
	snap := workload.Snapshot(1000)
	p := New(Config{ControllerName: workload.ControllerName, XDS: &countingSink{},
		XDSOptions: translate.Options{RouteSplit: translate.RouteSplitHostname}})
	p.process(context.Background(), snap, 0)
	prev := p.Latest()
	for _, r := range prev.XDS {
		if len(r.ScopedRoutes) != workload.HostsPerGateway {
			t.Fatalf("%s: %d scopes, want %d", r.Gateway, len(r.ScopedRoutes), workload.HostsPerGateway)
		}
	}
	snap, _ = workload.ChangeRoute(snap, 42, 1)
	p.process(context.Background(), snap, 0)
	cur := p.Latest()
	var changed []string
	for i, r := range cur.XDS {
		if r == prev.XDS[i] {
			continue
		}
		pv, cv := prev.XDS[i].VersionMap(), r.VersionMap()
		for typ, rs := range r.ByType() {
			for _, res := range rs {
				if name := cachev3.GetResourceName(res); pv[typ][name] != cv[typ][name] {
					changed = append(changed, typ[strings.LastIndex(typ, ".")+1:]+" "+name)
				}
			}
		}
	}
	t.Logf("a single-route change with the split sends %d B: %v", changedBytes(prev.XDS, cur.XDS), changed)
	if len(changed) != 2 || !strings.HasPrefix(changed[0], "RouteConfiguration ") || !strings.HasPrefix(changed[1], "RouteConfiguration ") {
		t.Fatalf("changed %v, want two route configs (the hostname's of the HTTP listener and the HTTPS chain's)", changed)
	}
}

// BenchmarkXDSTranslationSplit: a full xDS translation (IR → validated,
// hashed Envoy resources of every Gateway, in parallel) without and with
// the route split by hostname.
func BenchmarkXDSTranslationSplit(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		res := gatewayapi.Translate(workload.Snapshot(n), gatewayapi.Options{ControllerName: workload.ControllerName})
		for _, split := range []translate.RouteSplit{translate.RouteSplitNone, translate.RouteSplitHostname} {
			b.Run(fmt.Sprintf("routes=%d/split=%s", n, split), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					_, errs := translate.NewTranslatorWith(translate.Options{RouteSplit: split}).TranslateAll(res.Gateways)
					if err := errors.Join(errs...); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
