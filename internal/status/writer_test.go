package status

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/incremental"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/testenv/workload"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 10 * time.Second // deadline of every wait on the workers

func routeStatus(ns, name string, gen int64, reason string) gatewayapi.Status {
	return gatewayapi.Status{
		Kind: resource.KindHTTPRoute, Namespace: ns, Name: name, Generation: gen,
		Route: &gwv1.RouteStatus{Parents: []gwv1.RouteParentStatus{{
			ParentRef:  gwv1.ParentReference{Name: "gw"},
			Conditions: []metav1.Condition{{Type: "Accepted", Status: "True", Reason: reason, ObservedGeneration: gen}},
		}}},
	}
}

func gatewayStatus(ns, name string, attached int32) gatewayapi.Status {
	return gatewayapi.Status{
		Kind: resource.KindGateway, Namespace: ns, Name: name, Generation: 1,
		Gateway: &gwv1.GatewayStatus{
			Conditions: []metav1.Condition{{Type: "Accepted", Status: "True", Reason: "Accepted", ObservedGeneration: 1}},
			Listeners: []gwv1.ListenerStatus{{Name: "http", AttachedRoutes: attached,
				SupportedKinds: []gwv1.RouteGroupKind{{Kind: "HTTPRoute"}}, Conditions: []metav1.Condition{}}},
		},
	}
}

// world returns n route statuses sorted as the translator sorts them, and a
// Gateway status (Gateway sorts before HTTPRoute).
func world(n int) []gatewayapi.Status {
	out := []gatewayapi.Status{gatewayStatus("infra", "gw", int32(n))}
	for i := range n {
		out = append(out, routeStatus("apps", fmt.Sprintf("r%06d", i), 1, "Accepted"))
	}
	return out
}

// setOf returns the set of statuses (which it sorts in place).
func setOf(s ...gatewayapi.Status) gatewayapi.StatusSet { return gatewayapi.NewStatusSet(s) }

// drain takes every ready key from the queue without writing, and returns
// them.
func drain(w *Writer) []string {
	var keys []string
	for w.queue.Len() > 0 {
		k, _ := w.queue.Get()
		keys = append(keys, k)
		w.queue.Done(k)
		w.queue.Forget(k)
	}
	return keys
}

func testWriter(t *testing.T, cfg Config) (*Writer, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w := newWriter(cfg, clk)
	t.Cleanup(w.queue.ShutDown)
	return w, clk
}

func TestPublishEnqueuesOnlyChanges(t *testing.T) {
	w, _ := testWriter(t, Config{})
	s1 := world(100)
	w.Publish(setOf(s1...))
	if got := len(drain(w)); got != 101 {
		t.Fatalf("first publish enqueued %d, want 101", got)
	}

	// The translator carries unchanged statuses over (same pointers) and
	// makes new ones for what it translated again.
	s2 := append([]gatewayapi.Status(nil), s1...)
	s2[0] = gatewayStatus("infra", "gw", 100)                 // recomputed, equal
	s2[5] = routeStatus("apps", s1[5].Name, 1, "Accepted")    // recomputed, equal
	s2[7] = routeStatus("apps", s1[7].Name, 2, "Accepted")    // new generation
	s2[9] = routeStatus("apps", s1[9].Name, 1, "NotAccepted") // changed
	w.Publish(setOf(s2...))
	if got := drain(w); fmt.Sprint(got) != fmt.Sprint([]string{s1[7].Key(), s1[9].Key()}) {
		t.Errorf("enqueued %v, want the two changed routes", got)
	}

	// Recomputed but equal (new pointers): nothing to write.
	s3 := append([]gatewayapi.Status(nil), s2...)
	s3[9] = routeStatus("apps", s1[9].Name, 1, "NotAccepted")
	w.Publish(setOf(s3...))
	if got := drain(w); len(got) != 0 {
		t.Errorf("enqueued %v for a status recomputed equal", got)
	}

	// Insertions and deletions anywhere: the new route is enqueued, the
	// removed route gets a removal entry, the removed Gateway is forgotten.
	s4 := append([]gatewayapi.Status(nil), s3[1:50]...)
	s4 = append(s4, routeStatus("apps", "r000049x", 1, "Accepted"))
	s4 = append(s4, s3[51:]...)
	w.Publish(setOf(s4...))
	want := []string{s1[50].Key(), "HTTPRoute/apps/r000049x"}
	if got := drain(w); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("enqueued %v, want %v", got, want)
	}
	w.mu.Lock()
	_, gw := w.desired[s1[0].Key()]
	removal := w.desired[s1[50].Key()]
	n := len(w.desired)
	w.mu.Unlock()
	if gw {
		t.Error("the Gateway that disappeared is still desired")
	}
	if removal == nil || !removal.removal() {
		t.Fatalf("route %s has no removal entry: %+v", s1[50].Key(), removal)
	}
	if n != 101 {
		t.Errorf("%d desired statuses, want 101 (100 routes + 1 removal)", n)
	}

	// The removal entry survives later publishes until it was written.
	w.Publish(setOf(append([]gatewayapi.Status(nil), s4...)...))
	w.mu.Lock()
	still := w.desired[s1[50].Key()] == removal
	w.mu.Unlock()
	if !still || len(drain(w)) != 0 {
		t.Error("a later publish dropped the pending removal or enqueued something")
	}
}

