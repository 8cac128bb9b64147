package resource

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestDiff(t *testing.T) {
	route := func(name, rv string) *gwv1.HTTPRoute {
		return &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("u-" + name), ResourceVersion: rv}}
	}
	old := New()
	same := route("same", "")
	old.HTTPRoutes.Set(Key{Namespace: "ns", Name: "same"}, same)
	old.HTTPRoutes.Set(Key{Namespace: "ns", Name: "copied"}, route("copied", "7"))
	old.HTTPRoutes.Set(Key{Namespace: "ns", Name: "edited"}, route("edited", "7"))
	old.HTTPRoutes.Set(Key{Namespace: "ns", Name: "unversioned"}, route("unversioned", ""))
	old.HTTPRoutes.Set(Key{Namespace: "ns", Name: "gone"}, route("gone", "1"))
	old.Namespaces.Set("team", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}})
	old.Build()

	cur := New()
	cur.HTTPRoutes.Set(Key{Namespace: "ns", Name: "same"}, same)
	cur.HTTPRoutes.Set(Key{Namespace: "ns", Name: "copied"}, route("copied", "7")) // another copy, same version
	cur.HTTPRoutes.Set(Key{Namespace: "ns", Name: "edited"}, route("edited", "8"))
	cur.HTTPRoutes.Set(Key{Namespace: "ns", Name: "unversioned"}, route("unversioned", ""))
	cur.HTTPRoutes.Set(Key{Namespace: "ns", Name: "new"}, route("new", "1"))
	cur.Build()

	c := Diff(old, cur)
	if c.Since != old.ID() || old.ID() == 0 || old.ID() == cur.ID() {
		t.Errorf("Since %d, IDs %d %d", c.Since, old.ID(), cur.ID())
	}
	want := []Ref{
		{KindHTTPRoute, Key{Namespace: "ns", Name: "edited"}}, {KindHTTPRoute, Key{Namespace: "ns", Name: "unversioned"}},
		{KindHTTPRoute, Key{Namespace: "ns", Name: "gone"}}, {KindHTTPRoute, Key{Namespace: "ns", Name: "new"}}, {KindNamespace, Key{Name: "team"}},
	}
	for _, r := range want {
		if !c.Has(r.Kind, r.Key) {
			t.Errorf("%v %v not listed", r.Kind, r.Key)
		}
	}
	if c.Len() != len(want) {
		t.Errorf("changes %v, want %v", c.Objects, want)
	}
	if c.Only(KindHTTPRoute) {
		t.Error("Only(HTTPRoute) with a Namespace change")
	}
	e := NewChanges(1)
	e.Add(KindEndpointSlice, Key{Namespace: "ns", Name: "s"})
	if !e.Only(KindEndpointSlice) || KindEndpointSlice.String() != "EndpointSlice" {
		t.Error("Only / String")
	}
	e.Merge(c)
	if e.Len() != len(want)+1 {
		t.Errorf("merged %d", e.Len())
	}
}
