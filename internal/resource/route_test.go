package resource

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/refs"
)

func svc(ns, name string) refs.Backend {
	return refs.Backend{Object: refs.Object{Group: refs.GroupCore, Kind: refs.KindService, Namespace: ns, Name: name}}
}

func TestBackendsOfHTTPRoute(t *testing.T) {
	mirror := func(name string) gwv1.HTTPRouteFilter {
		return gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestMirror,
			RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name)}}}
	}
	r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "r"}}
	r.Spec.Rules = []gwv1.HTTPRouteRule{
		{
			Filters: []gwv1.HTTPRouteFilter{
				{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gwv1.HTTPHeaderFilter{}},
				mirror("rule-mirror"),
				{Type: gwv1.HTTPRouteFilterRequestMirror}, // without its field: nothing
			},
			BackendRefs: []gwv1.HTTPBackendRef{
				{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "a", Port: ptr.To(gwv1.PortNumber(80))}},
					Filters: []gwv1.HTTPRouteFilter{mirror("backend-mirror")}},
				{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "b", Namespace: ptr.To(gwv1.Namespace("other"))}}},
			},
		},
		{BackendRefs: []gwv1.HTTPBackendRef{
			{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "a", Port: ptr.To(gwv1.PortNumber(80))}}},
			{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "x", Kind: ptr.To(gwv1.Kind("Other"))}}},
		}},
	}
	a := svc("apps", "a")
	a.Port, a.HasPort = 80, true
	want := []refs.Backend{
		svc("apps", "rule-mirror"),
		a, svc("apps", "backend-mirror"),
		svc("other", "b"),
		a, // duplicates kept
		{Object: refs.Object{Group: refs.GroupCore, Kind: "Other", Namespace: "apps", Name: "x"}},
	}
	if got := slices.Collect(KindOf(KindHTTPRoute).Route.Backends(r)); !slices.Equal(got, want) {
		t.Errorf("Backends =\n%+v\nwant\n%+v", got, want)
	}
	// Stopping early is honoured.
	n := 0
	for range KindOf(KindHTTPRoute).Route.Backends(r) {
		n++
		if n == 2 {
			break
		}
	}
	if n != 2 {
		t.Errorf("early stop: %d", n)
	}
}

func TestBackendsOfGRPCRoute(t *testing.T) {
	mirror := func(name string) gwv1.GRPCRouteFilter {
		return gwv1.GRPCRouteFilter{Type: gwv1.GRPCRouteFilterRequestMirror,
			RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name)}}}
	}
	r := &gwv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "g"}}
	r.Spec.Rules = []gwv1.GRPCRouteRule{{
		Filters: []gwv1.GRPCRouteFilter{mirror("m")},
		BackendRefs: []gwv1.GRPCBackendRef{
			{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "s"}}, Filters: []gwv1.GRPCRouteFilter{mirror("bm")}},
		},
	}}
	want := []refs.Backend{svc("apps", "m"), svc("apps", "s"), svc("apps", "bm")}
	if got := slices.Collect(KindOf(KindGRPCRoute).Route.Backends(r)); !slices.Equal(got, want) {
		t.Errorf("Backends = %+v, want %+v", got, want)
	}
}

func TestNoBackends(t *testing.T) {
	for _, k := range RouteKinds {
		d := KindOf(k)
		for _, obj := range []any{nil, d.New(), &gwv1.Gateway{}} {
			if n := len(slices.Collect(d.Route.Backends(obj))); n != 0 {
				t.Errorf("%s: Backends(%T) = %d", k, obj, n)
			}
		}
		// A typed nil of the kind holds none, and is no route.
		var typedNil any = reflectNil(d.New())
		if n := len(slices.Collect(d.Route.Backends(typedNil))); n != 0 {
			t.Errorf("%s: Backends(typed nil) = %d", k, n)
		}
		if _, ok := d.Route.View(typedNil); ok {
			t.Errorf("%s: View(typed nil) ok", k)
		}
	}
}