// The merge trusts the translator's contract: a status carried over with
// the same pointers is not looked at. Checked by breaking the contract.
func TestPublishDoesNotCompareCarriedOverStatuses(t *testing.T) {
	w, _ := testWriter(t, Config{})
	s1 := world(10)
	w.Publish(setOf(s1...))
	drain(w)
	s1[3].Route.Parents[0].Conditions[0].Reason = "Mutated"
	w.Publish(setOf(append([]gatewayapi.Status(nil), s1...)...))
	if got := drain(w); len(got) != 0 {
		t.Errorf("a carried-over status was compared: enqueued %v", got)
	}
}

// Sets built independently (sharing nothing, as two full translations
// make them) are compared status by status.
func TestPublishUnrelatedSetsComparesEverything(t *testing.T) {
	w, _ := testWriter(t, Config{})
	s1 := world(10)
	rev := make([]gatewayapi.Status, len(s1))
	for i := range s1 {
		rev[len(s1)-1-i] = s1[i]
	}
	w.Publish(setOf(rev...))
	if got := len(drain(w)); got != 11 {
		t.Fatalf("enqueued %d, want 11", got)
	}
	// One changed and one removed, the others copied: found by comparison.
	s2 := append([]gatewayapi.Status(nil), s1[:10]...)
	s2[2] = routeStatus("apps", s1[2].Name, 3, "Accepted")
	w.Publish(setOf(s2...))
	want := []string{s1[2].Key(), s1[10].Key()}
	if got := drain(w); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("enqueued %v, want %v", got, want)
	}
	// A key twice: the last one wins.
	dup := append(append([]gatewayapi.Status(nil), s2...), routeStatus("apps", s1[9].Name, 4, "Accepted"))
	w.Publish(setOf(dup...))
	if got := drain(w); fmt.Sprint(got) != fmt.Sprint([]string{s1[9].Key()}) {
		t.Errorf("enqueued %v, want %s", got, s1[9].Key())
	}
	w.mu.Lock()
	gen := w.desired[s1[9].Key()].status.Generation
	w.mu.Unlock()
	if gen != 4 {
		t.Errorf("desired generation %d, want the last one's, 4", gen)
	}
}

