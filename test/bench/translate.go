package bench

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/gatewayapi/gen"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// FullTranslation measures one full translation of gen.Snapshot(n): Gateway
// API objects → statuses and IR (gatewayapi.Translate) → validated,
// marshalled and content-hashed Envoy resources of every Gateway
// (translate.Translate), with testing.Benchmark (one second of iterations,
// at least one). It returns milliseconds and allocations per translation.
func FullTranslation(n int) (TranslateFull, error) {
	snap := gen.Snapshot(n)
	opts := gatewayapi.Options{ControllerName: gen.ControllerName, Now: metav1.NewTime(time.Unix(0, 0))}
	var failure error
	once := func() error {
		res := gatewayapi.Translate(snap, opts)
		if len(res.Gateways) != gen.Gateways {
			return fmt.Errorf("%d routes: %d gateways translated, want %d", n, len(res.Gateways), gen.Gateways)
		}
		for _, gw := range res.Gateways {
			if _, err := translate.Translate(gw); err != nil {
				return fmt.Errorf("%d routes: %w", n, err)
			}
		}
		return nil
	}
	if err := once(); err != nil { // warm up, and fail fast outside the benchmark
		return TranslateFull{}, err
	}
	runtime.GC()
	r := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := once(); err != nil {
				failure = err
				b.Fatal(err)
			}
		}
	})
	if failure != nil {
		return TranslateFull{}, failure
	}
	if r.N == 0 {
		return TranslateFull{}, fmt.Errorf("%d routes: the benchmark did not run", n)
	}
	return TranslateFull{Ms: round(float64(r.T)/float64(r.N)/1e6, 2), Allocs: r.AllocsPerOp()}, nil
}
