package gatewayapi

import gwv1 "sigs.k8s.io/gateway-api/apis/v1"

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