// A set made from the published one by edits (as the incremental
// translator makes them) shares the rest: only the edits are looked at.
func TestPublishEditedSet(t *testing.T) {
	w, _ := testWriter(t, Config{})
	base := setOf(world(1000)...)
	w.Publish(base)
	drain(w)
	r := base.Get(resource.KindHTTPRoute, "apps", "r000500")
	next := base.With(routeStatus("apps", "r000500", 2, "Accepted"), routeStatus("apps", "r000500x", 1, "Accepted"),
		*base.Get(resource.KindHTTPRoute, "apps", "r000900")). // copied: equal
		Without(resource.KindHTTPRoute, "apps", "r000100")
	w.Publish(next)
	want := []string{"HTTPRoute/apps/r000100", r.Key(), "HTTPRoute/apps/r000500x"}
	if got := drain(w); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("enqueued %v, want %v", got, want)
	}
	w.mu.Lock()
	removal := w.desired["HTTPRoute/apps/r000100"]
	w.mu.Unlock()
	if removal == nil || !removal.removal() {
		t.Errorf("no removal entry for the removed route: %+v", removal)
	}
}

// fakeAPI is a fake API server that counts status writes.
type fakeAPI struct {
	client.WithWatch
	writes atomic.Int64
	mu     sync.Mutex
	last   map[string]client.Object
}

func newFakeAPI(t *testing.T, objs ...client.Object) *fakeAPI {
	t.Helper()
	s := runtime.NewScheme()
	if err := gwv1.Install(s); err != nil {
		t.Fatal(err)
	}
	f := &fakeAPI{last: map[string]client.Object{}}
	f.WithWatch = fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&gwv1.Gateway{}, &gwv1.HTTPRoute{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				if err := c.SubResource(sub).Update(ctx, obj, opts...); err != nil {
					return err
				}
				f.writes.Add(1)
				return nil
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				if err := c.SubResource(sub).Patch(ctx, obj, patch, opts...); err != nil {
					return err
				}
				f.writes.Add(1)
				return nil
			},
		}).Build()
	return f
}

func (f *fakeAPI) waitWrites(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for f.writes.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d status writes, want %d", f.writes.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// run starts w's workers until the test ends.
func run(t *testing.T, w *Writer) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func TestWriteIntervalCoalescesChangesOfOneObject(t *testing.T) {
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw", Generation: 1}}
	api := newFakeAPI(t, gw)
	w, clk := testWriter(t, Config{Client: api, ControllerName: string(ours), WriteInterval: time.Second})
	w.SetLeading(context.Background())
	run(t, w)

	// The first change is written at once.
	w.Publish(setOf(gatewayStatus("infra", "gw", 1)))
	api.waitWrites(t, 1)
	// The next ones, within the interval, wait for its end and coalesce.
	for n := int32(2); n <= 10; n++ {
		w.Publish(setOf(gatewayStatus("infra", "gw", n)))
	}
	if n := w.queue.Len(); n != 0 {
		t.Errorf("%d keys ready within the interval, want 0", n)
	}
	clk.Step(time.Second)
	api.waitWrites(t, 2)
	var got gwv1.Gateway
	if err := api.Get(context.Background(), client.ObjectKeyFromObject(gw), &got); err != nil {
		t.Fatal(err)
	}
	if a := got.Status.Listeners[0].AttachedRoutes; a != 10 {
		t.Errorf("attachedRoutes = %d, want the last published 10", a)
	}
	// Quiet for longer than the interval: the next change goes at once.
	clk.Step(2 * time.Second)
	w.Publish(setOf(gatewayStatus("infra", "gw", 11)))
	api.waitWrites(t, 3)
	if n := api.writes.Load(); n != 3 {
		t.Errorf("%d writes, want 3", n)
	}
}

func TestRemovalIsWrittenThenForgotten(t *testing.T) {
	r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "r", Generation: 1}}
	api := newFakeAPI(t, r)
	w, clk := testWriter(t, Config{Client: api, ControllerName: string(ours)})
	w.SetLeading(context.Background())
	run(t, w)
	w.Publish(setOf(routeStatus("apps", "r", 1, "Accepted")))
	api.waitWrites(t, 1)
	w.Publish(gatewayapi.StatusSet{})
	clk.Step(DefaultWriteInterval) // the removal is a second write
	api.waitWrites(t, 2)
	deadline := time.Now().Add(wait)
	for {
		w.mu.Lock()
		n := len(w.desired)
		w.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the removal entry was not forgotten after its write")
		}
		time.Sleep(time.Millisecond)
	}
	var got gwv1.HTTPRoute
	if err := api.Get(context.Background(), client.ObjectKeyFromObject(r), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Parents) != 0 {
		t.Errorf("our parents were not removed: %+v", got.Status.Parents)
	}
}

