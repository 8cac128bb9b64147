package infra

import (
	"strconv"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/portico-dev/portico/internal/re2"
)

// envoyRuntime is the runtime of every bootstrap Portico writes: Envoy's
// limits that Portico's own checks rely on. re2.max_program_size.error_level
// is raised from Envoy's default (100) to re2.MaxProgramSize, the bound the
// Gateway API stage enforces per route, so that no regular expression it
// accepts makes Envoy refuse a route table.
func envoyRuntime() *bootstrapv3.LayeredRuntime {
	layer, err := structpb.NewStruct(map[string]any{
		"re2.max_program_size.error_level": float64(re2.MaxProgramSize),
		"re2.max_program_size.warn_level":  float64(re2.MaxProgramSize / 2),
	})
	if err != nil {
		panic("infra: runtime layer: " + err.Error()) // constant input
	}
	return &bootstrapv3.LayeredRuntime{Layers: []*bootstrapv3.RuntimeLayer{
		{Name: "portico-limits", LayerSpecifier: &bootstrapv3.RuntimeLayer_StaticLayer{StaticLayer: layer}},
	}}
}

// RE2ErrorLevel is the re2.max_program_size.error_level of Portico's
// bootstraps, as Envoy's runtime shows it (for tests).
var RE2ErrorLevel = strconv.Itoa(re2.MaxProgramSize)
