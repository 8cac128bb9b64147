package gatewayapi

import (
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"

	"github.com/portico-dev/portico/internal/resource"
)

// compileTLSRoute compiles a TLSRoute: its hostnames (SNI) are intersected
// with its listeners' at attachment, like an HTTPRoute's; its one rule
// forwards the connection (decrypted on a Terminate listener, as it is on a
// Passthrough one) to the weighted backends (l4.go).
func (t *translator) compileTLSRoute(rs *routeState, rules []gwv1.TLSRouteRule) {
	backends := make([][]gwv1.BackendRef, len(rules))
	for i := range rules {
		backends[i] = rules[i].BackendRefs
	}
	t.compileL4(rs, backends)
}

// tlsRouteKind registers TLSRoutes (kinds.go).
var tlsRouteKind = routeKind{
	kind:      resource.KindTLSRoute,
	protocols: []gwv1.ProtocolType{gwv1.TLSProtocolType},
	upstream:  backendTCP,
	features: []features.FeatureName{
		features.SupportTLSRoute,
		features.SupportTLSRouteModeMixed,
		features.SupportTLSRouteModeTerminate,
	},
	compile: func(t *translator, rs *routeState, obj any) { t.compileTLSRoute(rs, obj.(*gwv1.TLSRoute).Spec.Rules) },
}
