package gatewayapi_test

import (
	"fmt"
	"testing"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/testenv/workload"
)

// BenchmarkTranslate measures Translate on generated inputs of 100, 1,000
// and 10,000 HTTPRoutes spread over 10 Gateways.
func BenchmarkTranslate(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		snap := workload.Snapshot(n)
		opts := gatewayapi.Options{ControllerName: workload.ControllerName}
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res := gatewayapi.Translate(snap, opts)
				if len(res.Gateways) != workload.Gateways {
					b.Fatalf("got %d gateways", len(res.Gateways))
				}
			}
		})
	}
}