// On a follower a removal entry lasts while the route (in the informer
// cache) still carries our parents, and is forgotten once it does not.
func TestFollowerSettlesRemovals(t *testing.T) {
	withOurs := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "ours"}}
	withOurs.Status.Parents = []gwv1.RouteParentStatus{{ParentRef: gwv1.ParentReference{Name: "gw"}, ControllerName: ours}}
	clean := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "clean"}}
	api := newFakeAPI(t, withOurs, clean)
	w, _ := testWriter(t, Config{Client: api, Reader: api, ControllerName: string(ours)})
	run(t, w)
	w.Publish(setOf(
		routeStatus("apps", "clean", 1, "Accepted"),
		routeStatus("apps", "deleted", 1, "Accepted"),
		routeStatus("apps", "ours", 1, "Accepted"),
	))
	w.Publish(gatewayapi.StatusSet{})
	deadline := time.Now().Add(wait)
	for {
		w.mu.Lock()
		keys := fmt.Sprint(len(w.desired), w.desired["HTTPRoute/apps/ours"] != nil)
		w.mu.Unlock()
		if keys == "1 true" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("desired = %s, want only the route that still carries our parents", keys)
		}
		time.Sleep(time.Millisecond)
	}
	if n := api.writes.Load(); n != 0 {
		t.Errorf("a follower wrote %d statuses", n)
	}
}

// TestIncrementalTranslationPublishesChangesOnly runs the real incremental
// translator: after one route's change the writer diffs the result with
// the previous one and enqueues only the route (its generation changed);
// the other statuses were carried over or recomputed equal.
func TestIncrementalTranslationPublishesChangesOnly(t *testing.T) {
	opts := gatewayapi.Options{ControllerName: "portico.dev/gateway-controller"}
	x := incremental.New()
	snap := genSnapshot(500)
	res, _ := x.Translate(snap, opts)
	if res.StatusSet.Len() < 500 {
		t.Fatalf("%d statuses", res.StatusSet.Len())
	}
	w, _ := testWriter(t, Config{})
	w.Publish(res.StatusSet)
	drain(w)
	for v := 1; v <= 3; v++ {
		var k resource.Key
		snap, k = workload.ChangeRoute(snap, 7*v, v)
		res, st := x.Translate(snap, opts)
		if !st.StatusesChanged {
			t.Fatalf("change %d: statuses unchanged", v)
		}
		w.Publish(res.StatusSet)
		want := (&gatewayapi.Status{Kind: resource.KindHTTPRoute, Namespace: k.Namespace, Name: k.Name}).Key()
		if got := drain(w); fmt.Sprint(got) != fmt.Sprint([]string{want}) {
			t.Errorf("change %d (%s): enqueued %v, want only the route", v, st.Mode, got)
		}
	}
}

// A change published while a worker checks the object (here: reads it from
// the cache) is written at the end of the interval, not right after the
// worker's write.
func TestChangeDuringWriteWaitsForInterval(t *testing.T) {
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw", Generation: 1}}
	api := newFakeAPI(t, gw)
	inWrite, release := make(chan struct{}), make(chan struct{})
	var blocked atomic.Bool
	w, clk := testWriter(t, Config{Client: api, Reader: hookedReader{api, func() {
		if blocked.CompareAndSwap(false, true) {
			close(inWrite)
			<-release
		}
	}}, ControllerName: string(ours)})
	w.SetLeading(context.Background())
	run(t, w)

	w.Publish(setOf(gatewayStatus("infra", "gw", 1)))
	<-inWrite
	w.Publish(setOf(gatewayStatus("infra", "gw", 2)))
	close(release)
	api.waitWrites(t, 1)
	deadline := time.Now().Add(wait)
	for {
		w.mu.Lock()
		busy := w.desired["Gateway/infra/gw"].busy
		w.mu.Unlock()
		if !busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the worker did not finish")
		}
		time.Sleep(time.Millisecond)
	}
	if n := w.queue.Len(); n != 0 || api.writes.Load() != 1 {
		t.Fatalf("after the first write: %d keys ready, %d writes; want 0 and 1", n, api.writes.Load())
	}
	clk.Step(DefaultWriteInterval)
	api.waitWrites(t, 2)
}

