package resource

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// fingerprint is what a snapshot holds: its maps (as copies) and its
// EndpointSlice index.
type fingerprint struct {
	routes  map[Key]*gwv1.HTTPRoute
	slices  map[Key]*discoveryv1.EndpointSlice
	ns      map[string]*corev1.Namespace
	classes map[string]*gwv1.GatewayClass
	index   map[Key][]*discoveryv1.EndpointSlice
}

func fingerprintOf(s *Snapshot) fingerprint {
	f := fingerprint{
		routes: maps.Collect(s.HTTPRoutes.All()), slices: maps.Collect(s.EndpointSlices.All()),
		ns: maps.Collect(s.Namespaces.All()), classes: maps.Collect(s.GatewayClasses.All()),
		index: map[Key][]*discoveryv1.EndpointSlice{},
	}
	s.slicesByService.Range(func(k Key, v []*discoveryv1.EndpointSlice) bool {
		f.index[k] = slices.Clone(v)
		return true
	})
	return f
}

func (f fingerprint) equal(g fingerprint) error {
	switch {
	case !maps.Equal(f.routes, g.routes):
		return fmt.Errorf("HTTPRoutes differ")
	case !maps.Equal(f.slices, g.slices):
		return fmt.Errorf("EndpointSlices differ")
	case !maps.Equal(f.ns, g.ns):
		return fmt.Errorf("Namespaces differ")
	case !maps.Equal(f.classes, g.classes):
		return fmt.Errorf("GatewayClasses differ")
	case !maps.EqualFunc(f.index, g.index, slices.Equal):
		return fmt.Errorf("EndpointSlice index differs:\n%v\nwant\n%v", f.index, g.index)
	}
	return nil
}

// TestEditorMatchesBuild applies random sets and deletes through Editors
// and checks every snapshot against one built from scratch with the same
// objects; earlier snapshots must stay as they were.
func TestEditorMatchesBuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	// The objects, as plain maps.
	model := struct {
		HTTPRoutes     map[Key]*gwv1.HTTPRoute
		EndpointSlices map[Key]*discoveryv1.EndpointSlice
		Namespaces     map[string]*corev1.Namespace
	}{map[Key]*gwv1.HTTPRoute{}, map[Key]*discoveryv1.EndpointSlice{}, map[string]*corev1.Namespace{}}
	cur := New().Build()
	type version struct {
		s *Snapshot
		f fingerprint
	}
	var versions []version
	slice := func(i int) *discoveryv1.EndpointSlice {
		es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns%d", i%3), Name: fmt.Sprintf("s%d", i)}}
		if svc := rng.IntN(6); svc > 0 { // 0: no Service label
			es.Labels = map[string]string{discoveryv1.LabelServiceName: fmt.Sprintf("svc%d", svc)}
		}
		return es
	}
	for step := range 300 {
		e := cur.Edit()
		for range rng.IntN(8) + 1 {
			i := rng.IntN(40)
			del := rng.IntN(4) == 0
			var err error
			switch rng.IntN(4) {
			case 0, 1:
				es := slice(i)
				k := Key{Namespace: es.Namespace, Name: es.Name}
				if del {
					err = e.Delete(KindEndpointSlice, k)
					delete(model.EndpointSlices, k)
				} else {
					err = e.Set(KindEndpointSlice, k, es)
					model.EndpointSlices[k] = es
				}
			case 2:
				r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint(i)}}
				k := Key{Namespace: "ns", Name: r.Name}
				if del {
					err = e.Set(KindHTTPRoute, k, nil)
					delete(model.HTTPRoutes, k)
				} else {
					err = e.Set(KindHTTPRoute, k, r)
					model.HTTPRoutes[k] = r
				}
			case 3:
				n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(i % 5)}}
				if del {
					err = e.Delete(KindNamespace, Key{Name: n.Name})
					delete(model.Namespaces, n.Name)
				} else {
					err = e.Set(KindNamespace, Key{Name: n.Name}, n)
					model.Namespaces[n.Name] = n
				}
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		next := e.Snapshot()
		if next.ID() == cur.ID() || next.Changes != nil {
			t.Fatalf("step %d: ID %d (base %d), Changes %v", step, next.ID(), cur.ID(), next.Changes)
		}
		want := New()
		want.HTTPRoutes, want.EndpointSlices, want.Namespaces = MapOf(model.HTTPRoutes), MapOf(model.EndpointSlices), MapOf(model.Namespaces)
		if err := fingerprintOf(next).equal(fingerprintOf(want.Build())); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		versions = append(versions, version{next, fingerprintOf(next)})
		cur = next
	}
	for i, v := range versions {
		if err := fingerprintOf(v.s).equal(v.f); err != nil {
			t.Fatalf("snapshot %d changed after later edits: %v", i, err)
		}
	}
}

