package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/xds/translate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 10 * time.Second // deadline of every wait on the loop

// sink is a fake XDSSink that reports every update on a channel.
type sink struct {
	calls chan []*translate.Resources
	mu    sync.Mutex
	err   error
}

func newSink() *sink { return &sink{calls: make(chan []*translate.Resources, 100)} }

func (s *sink) Update(_ context.Context, res []*translate.Resources) error {
	s.mu.Lock()
	err := s.err
	s.mu.Unlock()
	s.calls <- res
	return err
}

func (s *sink) setErr(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

func (s *sink) next(t *testing.T) []*translate.Resources {
	t.Helper()
	select {
	case res := <-s.calls:
		return res
	case <-time.After(wait):
		t.Fatal("no xDS update within the deadline")
		return nil
	}
}

type statusSink struct{ got chan gatewayapi.StatusSet }

func (s *statusSink) Publish(st gatewayapi.StatusSet) { s.got <- st }

// snapshot returns a snapshot with the named gateways ("ns/name"); each
// gateway's generation is its xDS version in the fake translators.
func snapshot(gen int64, gateways ...string) *resource.Snapshot {
	s := resource.New()
	for _, g := range gateways {
		ns, name, _ := strings.Cut(g, "/")
		gw := &gwv1.Gateway{}
		gw.Namespace, gw.Name, gw.Generation = ns, name, gen
		s.Gateways.Set(resource.Key{Namespace: ns, Name: name}, gw)
	}
	return s.Build()
}

// fake wires fake translators into p: each Gateway becomes an IR gateway and
// its version is "g<generation>". translated receives every input snapshot.
type fake struct {
	translated chan *resource.Snapshot
	mu         sync.Mutex
	failXDS    map[string]bool
	gen        int64
}

func install(p *Pipeline) *fake {
	f := &fake{translated: make(chan *resource.Snapshot, 100), failXDS: map[string]bool{}}
	p.translateInputs = func(snap *resource.Snapshot, opts gatewayapi.Options) *gatewayapi.Result {
		f.translated <- snap
		res := &gatewayapi.Result{}
		var statuses []gatewayapi.Status
		for _, k := range resource.SortedKeys(snap.Gateways) {
			gw := snap.Gateways.Value(k)
			f.mu.Lock()
			f.gen = gw.Generation
			f.mu.Unlock()
			res.Gateways = append(res.Gateways, &ir.Gateway{Namespace: k.Namespace, Name: k.Name})
			statuses = append(statuses, gatewayapi.Status{
				Kind: resource.KindGateway, Namespace: k.Namespace, Name: k.Name,
				Gateway: &gwv1.GatewayStatus{Conditions: []metav1.Condition{{Type: "Accepted", Status: "True"}}},
			})
		}
		res.StatusSet = gatewayapi.NewStatusSet(statuses)
		return res
	}
	p.translateXDS = func(gw *ir.Gateway) (*translate.Resources, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.failXDS[gw.Key()] {
			return nil, errors.New("boom")
		}
		if gw.Name == "panic" {
			panic("translator bug")
		}
		r := &translate.Resources{Gateway: gw.Key(), Version: fmt.Sprintf("g%d", f.gen)}
		if gw.Name == "dropping" {
			r.Problems = []translate.Problem{{Route: "httproute/" + gw.Namespace + "/r/rule/0/match/0", Err: "Envoy would refuse it"}}
		}
		return r, nil
	}
	return f
}

func (f *fake) fail(gw string, fail bool) {
	f.mu.Lock()
	f.failXDS[gw] = fail
	f.mu.Unlock()
}

// start runs p until the test ends and checks that Run returns on cancel.
func start(t *testing.T, p *Pipeline) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v", err)
			}
		case <-time.After(wait):
			t.Error("Run did not return after cancel")
		}
	})
}

