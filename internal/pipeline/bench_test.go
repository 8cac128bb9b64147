package pipeline

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/gatewayapi/gen"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// BenchmarkFullTranslation: Gateway API objects → statuses, IR and Envoy
// resources of every Gateway (validated and content-hashed), as one
// translation of the pipeline does.
func BenchmarkFullTranslation(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		snap := gen.Snapshot(n)
		opts := gatewayapi.Options{ControllerName: gen.ControllerName, Now: metav1.NewTime(time.Unix(0, 0))}
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res := gatewayapi.Translate(snap, opts)
				for _, gw := range res.Gateways {
					if _, err := translate.Translate(gw); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
