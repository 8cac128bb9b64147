package translate

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/portico-dev/portico/internal/ir"
)

// BenchmarkTranslate is a full translation of generatedGateway(routes)
// (10 hostnames), with its table in VHDS form and in scoped form.
func BenchmarkTranslate(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		gw := generatedGateway(n)
		for _, form := range []struct {
			name string
			opts Options
		}{{"vhds", vhdsOnly}, {"scoped", scopeAll}} {
			b.Run(fmt.Sprintf("routes=%d/form=%s", n, form.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := TranslateWith(gw, form.opts); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func TestGeneratedGateway(t *testing.T) {
	res := mustTranslate(t, generatedGateway(1000))
	// 1,000 routes over 10 hosts: scoped, a route config per host.
	if len(res.Clusters) != 100 || len(res.Routes()) != 10 || len(res.ScopedRoutes) != 10 || len(res.HostScopeFilters) != 1 {
		t.Fatalf("%d clusters, %d route configs, %d scopes, %d filters", len(res.Clusters), len(res.Routes()), len(res.ScopedRoutes), len(res.HostScopeFilters))
	}
	if _, err := res.Snapshot(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkNewService: a route of a Gateway of 10,000 routes and 1,000
// clusters now goes to a new Service (one cluster added), then back (the
// cluster removed): per change, the cost of a cluster set that changed by
// one, for a Translator that translated the previous state.
func BenchmarkNewService(b *testing.B) {
	gw := generatedGateway(10000)
	vh := gw.Listeners[0].FilterChains[0].RouteConfig.VirtualHosts[0]
	withNew, v := cowVirtualHost(gw, 0, 0, 0)
	nc := &ir.Cluster{Name: "bench/svc-00000-new/80", Protocol: ir.UpstreamHTTP1, Endpoints: []ir.Endpoint{{Address: "10.200.0.1", Port: 80}}}
	withNew.Clusters = append(withNew.Clusters, nc)
	slices.SortFunc(withNew.Clusters, func(a, b *ir.Cluster) int { return strings.Compare(a.Name, b.Name) })
	r := *vh.Routes[0]
	r.Forward = forwardTo(nc.Name)
	v.Routes[0] = &r
	x := NewTranslator()
	if _, err := x.Translate(gw); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		next := gw
		if i%2 == 0 {
			next = withNew
		}
		i++
		if _, err := x.Translate(next); err != nil {
			b.Fatal(err)
		}
	}
}
