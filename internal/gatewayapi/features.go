package gatewayapi

import (
	"sort"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"

	"github.com/portico-dev/portico/internal/resource"
)

// supportedFeatures are the Gateway API conformance features Portico
// implements, reported in GatewayClass status.supportedFeatures. Each is
// claimed only once the v1.7.0 suite's status and traffic tests of the
// feature pass through a real Envoy (make conformance).
//
// GatewayAddressRoutability and GatewayAddressRoutabilityCluster
// (experimental, GEP-5093) have no test in the v1.7.0 suite; they are
// claimed on Portico's own tests of the GEP's scenarios (addresses_test.go
// for the status and conditions, internal/infra's
// TestReconcilerServiceAddresses for the Service against a real API
// server). The routability field exists only in the experimental CRDs:
// with the standard ones every request is of the default routability.
//
// Every Gateway-side feature of v1.7.0 is claimed (54, core included);
// only the mesh features are not.
//
// The features of a kind of route are its entry's (kinds.go); those of
// gatewayFeatures are the Gateway's and the other kinds'. supportedFeatures
// is set once the kinds are registered (init, kinds.go).
var supportedFeatures []gwv1.FeatureName

var gatewayFeatures = []features.FeatureName{
	features.SupportBackendTLSPolicy,
	features.SupportBackendTLSPolicySANValidation,
	// No upstream test in v1.7.0: claimed on Portico's own through Envoy
	// (test/envoy TestBackendTLSPolicy and TestGatewayFrontendValidation
	// trust CAs of ClusterTrustBundles; trust.go).
	features.SupportClusterTrustBundle,
	features.SupportGateway,
	features.SupportGatewayAddressEmpty,
	features.SupportGatewayAddressRoutability,
	features.SupportGatewayAddressRoutabilityCluster,
	features.SupportGatewayBackendClientCertificate,
	features.SupportGatewayFrontendClientCertificateValidation,
	features.SupportGatewayFrontendClientCertificateValidationInsecureFallback,
	features.SupportGatewayHTTPListenerIsolation,
	features.SupportGatewayHTTPSListenerDetectMisdirectedRequests,
	features.SupportGatewayInfrastructure,
	// No upstream test in v1.7.0: claimed on Portico's own through Envoy
	// (test/envoy TestListenerFilterExtAuth; listener_filters.go).
	features.SupportGatewayListenerFilters,
	features.SupportGatewayPort8080,
	features.SupportGatewayRouteHostnameIntersectionPrecedence,
	features.SupportGatewayStaticAddresses,
	features.SupportListenerSet,
	features.SupportReferenceGrant,
}

// routeKindFeatures are the features of the kinds of route.
func routeKindFeatures() []features.FeatureName {
	var out []features.FeatureName
	for _, k := range resource.RouteKinds {
		out = append(out, routeKinds[k].features...)
	}
	return out
}

func sortedFeatures(kinds []features.FeatureName, names ...features.FeatureName) []gwv1.FeatureName {
	out := make([]gwv1.FeatureName, 0, len(kinds)+len(names))
	for _, n := range append(kinds, names...) {
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