// TestEditorSharesUnchangedKinds: kinds without changes keep the base's
// maps; a changed kind gets its own, sharing all but the changed path; the
// base never changes.
func TestEditorSharesUnchangedKinds(t *testing.T) {
	base := New()
	r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}}
	base.HTTPRoutes.Set(Key{Namespace: "ns", Name: "r"}, r)
	for i := range 1000 {
		base.Gateways.Set(Key{Namespace: "ns", Name: fmt.Sprint(i)}, &gwv1.Gateway{})
	}
	base.Build()
	e := base.Edit()
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw"}}
	if err := e.Set(KindGateway, Key{Namespace: "ns", Name: "gw"}, gw); err != nil {
		t.Fatal(err)
	}
	// Deleting what is not there copies nothing.
	if err := e.Delete(KindSecret, Key{Namespace: "ns", Name: "nope"}); err != nil {
		t.Fatal(err)
	}
	next := e.Snapshot()
	if base.Gateways.Len() != 1000 || next.Gateways.Len() != 1001 || base.Gateways.Has(Key{Namespace: "ns", Name: "gw"}) {
		t.Errorf("Gateways: base %d, next %d", base.Gateways.Len(), next.Gateways.Len())
	}
	if base.HTTPRoutes.e.m.root != next.HTTPRoutes.e.m.root || base.Secrets.e.m.root != next.Secrets.e.m.root {
		t.Error("unchanged kinds were copied")
	}
	if base.Gateways.e.m.root == next.Gateways.e.m.root {
		t.Error("changed kind shares the base's root")
	}
	// Of the root's 32 slots, one changed.
	shared := 0
	for i, s := range next.Gateways.e.m.root.slots {
		if s.node != nil && s.node == base.Gateways.e.m.root.slots[i].node {
			shared++
		}
	}
	if shared != len(next.Gateways.e.m.root.slots)-1 {
		t.Errorf("%d of %d root slots shared with the base", shared, len(next.Gateways.e.m.root.slots))
	}
	if next.HTTPRoutes.e.token != nil || next.Gateways.e.token != nil {
		t.Error("maps of the new snapshot not frozen")
	}
}

// TestEditOneObjectAllocs: an edit of one object of a kind with 10,000
// objects costs a few allocations (a path of the trie), not a map copy.
func TestEditOneObjectAllocs(t *testing.T) {
	base := New()
	for i := range 10000 {
		k := Key{Namespace: fmt.Sprintf("ns%d", i%10), Name: fmt.Sprintf("r%d", i)}
		base.HTTPRoutes.Set(k, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}})
	}
	base.Build()
	r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns7", Name: "r7"}}
	allocs := testing.AllocsPerRun(50, func() {
		e := base.Edit()
		if err := e.Set(KindHTTPRoute, Key{Namespace: "ns7", Name: "r7"}, r); err != nil {
			t.Fatal(err)
		}
		e.Snapshot()
	})
	// The Editor, its snapshot and slice map, the token, and per level
	// of the trie (about 3) a node, its slots and an entry slice.
	if allocs > 20 {
		t.Errorf("one-object edit of 10,000: %.0f allocations", allocs)
	}
	if base.HTTPRoutes.Value(Key{Namespace: "ns7", Name: "r7"}) == r {
		t.Error("base changed")
	}
}

func TestEditorRejectsInconsistentObjects(t *testing.T) {
	e := New().Build().Edit()
	r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}}
	if err := e.Set(KindHTTPRoute, Key{Namespace: "ns", Name: "other"}, r); err == nil {
		t.Error("object set under another key")
	}
	if err := e.Set(KindGateway, Key{Namespace: "ns", Name: "r"}, r); err == nil {
		t.Error("HTTPRoute set as a Gateway")
	}
	if err := e.Set(Kind(99), Key{Namespace: "ns", Name: "r"}, r); err == nil {
		t.Error("unknown kind")
	}
	if err := e.Set(KindHTTPRoute, Key{Namespace: "ns", Name: "r"}, "text"); err == nil {
		t.Error("not an object")
	}
}
