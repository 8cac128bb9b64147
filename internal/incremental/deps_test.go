package incremental

import (
	"testing"

	"github.com/portico-dev/portico/internal/resource"
)

// TestForgottenRecordIsCaught shows that the differential test notices an
// accessor that forgets to record: for each kind of object the semantics
// read by reference, the records of that kind are dropped (skipRecord, as
// if package inputs' accessor of that kind did not record) and the
// randomized edits must then make the incremental translation differ from
// the full one. A kind whose forgotten record goes unnoticed means gen's
// edits miss a reference of that kind.
func TestForgottenRecordIsCaught(t *testing.T) {
	opts := incOpts
	opts.Infrastructure = true // the provisioned Deployments and Services are read
	for _, kind := range []resource.Kind{
		resource.KindService, resource.KindSecret, resource.KindReferenceGrant,
		resource.KindNamespace, resource.KindProxyConfig, resource.KindDeployment,
		resource.KindConfigMap, resource.KindClusterTrustBundle, resource.KindBackendTLSPolicy,
	} {
		t.Run(kind.String(), func(t *testing.T) {
			skipRecord = func(k resource.Kind) bool { return k == kind }
			defer func() { skipRecord = nil }()
			_, _, modes, err := differential(opts, diffSeed(), 400, nil)
			if err == nil {
				t.Fatalf("records of %s dropped, yet every incremental translation matched the full one (modes %v)", kind, modes)
			}
			t.Logf("caught: %v", firstLine(err.Error()))
		})
	}
}

// TestIncrementalMatchesFullWithInfrastructure is TestIncrementalMatchesFull
// with provisioned proxies: Gateway status reads their Deployments and
// Services.
func TestIncrementalMatchesFullWithInfrastructure(t *testing.T) {
	opts := incOpts
	opts.Infrastructure = true
	incrementalSteps(t, opts)
}

func firstLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
