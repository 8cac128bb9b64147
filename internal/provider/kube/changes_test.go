package kube

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/resource"
)

// failingStore fails every read: errors, and a List of no object.
type failingStore struct{ toolscache.Store }

func (failingStore) GetByKey(string) (any, bool, error) { return nil, false, errors.New("no store") }
func (failingStore) List() []any                        { return []any{"not an object"} }

func TestChangesClassifyEvents(t *testing.T) {
	f := newFakeCluster(t)
	p := f.p
	route := func(rv string, gen int64, status bool) *gwv1.HTTPRoute {
		r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r", ResourceVersion: rv, Generation: gen}}
		if status {
			r.Status.Parents = []gwv1.RouteParentStatus{{ControllerName: "x"}}
		}
		return r
	}
	h := f.handlers[resource.KindHTTPRoute]
	// A status-only update is not a change for translation, but the next
	// snapshot must hold the new version.
	h.OnUpdate(route("1", 1, false), route("2", 1, true))
	// A resync is not a change.
	h.OnUpdate(route("2", 1, true), route("2", 1, true))
	if p.changes != nil && p.changes.Len() != 0 {
		t.Fatalf("changes after status-only update and resync: %v", p.changes.Objects)
	}
	if _, ok := p.refresh[resource.Ref{Kind: resource.KindHTTPRoute, Key: resource.Key{Namespace: "ns", Name: "r"}}]; !ok || len(p.refresh) != 1 {
		t.Errorf("refresh after a status-only update: %v", p.refresh)
	}
	if f.observed.Load() != 1 || f.notified.Load() != 0 {
		t.Errorf("status-only update: observed %d, notified %d", f.observed.Load(), f.notified.Load())
	}
	h.OnUpdate(route("2", 1, true), route("3", 2, true))

	// An EndpointSlice of a Service no snapshot references is recorded too,
	// without waking the pipeline.
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s-1", ResourceVersion: "5",
		Labels: map[string]string{discoveryv1.LabelServiceName: "s"}}}
	n := f.notified.Load()
	f.handlers[resource.KindEndpointSlice].OnAdd(slice, false)
	if f.notified.Load() != n {
		t.Error("an unreferenced EndpointSlice woke the pipeline")
	}

	// A Namespace update that keeps the labels does not matter.
	ns := func(rv string, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", ResourceVersion: rv, Labels: labels}}
	}
	hn := f.handlers[resource.KindNamespace]
	hn.OnUpdate(ns("1", map[string]string{"a": "1"}), ns("2", map[string]string{"a": "1"}))
	hn.OnUpdate(ns("2", map[string]string{"a": "1"}), ns("3", map[string]string{"a": "2"}))
	f.handlers[resource.KindSecret].OnDelete(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tls"}})

	// A Deployment matters only when it gains or loses its last available
	// replica: a rollout's other status writes (and a new generation) do
	// not re-translate its Gateway.
	dep := func(rv string, gen int64, available int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "proxy", ResourceVersion: rv, Generation: gen},
			Status: appsv1.DeploymentStatus{AvailableReplicas: available, Replicas: 3}}
	}
	hd := f.handlers[resource.KindDeployment]
	hd.OnUpdate(dep("1", 1, 1), dep("2", 2, 2))
	hd.OnUpdate(dep("2", 2, 2), dep("3", 2, 3))
	if p.changes.Has(resource.KindDeployment, resource.Key{Namespace: "ns", Name: "proxy"}) {
		t.Error("a Deployment's rollout without a change of availability is a change")
	}
	hd.OnUpdate(dep("3", 2, 3), dep("4", 2, 0))

	want := []resource.Ref{
		{Kind: resource.KindHTTPRoute, Key: resource.Key{Namespace: "ns", Name: "r"}},
		{Kind: resource.KindEndpointSlice, Key: resource.Key{Namespace: "ns", Name: "s-1"}},
		{Kind: resource.KindNamespace, Key: resource.Key{Name: "team"}},
		{Kind: resource.KindSecret, Key: resource.Key{Namespace: "ns", Name: "tls"}},
		{Kind: resource.KindDeployment, Key: resource.Key{Namespace: "ns", Name: "proxy"}},
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
	p.stores[resource.KindHTTPRoute] = failingStore{}
	if _, err := p.Snapshot(context.Background()); err == nil {
		t.Fatal("snapshot of a failing store")
	}
	if p.changes.Len() != len(want) || len(p.refresh) != 3 {
		t.Errorf("changes after a failed snapshot: %v, refresh %v", p.changes.Objects, p.refresh)
	}
}

func TestSnapshotsCarryChanges(t *testing.T) {
	f := newFakeCluster(t)
	p := f.p
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw", ResourceVersion: "1"}}
	f.apply(t, gw)
	first, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if first.Changes != nil {
		t.Errorf("first snapshot has changes relative to nothing: %v", first.Changes)
	}
	if first.Gateways.Value(resource.Key{Namespace: "ns", Name: "gw"}) != gw {
		t.Error("first snapshot does not share the cache's Gateway")
	}
	second, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c := second.Changes; c == nil || c.Since != first.ID() || c.Len() != 0 {
		t.Errorf("second snapshot changes = %+v, want none since %d", c, first.ID())
	}
	f.remove(t, resource.KindGateway, resource.Key{Namespace: "ns", Name: "gw"})
	third, err := p.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c := third.Changes; c == nil || c.Since != second.ID() || !c.Has(resource.KindGateway, resource.Key{Namespace: "ns", Name: "gw"}) || c.Len() != 1 {
		t.Errorf("third snapshot changes = %+v", c)
	}
	if third.Gateways.Len() != 0 || second.Gateways.Len() != 1 {
		t.Errorf("Gateways: second %d, third %d", second.Gateways.Len(), third.Gateways.Len())
	}
}

func TestSnapshotWaitsForSync(t *testing.T) {
	p := &Provider{syncedC: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Snapshot(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("snapshot before sync: %v", err)
	}
}
