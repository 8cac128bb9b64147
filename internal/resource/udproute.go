package resource

import (
	"k8s.io/apimachinery/pkg/runtime"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/refs"
)

// udpRouteKind describes UDPRoutes.
var udpRouteKind = routeKind(Descriptor{
	Kind:         KindUDPRoute,
	GVK:          gwv1.SchemeGroupVersion.WithKind("UDPRoute"),
	LoadVersions: []string{"v1"},
	NewList:      func() runtime.Object { return &gwv1.UDPRouteList{} },
},
	func(s *Snapshot) *Map[Key, *gwv1.UDPRoute] { return &s.UDPRoutes },
	func(r *gwv1.UDPRoute) RouteView {
		return RouteView{&r.ObjectMeta, &r.Spec.CommonRouteSpec, nil, &r.Status.RouteStatus}
	},
	func(r *gwv1.UDPRoute, yield func(refs.Backend) bool) bool {
		for _, rule := range r.Spec.Rules {
			if !ruleBackends(r.Namespace, rule.BackendRefs, yield) {
				return false
			}
		}
		return true
	})
