package resource

import (
	"k8s.io/apimachinery/pkg/runtime"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/refs"
)

// tcpRouteKind describes TCPRoutes.
var tcpRouteKind = routeKind(Descriptor{
	Kind:         KindTCPRoute,
	GVK:          gwv1.SchemeGroupVersion.WithKind("TCPRoute"),
	LoadVersions: []string{"v1"},
	NewList:      func() runtime.Object { return &gwv1.TCPRouteList{} },
},
	func(s *Snapshot) *Map[Key, *gwv1.TCPRoute] { return &s.TCPRoutes },
	func(r *gwv1.TCPRoute) RouteView {
		return RouteView{&r.ObjectMeta, &r.Spec.CommonRouteSpec, nil, &r.Status.RouteStatus}
	},
	func(r *gwv1.TCPRoute, yield func(refs.Backend) bool) bool {
		for _, rule := range r.Spec.Rules {
			if !ruleBackends(r.Namespace, rule.BackendRefs, yield) {
				return false
			}
		}
		return true
	})
