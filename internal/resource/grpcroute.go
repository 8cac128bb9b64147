package resource

import (
	"k8s.io/apimachinery/pkg/runtime"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/refs"
)

// grpcRouteKind describes GRPCRoutes.
var grpcRouteKind = routeKind(Descriptor{
	Kind:         KindGRPCRoute,
	GVK:          gwv1.SchemeGroupVersion.WithKind("GRPCRoute"),
	LoadVersions: []string{"v1"},
	NewList:      func() runtime.Object { return &gwv1.GRPCRouteList{} },
},
	func(s *Snapshot) *Map[Key, *gwv1.GRPCRoute] { return &s.GRPCRoutes },
	func(r *gwv1.GRPCRoute) RouteView {
		return RouteView{&r.ObjectMeta, &r.Spec.CommonRouteSpec, r.Spec.Hostnames, &r.Status.RouteStatus}
	},
	func(r *gwv1.GRPCRoute, yield func(refs.Backend) bool) bool {
		for _, rule := range r.Spec.Rules {
			if !grpcMirrors(r.Namespace, rule.Filters, yield) {
				return false
			}
			for _, b := range rule.BackendRefs {
				if !yield(refs.BackendOf(r.Namespace, b.BackendObjectReference)) || !grpcMirrors(r.Namespace, b.Filters, yield) {
					return false
				}
			}
		}
		return true
	})

func grpcMirrors(ns string, filters []gwv1.GRPCRouteFilter, yield func(refs.Backend) bool) bool {
	for _, f := range filters {
		if f.RequestMirror != nil && !yield(refs.BackendOf(ns, f.RequestMirror.BackendRef)) {
			return false
		}
	}
	return true
}
