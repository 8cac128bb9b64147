package testenv

import (
	"strings"
	"testing"

	"github.com/portico-dev/portico/api/v1alpha1"
)

// The Envoy Portico provisions by default is the Envoy its tests run (the
// version hack/envoy.sh installs): the version of the API it generates.
func TestDefaultEnvoyImageIsTheTestedVersion(t *testing.T) {
	if want := "distroless-v" + EnvoyVersion; !strings.HasSuffix(v1alpha1.DefaultEnvoyImage, ":"+want) {
		t.Errorf("default Envoy image %s, want tag %s (testenv.EnvoyVersion, hack/envoy.sh)", v1alpha1.DefaultEnvoyImage, want)
	}
}
