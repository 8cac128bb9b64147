package bench

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/gatewayapi/gen"
	"github.com/portico-dev/portico/internal/incremental"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// FullTranslation measures one full translation of gen.Snapshot(n): Gateway
// API objects → statuses and IR (gatewayapi.Translate) → validated,
// encoded and content-hashed Envoy resources of every Gateway, with
// testing.Benchmark (one second of iterations, at least one). Ms and Allocs
// are those of the controller's path, which translates the Gateways'
// resources several at a time (translate.TranslateAll, up to GOMAXPROCS);
// SequentialMs is the same work one Gateway after the other.
func FullTranslation(n int) (TranslateFull, error) {
	snap := gen.Snapshot(n)
	opts := gatewayapi.Options{ControllerName: gen.ControllerName}
	once := func(parallel bool) error {
		res := gatewayapi.Translate(snap, opts)
		if len(res.Gateways) != gen.Gateways {
			return fmt.Errorf("%d routes: %d gateways translated, want %d", n, len(res.Gateways), gen.Gateways)
		}
		if parallel {
			_, errs := translate.TranslateAll(res.Gateways)
			return errors.Join(errs...)
		}
		for _, gw := range res.Gateways {
			if _, err := translate.Translate(gw); err != nil {
				return fmt.Errorf("%d routes: %w", n, err)
			}
		}
		return nil
	}
	measure := func(parallel bool) (testing.BenchmarkResult, error) {
		if err := once(parallel); err != nil { // warm up, and fail fast outside the benchmark
			return testing.BenchmarkResult{}, err
		}
		runtime.GC()
		var failure error
		r := testing.Benchmark(func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := once(parallel); err != nil {
					failure = err
					b.Fatal(err)
				}
			}
		})
		if failure != nil {
			return r, failure
		}
		if r.N == 0 {
			return r, fmt.Errorf("%d routes: the benchmark did not run", n)
		}
		return r, nil
	}
	par, err := measure(true)
	if err != nil {
		return TranslateFull{}, err
	}
	seq, err := measure(false)
	if err != nil {
		return TranslateFull{}, err
	}
	ms := func(r testing.BenchmarkResult) float64 { return round(float64(r.T)/float64(r.N)/1e6, 2) }
	return TranslateFull{Ms: ms(par), Allocs: par.AllocsPerOp(), SequentialMs: ms(seq)}, nil
}

// IncrementalChanges is how many single-route changes IncrementalTranslation
// averages.
const IncrementalChanges = 200

// IncrementalTranslation measures, in-process, the translation of one
// changed route of gen.Snapshot(n) as the controller's pipeline runs it:
// the Gateway API translation from the previous one (gatewayapi.
// Incremental, with the snapshot listing the change as the Kubernetes
// provider's do) and the Envoy resources of the Gateways
// (translate.Translator, which re-translates the changed parts only). It
// returns the mean over changes changes, each of another route, in ms.
func IncrementalTranslation(n, changes int) (float64, error) {
	snap := gen.Snapshot(n)
	opts := gatewayapi.Options{ControllerName: gen.ControllerName}
	x, tr := incremental.New(), translate.NewTranslator()
	res, _ := x.Translate(snap, opts)
	if _, errs := tr.TranslateAll(res.Gateways); errors.Join(errs...) != nil {
		return 0, fmt.Errorf("%d routes: %w", n, errors.Join(errs...))
	}
	runtime.GC()
	var total time.Duration
	for i := range changes {
		snap, _ = gen.ChangeRoute(snap, (i*7919)%n, i)
		start := time.Now()
		res, st := x.Translate(snap, opts)
		_, errs := tr.TranslateAll(res.Gateways)
		total += time.Since(start)
		if err := errors.Join(errs...); err != nil {
			return 0, fmt.Errorf("%d routes, change %d: %w", n, i, err)
		}
		if st.Mode != incremental.ModeRoutes || st.Gateways != 1 {
			return 0, fmt.Errorf("%d routes, change %d: translated as %+v, want one Gateway by the route path", n, i, st)
		}
	}
	return round(float64(total)/float64(changes)/1e6, 3), nil
}
