package resource

import (
	"k8s.io/apimachinery/pkg/runtime"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/refs"
)

// tlsRouteKind describes TLSRoutes.
var tlsRouteKind = routeKind(Descriptor{
	Kind:         KindTLSRoute,
	GVK:          gwv1.SchemeGroupVersion.WithKind("TLSRoute"),
	LoadVersions: []string{"v1"},
	NewList:      func() runtime.Object { return &gwv1.TLSRouteList{} },
},
	func(s *Snapshot) *Map[Key, *gwv1.TLSRoute] { return &s.TLSRoutes },
	func(r *gwv1.TLSRoute) RouteView {
		return RouteView{&r.ObjectMeta, &r.Spec.CommonRouteSpec, r.Spec.Hostnames, &r.Status.RouteStatus}
	},
	func(r *gwv1.TLSRoute, yield func(refs.Backend) bool) bool {
		for _, rule := range r.Spec.Rules {
			if !ruleBackends(r.Namespace, rule.BackendRefs, yield) {
				return false
			}
		}
		return true
	})