func TestMaxDelayBoundsContinuousSubmits(t *testing.T) {
	s := newSink()
	// Real time: the pause after each translation (an hour of Debounce)
	// is cut to MaxDelay, so translations go on while submits continue.
	p := New(Config{XDS: s, Debounce: time.Hour, MaxDelay: 50 * time.Millisecond})
	install(p)
	start(t, p)

	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for i := int64(1); ; i++ {
			p.Submit(snapshot(i, "default/gw"))
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	// Two translations happen while the stream of submits goes on.
	first := s.next(t)
	second := s.next(t)
	close(stop)
	<-stopped
	if first[0].Version == second[0].Version {
		t.Errorf("both translations saw %s; the second should see newer input", first[0].Version)
	}
}

func TestReadyAndAccessors(t *testing.T) {
	s := newSink()
	st := &statusSink{got: make(chan gatewayapi.StatusSet, 10)}
	m := metrics.New()
	p := New(Config{XDS: s, Status: st, Metrics: m, Debounce: time.Millisecond})
	install(p)

	if p.Ready() || p.Latest() != nil {
		t.Fatal("ready before the first translation")
	}

	// Submitted before Run starts: picked up when it does.
	p.Submit(snapshot(1, "default/gw", "other/gw2"))
	start(t, p)
	s.next(t)
	select {
	case <-p.ReadyC():
	case <-time.After(wait):
		t.Fatal("ReadyC not closed")
	}
	if !p.Ready() {
		t.Fatal("not ready after the first translation")
	}
	statuses := <-st.got
	if first := statuses.Get(resource.KindGateway, "default", "gw"); statuses.Len() != 2 || first == nil {
		t.Errorf("%d statuses, default/gw's %+v (want 2)", statuses.Len(), first)
	}

	l := p.Latest()
	if l == nil || len(l.XDS) != 2 || l.Versions["default/gw"] != "g1" || l.Versions["other/gw2"] != "g1" {
		t.Fatalf("Latest = %+v", l)
	}
	if l.XDS[0].Gateway != "default/gw" || l.XDS[0].Version != "g1" || l.XDS[1].Gateway != "other/gw2" {
		t.Errorf("Latest XDS = %s@%s, %s, want default/gw@g1 and other/gw2 (sorted)", l.XDS[0].Gateway, l.XDS[0].Version, l.XDS[1].Gateway)
	}
	if l.Result == nil || l.Result.StatusSet.Len() != 2 || l.Result.StatusSet.Get(resource.KindGateway, "default", "gw") == nil {
		t.Errorf("Latest Result = %+v, want the statuses of both Gateways", l.Result)
	}
	if n := testutilCount(t, m, "portico_translation_duration_seconds"); n != 1 {
		t.Errorf("translation duration observations = %d, want 1", n)
	}
}

func TestFailedGatewayKeepsPreviousResources(t *testing.T) {
	s := newSink()
	p := New(Config{XDS: s, Debounce: time.Millisecond})
	f := install(p)
	start(t, p)

	p.Submit(snapshot(1, "a/gw", "b/gw"))
	first := s.next(t)
	if len(first) != 2 {
		t.Fatalf("first update = %v", first)
	}
	f.fail("b/gw", true)
	p.Submit(snapshot(2, "a/gw", "b/gw", "c/new", "d/panic"))
	got := s.next(t)
	versions := map[string]string{}
	for _, r := range got {
		versions[r.Gateway] = r.Version
	}
	want := map[string]string{"a/gw": "g2", "b/gw": "g1", "c/new": "g2"}
	if fmt.Sprint(versions) != fmt.Sprint(want) {
		t.Errorf("versions = %v, want %v (b keeps g1, d's panic leaves it out)", versions, want)
	}
	if got[1] != first[1] {
		t.Error("b/gw's previous Resources were not reused")
	}

	// A removed gateway disappears.
	f.fail("b/gw", false)
	p.Submit(snapshot(3, "a/gw"))
	if got := s.next(t); len(got) != 1 || got[0].Gateway != "a/gw" {
		t.Errorf("update = %v, want only a/gw", got)
	}
}

func TestXDSUpdateErrorIsLoggedAndLoopGoesOn(t *testing.T) {
	s := newSink()
	st := &statusSink{got: make(chan gatewayapi.StatusSet, 10)}
	logs := make(records, 100)
	p := New(Config{XDS: s, Status: st, Debounce: time.Millisecond, Log: slog.New(logs)})
	install(p)
	start(t, p)

	s.setErr(errors.New("gateway a/gw: inconsistent"))
	p.Submit(snapshot(1, "a/gw"))
	s.next(t)
	waitLog(t, logs, slog.LevelError, "xDS update failed")
	// The sink applied what it could: the translation is the latest and
	// its statuses are published.
	<-st.got
	if !p.Ready() || p.Latest().Versions["a/gw"] != "g1" {
		t.Errorf("ready=%v latest=%+v", p.Ready(), p.Latest())
	}
	s.setErr(nil)
	p.Submit(snapshot(2, "a/gw"))
	s.next(t)
	<-st.got
	if l := p.Latest(); l.Versions["a/gw"] != "g2" {
		t.Errorf("latest = %v", l.Versions)
	}
}

// records is a slog.Handler sending every record to a channel.
type records chan slog.Record

func (r records) Enabled(context.Context, slog.Level) bool { return true }
func (r records) Handle(_ context.Context, rec slog.Record) error {
	r <- rec.Clone()
	return nil
}
func (r records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r records) WithGroup(string) slog.Handler      { return r }

func waitLog(t *testing.T, logs records, level slog.Level, msg string) {
	t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case r := <-logs:
			if r.Level == level && r.Message == msg {
				return
			}
		case <-timeout:
			t.Fatalf("no %s log %q", level, msg)
		}
	}
}

