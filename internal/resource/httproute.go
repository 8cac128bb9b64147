package resource

import (
	"k8s.io/apimachinery/pkg/runtime"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/refs"
)

// httpRouteKind describes HTTPRoutes (v1; the file loader reads v1beta1 too).
var httpRouteKind = routeKind(Descriptor{
	Kind:         KindHTTPRoute,
	GVK:          gwv1.SchemeGroupVersion.WithKind("HTTPRoute"),
	LoadVersions: []string{"v1", "v1beta1"},
	NewList:      func() runtime.Object { return &gwv1.HTTPRouteList{} },
},
	func(s *Snapshot) *Map[Key, *gwv1.HTTPRoute] { return &s.HTTPRoutes },
	func(r *gwv1.HTTPRoute) RouteView {
		return RouteView{&r.ObjectMeta, &r.Spec.CommonRouteSpec, r.Spec.Hostnames, &r.Status.RouteStatus}
	},
	func(r *gwv1.HTTPRoute, yield func(refs.Backend) bool) bool {
		for _, rule := range r.Spec.Rules {
			if !httpMirrors(r.Namespace, rule.Filters, yield) {
				return false
			}
			for _, b := range rule.BackendRefs {
				if !yield(refs.BackendOf(r.Namespace, b.BackendObjectReference)) || !httpMirrors(r.Namespace, b.Filters, yield) {
					return false
				}
			}
		}
		return true
	})

func httpMirrors(ns string, filters []gwv1.HTTPRouteFilter, yield func(refs.Backend) bool) bool {
	for _, f := range filters {
		if f.RequestMirror != nil && !yield(refs.BackendOf(ns, f.RequestMirror.BackendRef)) {
			return false
		}
	}
	return true
}
