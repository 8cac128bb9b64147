package resource

import (
	"reflect"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
)

// reflectNil returns a nil pointer of obj's type.
func reflectNil(obj any) any { return reflect.Zero(reflect.TypeOf(obj)).Interface() }

// Every kind's descriptor is complete and registered under its own Kind,
// and its objects go through the snapshot, the Editor and Diff alike.
func TestEveryKindThroughTheSnapshot(t *testing.T) {
	seen := map[string]bool{}
	for d := range Kinds() {
		if KindOf(d.Kind) != d {
			t.Errorf("%s registered under another kind", d)
		}
		if d.GVK.Kind == "" || d.GVK.Version == "" || seen[d.GVK.Kind] {
			t.Errorf("%d: GVK %v empty or repeated", d.Kind, d.GVK)
		}
		seen[d.GVK.Kind] = true
		if d.Kind.String() != d.GVK.Kind {
			t.Errorf("%d: String %q, GVK kind %q", d.Kind, d.Kind.String(), d.GVK.Kind)
		}
		if k, ok := KindNamed(d.GVK.Group, d.GVK.Kind); !ok || k != d.Kind {
			t.Errorf("KindNamed(%q, %q) = %v, %v", d.GVK.Group, d.GVK.Kind, k, ok)
		}
		if _, err := meta.ListAccessor(d.NewList()); err != nil {
			t.Errorf("%s: NewList is no list: %v", d, err)
		}
		if d.Kind.IsRoute() != (d.Route != nil) || slices.Contains(RouteKinds, d.Kind) != (d.Route != nil) {
			t.Errorf("%s: IsRoute %v, in RouteKinds %v, Route %v", d, d.Kind.IsRoute(), slices.Contains(RouteKinds, d.Kind), d.Route != nil)
		}

		key := Key{Namespace: "ns", Name: "a"}
		if d.ClusterScoped {
			key.Namespace = ""
		}
		obj := d.New()
		obj.SetNamespace(key.Namespace)
		obj.SetName(key.Name)

		base := New()
		if err := base.Put(d.Kind, key, obj); err != nil {
			t.Fatalf("%s: Put: %v", d, err)
		}
		if err := base.Put(d.Kind, key, &struct{ Object }{}); err == nil {
			t.Errorf("%s: Put of another type succeeded", d)
		}
		base.Build()
		if got, ok := base.Get(d.Kind, key); !ok || got != obj {
			t.Errorf("%s: Get = %v, %v", d, got, ok)
		}
		if _, ok := base.Get(d.Kind, Key{Namespace: key.Namespace, Name: "missing"}); ok {
			t.Errorf("%s: Get of a missing key succeeded", d)
		}
		if keys := base.Keys(d.Kind); !slices.Equal(keys, []Key{key}) || base.Len() != 1 {
			t.Errorf("%s: Keys %v, Len %d", d, keys, base.Len())
		}
		n := 0
		for k, o := range base.Objects(d.Kind) {
			n++
			if k != key || o != obj {
				t.Errorf("%s: Objects yields %v %v", d, k, o)
			}
		}
		if n != 1 {
			t.Errorf("%s: Objects yields %d", d, n)
		}
		if d.Route != nil {
			if ns, _, ok := base.RouteParentRefs(Ref{d.Kind, key}); !ok || ns != key.Namespace {
				t.Errorf("%s: RouteParentRefs %q %v", d, ns, ok)
			}
			if k, _, ok := RouteOf(obj); !ok || k != d.Kind {
				t.Errorf("%s: RouteOf = %v %v", d, k, ok)
			}
		}

		// The Editor: a second object, then the first deleted.
		e := base.Edit()
		other := d.New()
		other.SetNamespace(key.Namespace)
		other.SetName("b")
		okey := Key{Namespace: key.Namespace, Name: "b"}
		if err := e.Set(d.Kind, okey, other); err != nil {
			t.Fatalf("%s: Set: %v", d, err)
		}
		if err := e.Delete(d.Kind, key); err != nil {
			t.Fatalf("%s: Delete: %v", d, err)
		}
		next := e.Snapshot()
		if !slices.Equal(next.Keys(d.Kind), []Key{okey}) || !slices.Equal(base.Keys(d.Kind), []Key{key}) {
			t.Errorf("%s: after the edit %v, base %v", d, next.Keys(d.Kind), base.Keys(d.Kind))
		}
		c := Diff(base, next)
		if c.Len() != 2 || !c.Has(d.Kind, key) || !c.Has(d.Kind, okey) {
			t.Errorf("%s: Diff = %v", d, c.Objects)
		}
	}
	if got := len(seen); got != len(descriptors)-1 {
		t.Errorf("%d kinds, %d slots", got, len(descriptors)-1)
	}
}
