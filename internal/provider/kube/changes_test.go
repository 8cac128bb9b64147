package kube

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/resource"
)

// failingCache fails every List.
type failingCache struct{ cache.Cache }

func (failingCache) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("no cache")
}

// testProvider is a provider whose cache fails: its handlers work, its
// snapshots fail.
func testProvider(t *testing.T) *Provider {
	t.Helper()
	return &Provider{
		cfg:   Config{Notify: func() {}, Observe: func(string, types.NamespacedName) {}, InfraObserve: func(client.Object) {}},
		cache: failingCache{},
	}
}

func handlerOf(t *testing.T, p *Provider, kind string) toolscache.ResourceEventHandler {
	t.Helper()
	for _, w := range p.kinds() {
		if w.kind == kind {
			return p.handler(w)
		}
	}
	t.Fatalf("no kind %s", kind)
	return nil
}

func TestChangesClassifyEvents(t *testing.T) {
	p := testProvider(t)
	route := func(rv string, gen int64, status bool) *gwv1.HTTPRoute {
		r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r", ResourceVersion: rv, Generation: gen}}
		if status {
			r.Status.Parents = []gwv1.RouteParentStatus{{ControllerName: "x"}}
		}
		return r
	}
	h := handlerOf(t, p, "HTTPRoute")
	// A status-only update is not a change for translation.
	h.OnUpdate(route("1", 1, false), route("2", 1, true))
	// A resync is not a change.
	h.OnUpdate(route("2", 1, true), route("2", 1, true))
	if p.changes != nil && p.changes.Len() != 0 {
		t.Fatalf("changes after status-only update and resync: %v", p.changes.Objects)
	}
	h.OnUpdate(route("2", 1, true), route("3", 2, true))

	// An EndpointSlice of a Service no snapshot references is recorded too.
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s-1", ResourceVersion: "5",
		Labels: map[string]string{discoveryv1.LabelServiceName: "s"}}}
	handlerOf(t, p, "EndpointSlice").OnAdd(slice, false)

	// A Namespace update that keeps the labels does not matter.
	ns := func(rv string, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", ResourceVersion: rv, Labels: labels}}
	}
	hn := handlerOf(t, p, "Namespace")
	hn.OnUpdate(ns("1", map[string]string{"a": "1"}), ns("2", map[string]string{"a": "1"}))
	hn.OnUpdate(ns("2", map[string]string{"a": "1"}), ns("3", map[string]string{"a": "2"}))
	handlerOf(t, p, "Secret").OnDelete(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tls"}})

	want := []resource.Ref{
		{Kind: resource.KindHTTPRoute, Key: resource.Key{Namespace: "ns", Name: "r"}},
		{Kind: resource.KindEndpointSlice, Key: resource.Key{Namespace: "ns", Name: "s-1"}},
		{Kind: resource.KindNamespace, Key: resource.Key{Name: "team"}},
		{Kind: resource.KindSecret, Key: resource.Key{Namespace: "ns", Name: "tls"}},
	}
	if p.changes.Len() != len(want) {
		t.Errorf("changes %v, want %v", p.changes.Objects, want)
	}
	for _, r := range want {
		if !p.changes.Has(r.Kind, r.Key) {
			t.Errorf("%v not recorded", r)
		}
	}

	// A snapshot that cannot be built keeps the changes for the next one.
	if _, err := p.Snapshot(context.Background()); err == nil {
		t.Fatal("snapshot of a cache that never started")
	}
	if p.changes.Len() != len(want) {
		t.Errorf("changes after a failed snapshot: %v", p.changes.Objects)
	}
}

// emptyCache holds no object.
type emptyCache struct{ cache.Cache }

func (emptyCache) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func TestSnapshotsCarryChanges(t *testing.T) {
	p := testProvider(t)
	p.cache = emptyCache{}
	h := handlerOf(t, p, "Gateway")
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw", ResourceVersion: "1"}}
	h.OnAdd(gw, true)
	first, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if first.Changes != nil {
		t.Errorf("first snapshot has changes relative to nothing: %v", first.Changes)
	}
	second, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c := second.Changes; c == nil || c.Since != first.ID() || c.Len() != 0 {
		t.Errorf("second snapshot changes = %+v, want none since %d", c, first.ID())
	}
	h.OnDelete(gw)
	third, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c := third.Changes; c == nil || c.Since != second.ID() || !c.Has(resource.KindGateway, resource.Key{Namespace: "ns", Name: "gw"}) || c.Len() != 1 {
		t.Errorf("third snapshot changes = %+v", c)
	}
}
