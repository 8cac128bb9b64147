package pipeline

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/incremental"
	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/render"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/testenv/workload"
	"github.com/portico-dev/portico/internal/xds/translate"
)

var testClock = func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

// countingSink records what the pipeline hands off.
type countingSink struct {
	updates  int
	publish  int
	last     []*translate.Resources
	statuses gatewayapi.StatusSet
}

func (s *countingSink) Update(_ context.Context, res []*translate.Resources) error {
	s.updates++
	s.last = res
	return nil
}

func (s *countingSink) Publish(st gatewayapi.StatusSet) {
	s.publish++
	s.statuses = st
}

// fullRender is the rendered output (statuses and xDS) of a full
// translation of snap, as `portico translate` makes it.
func fullRender(t *testing.T, snap *resource.Snapshot) []byte {
	t.Helper()
	res := gatewayapi.Translate(snap, gatewayapi.Options{ControllerName: workload.ControllerName})
	var xds []*translate.Resources
	for _, gw := range res.Gateways {
		r, err := translate.Translate(gw)
		if err != nil {
			t.Fatal(err)
		}
		xds = append(xds, r)
	}
	return renderYAML(t, res, xds)
}

func renderYAML(t *testing.T, res *gatewayapi.Result, xds []*translate.Resources) []byte {
	t.Helper()
	out, err := render.Build(res, xds, render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := out.YAML()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestIncrementalPipelineMatchesFull applies random single-object changes
// to a generated world and checks after each that what the pipeline hands
// off renders byte for byte like a full translation, and that delta xDS
// versions are the content hashes of a full translation.
func TestIncrementalPipelineMatchesFull(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	sink := &countingSink{}
	p := New(Config{ControllerName: workload.ControllerName, XDS: sink, Status: sink})
	snap := workload.Rich(120)
	steps := 120
	if testing.Short() {
		steps = 30
	}
	for i := 0; i <= steps; i++ {
		desc := "initial"
		if i > 0 {
			snap, desc = workload.Change(snap, rng)
		}
		p.process(context.Background(), snap, 0)
		l := p.Latest()
		got := renderYAML(t, l.Result, l.XDS)
		if want := fullRender(t, snap); !bytes.Equal(got, want) {
			for _, r := range l.XDS {
				fresh, _ := translate.Translate(gatewayIR(t, l.Result, r.Gateway))
				t.Logf("%s: version %s fresh %s; differing %v", r.Gateway, r.Version, fresh.Version, diffResources(fresh, r))
				a, b := r.VersionMap(), fresh.VersionMap()
				for typ := range b {
					for n, v := range b[typ] {
						if a[typ][n] != v {
							t.Logf("  %s %s: %s != %s", typ, n, a[typ][n], v)
						}
					}
					for n := range a[typ] {
						if _, ok := b[typ][n]; !ok {
							t.Logf("  extra %s %s", typ, n)
						}
					}
				}
			}
			t.Fatalf("step %d (%s, %s): output differs from a full translation", i, desc, l.Stats.Mode)
		}
		for _, r := range l.XDS {
			want, err := translate.Translate(gatewayIR(t, l.Result, r.Gateway))
			if err != nil {
				t.Fatal(err)
			}
			if !sameVersions(r.VersionMap(), want.VersionMap()) {
				t.Fatalf("step %d (%s): per-resource versions of %s differ from a fresh translation", i, desc, r.Gateway)
			}
		}
	}
	if n := p.fullTranslations.Load(); n != 1 {
		t.Errorf("%d full translations, want 1", n)
	}
}

func gatewayIR(t *testing.T, res *gatewayapi.Result, key string) *ir.Gateway {
	t.Helper()
	for _, gw := range res.Gateways {
		if gw.Key() == key {
			return gw
		}
	}
	t.Fatalf("no IR for %s", key)
	return nil
}

func sameVersions(a, b map[string]map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for typ, m := range a {
		if len(m) != len(b[typ]) {
			return false
		}
		for k, v := range m {
			if b[typ][k] != v {
				return false
			}
		}
	}
	return true
}

// TestEndpointsFastPath: a change of EndpointSlices only updates the load
// assignments of the affected clusters, without a Gateway API translation
// of routes and listeners nor a status publish, and gives the endpoints of
// a full translation.
func TestEndpointsFastPath(t *testing.T) {
	sink := &countingSink{}
	p := New(Config{ControllerName: workload.ControllerName, XDS: sink, Status: sink})
	snap := workload.Snapshot(200)
	p.process(context.Background(), snap, 0)
	before := p.Latest()
	if before.Stats.Mode != incremental.ModeFull || sink.publish != 1 {
		t.Fatalf("first translation: %+v, %d publishes", before.Stats, sink.publish)
	}

	// Route 42 uses Service svc8 of namespace team2, on Gateway gw2.
	snap, _ = workload.ChangeEndpoints(snap, 42, 42/workload.RoutesPerService, 1)
	p.process(context.Background(), snap, 0)
	after := p.Latest()
	if after.Stats.Mode != incremental.ModeEndpoints || after.Stats.Gateways != 1 {
		t.Fatalf("stats %+v, want the endpoints path for one Gateway", after.Stats)
	}
	if n := p.fullTranslations.Load(); n != 1 {
		t.Errorf("%d full translations, want 1", n)
	}
	if sink.publish != 1 {
		t.Errorf("statuses published %d times, want once", sink.publish)
	}
	if after.Result.StatusSet != before.Result.StatusSet {
		t.Error("statuses recomputed")
	}

	// Only the load assignment of that Service's cluster changed, in the
	// resources of gw2 only.
	changed := 0
	for i, r := range after.XDS {
		old := before.XDS[i]
		if r == old {
			continue
		}
		changed++
		if r.Gateway != "infra/gw2" {
			t.Errorf("resources of %s changed", r.Gateway)
		}
		diff := diffResources(old, r)
		if len(diff) != 1 || diff[0] != resourcev3.EndpointType+" team2/svc8/8080" {
			t.Errorf("changed resources %v, want the assignment of team2/svc8/8080", diff)
		}
	}
	if changed != 1 {
		t.Errorf("%d gateways changed, want 1", changed)
	}

	// The result is that of a full translation.
	if got, want := renderYAML(t, after.Result, after.XDS), fullRender(t, snap); !bytes.Equal(got, want) {
		t.Error("output differs from a full translation")
	}
}

// diffResources lists the resources ("<type> <name>") whose content differs
// between a and b, or that only one has.
func diffResources(a, b *translate.Resources) []string {
	var out []string
	am, bm := a.ByType(), b.ByType()
	for typ, rs := range bm {
		olds := map[string]types.Resource{}
		for _, r := range am[typ] {
			olds[name(r)] = r
		}
		for _, r := range rs {
			if o, ok := olds[name(r)]; !ok || !proto.Equal(o, r) {
				out = append(out, typ+" "+name(r))
			}
			delete(olds, name(r))
		}
		for n := range olds {
			out = append(out, typ+" "+n)
		}
	}
	return out
}

func name(r types.Resource) string { return cachev3.GetResourceName(r) }

func metav1Now() metav1.Time { return metav1.NewTime(testClock()) }
