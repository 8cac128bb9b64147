package gatewayapi

import (
	"sort"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// supportedFeatures are the Gateway API conformance features Portico
// implements, reported in GatewayClass status.supportedFeatures.
//
// Deliberately not claimed although partly implemented:
//   - HTTPRoute303/307/308RedirectStatusCode: the codes are accepted and
//     passed to the IR, but have no conformance run yet.
//   - HTTPRouteBackendProtocolH2C: h2c appProtocol selects HTTP/2 upstream,
//     not yet conformance-tested.
//   - GatewayHTTPListenerIsolation: virtual hosts of a port shared by HTTP
//     listeners hold only the routes of the most specific listener covering
//     them (vhosts.go), but the conformance test has not been run yet.
var supportedFeatures = sortedFeatures(
	features.SupportGateway,
	features.SupportGatewayPort8080,
	features.SupportGRPCRoute,
	features.SupportHTTPRoute,
	features.SupportHTTPRouteBackendTimeout,
	features.SupportHTTPRouteDestinationPortMatching,
	features.SupportHTTPRouteHostRewrite,
	features.SupportHTTPRouteMethodMatching,
	features.SupportHTTPRouteParentRefPort,
	features.SupportHTTPRoutePathRedirect,
	features.SupportHTTPRoutePathRewrite,
	features.SupportHTTPRoutePortRedirect,
	features.SupportHTTPRouteQueryParamMatching,
	features.SupportHTTPRouteRequestMirror,
	features.SupportHTTPRouteRequestMultipleMirrors,
	features.SupportHTTPRouteRequestPercentageMirror,
	features.SupportHTTPRouteRequestTimeout,
	features.SupportHTTPRouteResponseHeaderModification,
	features.SupportHTTPRouteSchemeRedirect,
	features.SupportListenerSet,
	features.SupportReferenceGrant,
)

func sortedFeatures(names ...features.FeatureName) []gwv1.FeatureName {
	out := make([]gwv1.FeatureName, 0, len(names))
	for _, n := range names {
		out = append(out, gwv1.FeatureName(n))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// SupportedFeatures returns the features Portico implements, sorted by name
// as GatewayClass status requires.
func SupportedFeatures() []gwv1.SupportedFeature {
	out := make([]gwv1.SupportedFeature, 0, len(supportedFeatures))
	for _, f := range supportedFeatures {
		out = append(out, gwv1.SupportedFeature{Name: f})
	}
	return out
}
