package gatewayapi

import (
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"

	"github.com/portico-dev/portico/internal/resource"
)

// compileUDPRoute compiles a UDPRoute: its one rule forwards the datagrams
// of a UDP listener, session by session, to the weighted backends, which
// are UDP ports of Services (l4.go).
func (t *translator) compileUDPRoute(rs *routeState, rules []gwv1.UDPRouteRule) {
	backends := make([][]gwv1.BackendRef, len(rules))
	for i := range rules {
		backends[i] = rules[i].BackendRefs
	}
	t.compileL4(rs, backends)
}

// udpRouteKind registers UDPRoutes (kinds.go).
var udpRouteKind = routeKind{
	kind:      resource.KindUDPRoute,
	protocols: []gwv1.ProtocolType{gwv1.UDPProtocolType},
	upstream:  backendUDP,
	features:  []features.FeatureName{features.SupportUDPRoute},
	compile:   func(t *translator, rs *routeState, obj any) { t.compileUDPRoute(rs, obj.(*gwv1.UDPRoute).Spec.Rules) },
}