func TestSubmitFunc(t *testing.T) {
	logs := make(records, 100)
	s := newStepper(t, Config{Debounce: 20 * time.Millisecond, Log: slog.New(logs)}, 0)
	s.submit(t, 1) // translated at once; a pause follows

	// Of the functions submitted during the pause, only the last is
	// called, once, by the loop when the pause ends.
	calls := make(chan int, 10)
	for i := 2; i <= 6; i++ {
		s.p.SubmitFunc(func(ctx context.Context) (*resource.Snapshot, error) {
			calls <- i
			return snapshot(int64(i), "a/gw"), nil
		})
		s.step(t)
	}
	if len(calls) != 0 {
		t.Fatalf("%d builds during the pause, want none", len(calls))
	}
	s.advance(t, 20*time.Millisecond)
	if got := <-calls; got != 6 || len(calls) != 0 {
		t.Errorf("build %d called (%d more), want only 6", got, len(calls))
	}
	if got := s.translations(); len(got) != 2 || got[1].gen != 6 {
		t.Errorf("translations = %+v, want generations 1 and 6", got)
	}

	// A failing build is logged and nothing is translated; the next input is.
	s.clock.Advance(time.Second)
	s.p.SubmitFunc(func(context.Context) (*resource.Snapshot, error) { return nil, errors.New("cache not synced") })
	s.step(t)
	waitLog(t, logs, slog.LevelError, "building the input snapshot failed; keeping the previous configuration")
	s.clock.Advance(time.Second)
	s.submit(t, 7)
	if got := s.translations(); len(got) != 3 || got[2].gen != 7 {
		t.Errorf("translations = %+v, want generations 1, 6 and 7 (none for the failed build)", got)
	}
}

// testutilCount is the sample count of the histogram named name.
func testutilCount(t *testing.T, m *metrics.Metrics, name string) uint64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

// TestStatusesSayWhatIsServed: a Gateway whose xDS translation failed (its
// previous configuration is served) or left a piece out is published
// Programmed=False with why; the others keep the translator's statuses,
// and a Gateway that recovers is published again.
func TestStatusesSayWhatIsServed(t *testing.T) {
	s := newSink()
	st := &statusSink{got: make(chan gatewayapi.StatusSet, 10)}
	p := New(Config{XDS: s, Status: st, Debounce: time.Millisecond})
	f := install(p)
	start(t, p)
	programmed := func(set gatewayapi.StatusSet, gw string) *metav1.Condition {
		ns, name, _ := strings.Cut(gw, "/")
		g := set.Get(resource.KindGateway, ns, name)
		if g == nil {
			t.Fatalf("no status for %s", gw)
		}
		return meta.FindStatusCondition(g.Gateway.Conditions, "Programmed")
	}
	next := func() gatewayapi.StatusSet {
		t.Helper()
		select {
		case set := <-st.got:
			return set
		case <-time.After(wait):
			t.Fatal("no statuses published")
			return gatewayapi.StatusSet{}
		}
	}

	p.Submit(snapshot(1, "a/gw", "b/gw"))
	s.next(t)
	set := next()
	if c := programmed(set, "b/gw"); c != nil {
		t.Fatalf("b/gw Programmed set by the pipeline: %+v", c)
	}
	f.fail("b/gw", true)
	p.Submit(snapshot(2, "a/gw", "b/gw", "c/dropping"))
	s.next(t)
	set = next()
	if c := programmed(set, "b/gw"); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "Invalid" || !strings.Contains(c.Message, "boom") {
		t.Errorf("b/gw (serving its previous configuration) Programmed = %+v, want False/Invalid with the error", c)
	}
	if c := programmed(set, "c/dropping"); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "route httproute/c/r/rule/0/match/0") {
		t.Errorf("c/dropping (a route left out) Programmed = %+v, want False naming the route", c)
	}
	if c := programmed(set, "a/gw"); c != nil {
		t.Errorf("a/gw amended: %+v", c)
	}
	// The recovery is published even though the translator's statuses
	// did not change.
	f.fail("b/gw", false)
	p.Submit(snapshot(2, "a/gw", "b/gw", "c/dropping"))
	s.next(t)
	if c := programmed(next(), "b/gw"); c != nil {
		t.Errorf("b/gw still amended after it recovered: %+v", c)
	}
}
