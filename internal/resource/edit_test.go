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
		routes: maps.Clone(s.HTTPRoutes), slices: maps.Clone(s.EndpointSlices),
		ns: maps.Clone(s.Namespaces), classes: maps.Clone(s.GatewayClasses),
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
	model := New() // the objects, as plain maps
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
		want.HTTPRoutes, want.EndpointSlices, want.Namespaces = maps.Clone(model.HTTPRoutes), maps.Clone(model.EndpointSlices), maps.Clone(model.Namespaces)
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
// maps; a changed kind gets its own; the base never changes.
func TestEditorSharesUnchangedKinds(t *testing.T) {
	base := New()
	r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}}
	base.HTTPRoutes[Key{Namespace: "ns", Name: "r"}] = r
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
	if len(base.Gateways) != 0 || len(next.Gateways) != 1 {
		t.Errorf("Gateways: base %d, next %d", len(base.Gateways), len(next.Gateways))
	}
	same := func(a, b any) bool { return fmt.Sprintf("%p", a) == fmt.Sprintf("%p", b) }
	if !same(base.HTTPRoutes, next.HTTPRoutes) || !same(base.Secrets, next.Secrets) {
		t.Error("unchanged kinds were copied")
	}
	if same(base.Gateways, next.Gateways) {
		t.Error("changed kind shares the base's map")
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
