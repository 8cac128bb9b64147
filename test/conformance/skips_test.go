package conformance

import "sigs.k8s.io/gateway-api/pkg/features"

// requiredFeatures must be among the features Portico claims (issue 5).
var requiredFeatures = []features.FeatureName{
	features.SupportGateway,
	features.SupportHTTPRoute,
	features.SupportReferenceGrant,
	features.SupportListenerSet,
	features.SupportGatewayPort8080,
	features.SupportHTTPRouteParentRefPort,
	features.SupportHTTPRouteDestinationPortMatching,
}

// dataPlaneSkipReason is why dataPlaneTests are skipped on the kwok
// cluster, where the Envoy proxies are fake pods.
const dataPlaneSkipReason = "needs a data plane: sends HTTP/gRPC traffic to the Gateway address"

// dataPlaneTests are the only tests skipped on the kwok cluster: every test
// of conformance v1.6.3 that the claimed features enable and that sends
// traffic (dataPlaneSkipReason). TestSkipListMatchesSuiteSource checks
// this list against the suite's source. With PORTICO_CONFORMANCE_FULL=1
// (a real cluster) nothing is skipped.
var dataPlaneTests = []string{
	// GRPCRoute
	"GRPCExactMethodMatching",
	"GRPCRouteHeaderMatching",
	"GRPCRouteListenerHostnameMatching",
	"GRPCRouteWeight",
	// HTTPRoute
	"HTTPRouteCrossNamespace",
	"HTTPRouteExactPathMatching",
	"HTTPRouteHeaderMatching",
	"HTTPRouteHostnameIntersection",
	"HTTPRouteHTTPSListener",
	"HTTPRouteInvalidBackendRefUnknownKind",
	"HTTPRouteInvalidCrossNamespaceBackendRef",
	"HTTPRouteInvalidNonExistentBackendRef",
	"HTTPRouteInvalidReferenceGrant",
	"HTTPRouteListenerHostnameMatching",
	"HTTPRouteListenerPortMatching",
	"HTTPRouteMatchingAcrossRoutes",
	"HTTPRouteMatching",
	"HTTPRouteMethodMatching",
	"HTTPRouteMultipleGateways",
	"HTTPRouteNoBackendRefs",
	"HTTPRoutePartiallyInvalidViaInvalidReferenceGrant",
	"HTTPRoutePathMatchOrder",
	"HTTPRouteQueryParamMatching",
	"HTTPRouteRedirectHostAndStatus",
	"HTTPRouteRedirectPath",
	"HTTPRouteRedirectPortAndScheme",
	"HTTPRouteRedirectPort",
	"HTTPRouteRedirectScheme",
	"HTTPRouteReferenceGrant",
	"HTTPRouteRequestHeaderModifier",
	"HTTPRouteRequestMirror",
	"HTTPRouteRequestMultipleMirrors",
	"HTTPRouteRequestPercentageMirror",
	"HTTPRouteResponseHeaderModifier",
	"HTTPRouteRewriteHost",
	"HTTPRouteRewritePath",
	"HTTPRouteServiceTypes",
	"HTTPRouteSimpleSameNamespace",
	"HTTPRouteTimeoutBackendRequest",
	"HTTPRouteTimeoutRequest",
	"HTTPRouteWeight",
	// ListenerSet
	"ListenerSetAllowedRoutesNamespaces",
	"ListenerSetDualParentRefIndependence",
	"ListenerSetGatewayParentSectionNameNotFound",
	"ListenerSetHTTPRouting",
}

// knownFailure is a claimed status-only test that fails because of a bug
// in Portico, skipped until the issue is fixed.
type knownFailure struct {
	test  string
	issue string // what is wrong, and where the fix is tracked
}

// knownFailures (issue to fix): each one is a bug in Portico's status, not
// a limit of the kwok cluster; remove the entry with the fix. Not skipped
// with PORTICO_CONFORMANCE_FULL=1.
var knownFailures = []knownFailure{}