// hookedReader calls before ahead of every Get.
type hookedReader struct {
	client.Reader
	before func()
}

func (h hookedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	h.before()
	return h.Reader.Get(ctx, key, obj, opts...)
}

func TestNewTermEnqueuesAggregateStatusesFirst(t *testing.T) {
	w, _ := testWriter(t, Config{})
	w.Publish(setOf(world(50)...))
	drain(w)
	w.SetLeading(context.Background())
	keys := drain(w)
	if len(keys) != 51 || keys[0] != "Gateway/infra/gw" {
		t.Errorf("term started with %d keys, first %q; want 51, the Gateway first", len(keys), keys[0])
	}
}

// The translator never reads status: entries of ours left on a route that
// no longer names our parents (written while no replica ran) are found by
// the sweep at the start of a term, once a set was published, and removed
// with the other controllers' entries kept; a route whose status changes
// on the server later (Observe) is checked the same way.
func TestSweepRemovesStaleEntries(t *testing.T) {
	theirs := gwv1.RouteParentStatus{ParentRef: gwv1.ParentReference{Name: "other"}, ControllerName: "example.com/other",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: "True", Reason: "Accepted", LastTransitionTime: t0}}}
	stale := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "stale"}}
	stale.Status.Parents = []gwv1.RouteParentStatus{{ParentRef: gwv1.ParentReference{Name: "gw"}, ControllerName: ours}, theirs}
	foreign := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "foreign"}}
	foreign.Status.Parents = []gwv1.RouteParentStatus{theirs}
	served := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "r", Generation: 1}}
	api := newFakeAPI(t, stale, foreign, served)
	w, _ := testWriter(t, Config{Client: api, Reader: api, ControllerName: string(ours)})
	w.SetLeading(context.Background())
	run(t, w)
	w.Publish(setOf(routeStatus("apps", "r", 1, "Accepted")))
	api.waitWrites(t, 2) // r, and the stale entry of "stale"
	get := func(name string) gwv1.HTTPRoute {
		var r gwv1.HTTPRoute
		if err := api.Get(context.Background(), client.ObjectKey{Namespace: "apps", Name: name}, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	waitParents := func(name string, want int) {
		t.Helper()
		deadline := time.Now().Add(wait)
		for {
			r := get(name)
			if len(r.Status.Parents) == want && !hasOurParents(&r, ours) == (name != "r") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: parents %+v", name, r.Status.Parents)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitParents("stale", 1)
	if p := get("stale").Status.Parents[0]; p.ControllerName != theirs.ControllerName {
		t.Errorf("another controller's entry was not kept: %+v", p)
	}

	// Someone writes an entry of ours on a route we have no status for.
	f := get("foreign")
	f.Status.Parents = append(f.Status.Parents, gwv1.RouteParentStatus{ParentRef: gwv1.ParentReference{Name: "gw"}, ControllerName: ours})
	if err := api.Status().Update(context.Background(), &f); err != nil {
		t.Fatal(err)
	}
	w.Observe(resource.KindHTTPRoute, client.ObjectKey{Namespace: "apps", Name: "foreign"})
	waitParents("foreign", 1)
	if n := api.writes.Load(); n != 4 { // r, stale, our update above, foreign
		t.Errorf("%d writes, want 4", n)
	}
}
