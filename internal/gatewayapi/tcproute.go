package gatewayapi

import (
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"

	"github.com/portico-dev/portico/internal/resource"
)

// compileTCPRoute compiles a TCPRoute: its one rule forwards each
// connection of a TCP listener to the weighted backends (l4.go).
//
// A TCPRoute may also attach to a TLS listener of mode Terminate (the
// TLSRoute API: "could choose to use a TCPRoute with a TLS listener"):
// it gets the decrypted stream of the connections of that listener's
// hostname, as a TLSRoute without hostnames would, and a TLSRoute naming
// the SNI hostname is more specific and wins (build_l4.go). A TLS listener
// of mode Passthrough does not support TCPRoutes (there is no stream to
// forward but the encrypted one, which is what TLSRoutes are for).
func (t *translator) compileTCPRoute(rs *routeState, rules []gwv1.TCPRouteRule) {
	backends := make([][]gwv1.BackendRef, len(rules))
	for i := range rules {
		backends[i] = rules[i].BackendRefs
	}
	t.compileL4(rs, backends)
}

// tcpRouteKind registers TCPRoutes (kinds.go).
var tcpRouteKind = routeKind{
	kind:      resource.KindTCPRoute,
	protocols: []gwv1.ProtocolType{gwv1.TCPProtocolType, gwv1.TLSProtocolType},
	upstream:  backendTCP,
	features:  []features.FeatureName{features.SupportTCPRoute},
	compile:   func(t *translator, rs *routeState, obj any) { t.compileTCPRoute(rs, obj.(*gwv1.TCPRoute).Spec.Rules) },
}
