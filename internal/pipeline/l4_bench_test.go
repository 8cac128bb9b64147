package pipeline

import (
	"errors"
	"testing"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/testenv/workload"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// BenchmarkFullTranslationWithTCPRoutes measures, side by side, the full
// translation (Gateway API semantics, then Envoy resources of every
// Gateway, several at a time as the controller does) of 10,000 HTTPRoutes
// alone and of the same 10,000 HTTPRoutes with 1,000 TCPRoutes
// (workload.WithTCPRoutes: 20 more Gateways of 50 TCP listeners). The issue's
// bound: the second costs at most 1.2 times the first.
func BenchmarkFullTranslationWithTCPRoutes(b *testing.B) {
	base := workload.Snapshot(10000)
	for _, c := range []struct {
		name string
		tcp  int
	}{{"http=10000", 0}, {"http=10000+tcp=1000", 1000}} {
		snap := base
		if c.tcp > 0 {
			snap = workload.WithTCPRoutes(base, c.tcp)
		}
		opts := gatewayapi.Options{ControllerName: workload.ControllerName}
		want := workload.Gateways + (c.tcp+workload.TCPListenersPerGateway-1)/workload.TCPListenersPerGateway
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res := gatewayapi.Translate(snap, opts)
				if len(res.Gateways) != want {
					b.Fatalf("%d Gateways translated, want %d", len(res.Gateways), want)
				}
				_, errs := translate.TranslateAll(res.Gateways)
				if err := errors.Join(errs...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
