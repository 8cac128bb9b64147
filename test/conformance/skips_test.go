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

// unrunnable is a claimed traffic test skipped on the kwok cluster
// because the local data plane cannot run what it needs, and why.
type unrunnable struct {
	test   string
	reason string
}

// unrunnableTests are the only tests skipped on the kwok cluster for the
// data plane: every other test of conformance v1.7.0 that the claimed
// features enable runs, status and traffic alike. Each entry is a claimed
// test that sends traffic (TestSkipListMatchesSuiteSource checks this
// against the suite's source, so a status-only test can never be listed)
// with the reason its backends cannot run locally. With
// PORTICO_CONFORMANCE_FULL=1 (a real cluster) nothing is skipped.
var unrunnableTests = []unrunnable{}

// knownFailure is a claimed test that fails because of a bug in Portico,
// skipped until the issue is fixed.
type knownFailure struct {
	test  string
	issue string // what is wrong, and where the fix is tracked
}

// knownFailures (issue to fix): each one is a bug in Portico, not a limit
// of the kwok cluster or its data plane; remove the entry with the fix.
// Not skipped with PORTICO_CONFORMANCE_FULL=1.
var knownFailures = []knownFailure{}
