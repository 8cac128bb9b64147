package gatewayapi

import (
	"sort"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"
)

// supportedFeatures are the Gateway API conformance features Portico
// implements, reported in GatewayClass status.supportedFeatures. Each is
// claimed only once the v1.7.0 suite's status and traffic tests of the
// feature pass through a real Envoy (make conformance).
//
// Not claimed:
//   - HTTPRouteBackendRequestHeaderModification, HTTPRouteBackendURLRewrite:
//     filters on backendRefs are refused (ResolvedRefs=False, that
//     backend's share answered with 500).
//   - HTTPRouteCORS: the CORS filter is refused like other unknown filters.
//   - BackendTLSPolicy and the frontend client-certificate features: not
//     implemented yet.
var supportedFeatures = sortedFeatures(
	features.SupportGateway,
	features.SupportGatewayHTTPListenerIsolation,
	features.SupportGatewayInfrastructure,
	features.SupportGatewayPort8080,
	features.SupportGatewayRouteHostnameIntersectionPrecedence,
	features.SupportGRPCRoute,
	features.SupportGRPCRouteNamedRouteRule,
	features.SupportGRPCRouteRequestHeaderModifier,
	features.SupportHTTPRoute,
	features.SupportHTTPRoute303RedirectStatusCode,
	features.SupportHTTPRoute307RedirectStatusCode,
	features.SupportHTTPRoute308RedirectStatusCode,
	features.SupportHTTPRouteBackendProtocolH2C,
	features.SupportHTTPRouteBackendProtocolWebSocket,
	features.SupportHTTPRouteBackendTimeout,
	features.SupportHTTPRouteDestinationPortMatching,
	features.SupportHTTPRouteHostRewrite,
	features.SupportHTTPRouteMethodMatching,
	features.SupportHTTPRouteNamedRouteRule,
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
	features.SupportHTTPRouteRetryCodes,
	features.SupportHTTPRouteRetryConnectionError,
	features.SupportHTTPRouteSchemeRedirect,
	features.SupportListenerSet,
	features.SupportReferenceGrant,
	features.SupportTCPRoute,
	features.SupportTLSRoute,
	features.SupportTLSRouteModeMixed,
	features.SupportTLSRouteModeTerminate,
	features.SupportUDPRoute,
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
