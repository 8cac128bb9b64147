package install

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// TestWriteGuardTypeChecks type-checks the write guard's expressions
// against the schemas of every kind it matches, as kube-controller-manager
// does for a policy's status (envtest runs none): a warning is an
// expression that could fail at run time and, the policy failing closed,
// deny one of Portico's own writes.
func TestWriteGuardTypeChecks(t *testing.T) {
	cfg := apiServer(t)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	checker := &validating.TypeChecker{
		SchemaResolver: &resolver.ClientDiscoveryResolver{Discovery: dc},
		RestMapper:     restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
	}
	vap := typed(t, find(t, "ValidatingAdmissionPolicy", "portico-writes"), &admissionregistrationv1.ValidatingAdmissionPolicy{})
	for _, w := range checker.Check(vap) {
		t.Errorf("%s: %s", w.FieldRef, w.Warning)
	}
	// The checker found the kinds: an expression that cannot compile at
	// all is reported, whatever the kind.
	broken := vap.DeepCopy()
	broken.Spec.Validations[0].Expression = "object.metadata.nosuchfield == 1"
	if len(checker.Check(broken)) == 0 {
		t.Error("the type checker reports nothing for an expression on a field that does not exist")
	}
}
