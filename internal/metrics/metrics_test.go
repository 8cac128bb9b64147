package metrics

import (
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// series gathers reg and returns the value of every series of metric name,
// keyed by its labels rendered as `k=v,k=v` (sorted by label name).
func series(t *testing.T, reg prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+"="+lp.GetValue())
			}
			sort.Strings(ls)
			var v float64
			switch {
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				v = float64(m.GetHistogram().GetSampleCount())
			}
			out[strings.Join(ls, ",")] = v
		}
	}
	return out
}

func equal(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestNewRegistersEverything(t *testing.T) {
	m := New()
	m.TranslationDuration.Observe(0.01)
	m.XDSNacks.WithLabelValues("ns/gw", "t").Inc()
	m.XDSRequests.WithLabelValues(KindSotW, "t").Inc()
	m.SetSnapshotVersion("ns/gw", "v1")

	for _, name := range []string{
		"portico_translation_duration_seconds",
		"portico_xds_snapshot_info",
		"portico_xds_streams",
		"portico_xds_nacks_total",
		"portico_xds_requests_total",
		"go_goroutines",
	} {
		if len(series(t, m.Registry, name)) == 0 {
			t.Errorf("metric %s not gathered", name)
		}
	}
	got := series(t, m.Registry, "portico_xds_streams")
	want := map[string]float64{"kind=delta": 0, "kind=sotw": 0}
	if !equal(got, want) {
		t.Errorf("portico_xds_streams = %v, want %v", got, want)
	}
	if got := series(t, m.Registry, "portico_translation_duration_seconds"); got[""] != 1 {
		t.Errorf("translation duration samples = %v, want 1", got)
	}
}

func TestSetSnapshotVersionReplacesOldVersion(t *testing.T) {
	m := New()
	m.SetSnapshotVersion("ns/a", "v1")
	m.SetSnapshotVersion("ns/b", "v1")
	m.SetSnapshotVersion("ns/a", "v2")
	m.SetSnapshotVersion("ns/a", "v2") // idempotent

	got := series(t, m.Registry, "portico_xds_snapshot_info")
	want := map[string]float64{
		"gateway=ns/a,version=v2": 1,
		"gateway=ns/b,version=v1": 1,
	}
	if !equal(got, want) {
		t.Errorf("snapshot_info = %v, want %v", got, want)
	}
}

func TestDeleteGateway(t *testing.T) {
	m := New()
	m.SetSnapshotVersion("ns/a", "v1")
	m.SetSnapshotVersion("ns/b", "v1")
	m.XDSNacks.WithLabelValues("ns/a", "t").Inc()
	m.XDSNacks.WithLabelValues("ns/b", "t").Inc()

	m.DeleteGateway("ns/a")
	m.DeleteGateway("ns/unknown") // no-op

	if got, want := series(t, m.Registry, "portico_xds_snapshot_info"),
		map[string]float64{"gateway=ns/b,version=v1": 1}; !equal(got, want) {
		t.Errorf("snapshot_info = %v, want %v", got, want)
	}
	if got, want := series(t, m.Registry, "portico_xds_nacks_total"),
		map[string]float64{"gateway=ns/b,type_url=t": 1}; !equal(got, want) {
		t.Errorf("nacks = %v, want %v", got, want)
	}

	// A gateway that comes back starts afresh, and its old version is gone.
	m.SetSnapshotVersion("ns/a", "v3")
	m.SetSnapshotVersion("ns/a", "v4")
	if got, want := series(t, m.Registry, "portico_xds_snapshot_info"), map[string]float64{
		"gateway=ns/a,version=v4": 1,
		"gateway=ns/b,version=v1": 1,
	}; !equal(got, want) {
		t.Errorf("snapshot_info = %v, want %v", got, want)
	}
}

func TestMustRegisterExtends(t *testing.T) {
	m := New()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "portico_test_extra"})
	m.MustRegister(g)
	g.Set(3)
	if got := series(t, m.Registry, "portico_test_extra"); got[""] != 3 {
		t.Fatalf("portico_test_extra = %v, want 3", got)
	}
}
