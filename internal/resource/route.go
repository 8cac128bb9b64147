package resource

import (
	"iter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/refs"
)

// RouteDescriptor is what the kind-agnostic machinery reads of a route:
// the parts every kind of route shares (RouteView) and the backends it
// references. A kind of route is one file of this package that makes its
// Descriptor with routeKind (httproute.go, grpcroute.go, ...), its entry in
// the registry (kinds.go) and its map in Snapshot.
type RouteDescriptor struct {
	view     func(obj any) (RouteView, bool)
	backends func(obj any, yield func(refs.Backend) bool)
}

// RouteView is the part of a route every kind shares, pointing into the
// object (which must not be modified through it, except by the status
// writer on its own copy).
type RouteView struct {
	Meta *metav1.ObjectMeta
	Spec *gwv1.CommonRouteSpec
	// Hostnames are the route's spec.hostnames; nil for kinds without.
	Hostnames []gwv1.Hostname
	Status    *gwv1.RouteStatus
}

// View returns the shared part of obj, false when obj is not a non-nil
// object of the kind.
func (r *RouteDescriptor) View(obj any) (RouteView, bool) { return r.view(obj) }

// Backends yields the backend references obj holds, resolved against its
// namespace, in spec order, duplicates kept (for HTTP-like kinds, each
// rule's RequestMirror filters, then each backendRef followed by its own
// RequestMirror filters). An object of another kind, or nil, holds none.
func (r *RouteDescriptor) Backends(obj any) iter.Seq[refs.Backend] {
	return func(yield func(refs.Backend) bool) { r.backends(obj, yield) }
}

// routeKind makes the descriptor of a kind of route whose objects are T
// (a pointer to the route type O): view reads the shared part of one,
// backends yields its backends (stopping when yield returns false).
func routeKind[T interface {
	*O
	Object
}, O any](d Descriptor, field func(*Snapshot) *Map[Key, T], view func(T) RouteView, backends func(T, func(refs.Backend) bool) bool) *Descriptor {
	d.HasStatus = true
	d.New = func() Object { return T(new(O)) }
	d.store = keyed[T](field)
	d.Route = &RouteDescriptor{
		view: func(obj any) (RouteView, bool) {
			r, ok := obj.(T)
			if !ok || r == nil {
				return RouteView{}, false
			}
			return view(r), true
		},
		backends: func(obj any, yield func(refs.Backend) bool) {
			if r, ok := obj.(T); ok && r != nil {
				backends(r, yield)
			}
		},
	}
	return &d
}

// ruleBackends yields the backendRefs of a rule of a kind whose backends
// have no filters (the L4 kinds), resolved against ns.
func ruleBackends(ns string, backends []gwv1.BackendRef, yield func(refs.Backend) bool) bool {
	for _, b := range backends {
		if !yield(refs.BackendOf(ns, b.BackendObjectReference)) {
			return false
		}
	}
	return true
}

// RouteOf returns the kind and shared part of obj, a route of any kind;
// false for an object of another kind or nil.
func RouteOf(obj any) (Kind, RouteView, bool) {
	for _, k := range RouteKinds {
		if v, ok := descriptors[k].Route.View(obj); ok {
			return k, v, true
		}
	}
	return 0, RouteView{}, false
}
