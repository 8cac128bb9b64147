package bench

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/incremental"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/testenv/workload"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// FullTranslation measures one full translation of workload.Snapshot(n): Gateway
// API objects → statuses and IR (gatewayapi.Translate) → validated,
// encoded and content-hashed Envoy resources of every Gateway, with
// testing.Benchmark (one second of iterations, at least one). Ms and Allocs
// are those of the controller's path, which translates the Gateways'
// resources several at a time (translate.TranslateAll, up to GOMAXPROCS);
// SequentialMs is the same work one Gateway after the other.
func FullTranslation(n int) (TranslateFull, error) {
	snap := workload.Snapshot(n)
	what := fmt.Sprintf("%d routes", n)
	par, err := benchmarkOnce(func() error { return translateFull(snap, workload.Gateways, true, what) })
	if err != nil {
		return TranslateFull{}, err
	}
	seq, err := benchmarkOnce(func() error { return translateFull(snap, workload.Gateways, false, what) })
	if err != nil {
		return TranslateFull{}, err
	}
	return TranslateFull{Ms: opMs(par), Allocs: par.AllocsPerOp(), SequentialMs: opMs(seq)}, nil
}

// translateFull translates snap fully, as FullTranslation describes, and
// checks that it has gateways Gateways; parallel chooses
// translate.TranslateAll over one Gateway after the other. what names
// the snapshot in errors.
func translateFull(snap *resource.Snapshot, gateways int, parallel bool, what string) error {
	res := gatewayapi.Translate(snap, gatewayapi.Options{ControllerName: workload.ControllerName})
	if len(res.Gateways) != gateways {
		return fmt.Errorf("%s: %d gateways translated, want %d", what, len(res.Gateways), gateways)
	}
	if parallel {
		_, errs := translate.TranslateAll(res.Gateways)
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	for _, gw := range res.Gateways {
		if _, err := translate.Translate(gw); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// benchmarkOnce runs once once (a warm-up that fails fast outside the
// benchmark), collects garbage, and then measures it with
// testing.Benchmark; the first error of once stops it.
func benchmarkOnce(once func() error) (testing.BenchmarkResult, error) {
	if err := once(); err != nil {
		return testing.BenchmarkResult{}, err
	}
	runtime.GC()
	var failure error
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
		return r, failure
	}
	if r.N == 0 {
		return r, errors.New("the benchmark did not run")
	}
	return r, nil
}

// opMs is the time per operation of r in ms, rounded to 0.01.
func opMs(r testing.BenchmarkResult) float64 { return round(float64(r.T)/float64(r.N)/1e6, 2) }

// The mixed translation of FullTranslationWithTCP: 10,000 HTTPRoutes and
// 1,000 TCPRoutes, over MixRounds rounds; its target is a ratio of at most
// MixMaxRatio.
const (
	MixHTTPRoutes = 10000
	MixTCPRoutes  = 1000
	MixRounds     = 3
	MixMaxRatio   = 1.2
)

// FullTranslationWithTCP measures, in one run, the full translation (as
// FullTranslation's Ms: the controller's parallel path) of
// workload.Snapshot(httpRoutes) alone and of
// workload.WithTCPRoutes(workload.Snapshot(httpRoutes), tcpRoutes), which adds
// Gateways of workload.TCPListenersPerGateway TCP listeners with one TCPRoute
// each. Both snapshots are built before the first measurement; each round
// measures both, one after the other, in alternating order (so that
// neither always runs first, on a warmer heap or a quieter machine), and
// the ratio is taken within each round (two adjacent measurements share
// whatever else the machine is doing) before the median over rounds.
func FullTranslationWithTCP(httpRoutes, tcpRoutes, rounds int) (*TranslateMixed, error) {
	base := workload.Snapshot(httpRoutes)
	mixed := workload.WithTCPRoutes(base, tcpRoutes)
	tcpGateways := (tcpRoutes + workload.TCPListenersPerGateway - 1) / workload.TCPListenersPerGateway
	alone := fmt.Sprintf("%d HTTPRoutes", httpRoutes)
	with := fmt.Sprintf("%d HTTPRoutes and %d TCPRoutes", httpRoutes, tcpRoutes)
	m, err := compareRounds(rounds, [2]func() (testing.BenchmarkResult, error){
		func() (testing.BenchmarkResult, error) {
			return benchmarkOnce(func() error { return translateFull(base, workload.Gateways, true, alone) })
		},
		func() (testing.BenchmarkResult, error) {
			return benchmarkOnce(func() error { return translateFull(mixed, workload.Gateways+tcpGateways, true, with) })
		},
	})
	if err != nil {
		return nil, err
	}
	m.HTTPRoutes, m.TCPRoutes = httpRoutes, tcpRoutes
	return m, nil
}

// compareRounds runs rounds rounds of measure[0] (alone) and measure[1]
// (with), in the order 0, 1 in even rounds and 1, 0 in odd ones, and
// summarises them as TranslateMixed describes (medians: the lower middle
// of an even count).
func compareRounds(rounds int, measure [2]func() (testing.BenchmarkResult, error)) (*TranslateMixed, error) {
	if rounds < 1 {
		return nil, fmt.Errorf("%d rounds", rounds)
	}
	var ms [2][]float64
	var allocs [2][]float64
	m := &TranslateMixed{Rounds: rounds}
	for i := range rounds {
		order := [2]int{0, 1}
		if i%2 == 1 {
			order = [2]int{1, 0}
		}
		var got [2]float64
		for _, w := range order {
			r, err := measure[w]()
			if err != nil {
				return nil, fmt.Errorf("round %d: %w", i+1, err)
			}
			got[w] = opMs(r)
			ms[w] = append(ms[w], got[w])
			allocs[w] = append(allocs[w], float64(r.AllocsPerOp()))
		}
		if got[0] <= 0 {
			return nil, fmt.Errorf("round %d: the translation alone took %v ms", i+1, got[0])
		}
		m.RoundRatios = append(m.RoundRatios, round(got[1]/got[0], 3))
	}
	m.Alone = TranslateFull{Ms: median(ms[0]), Allocs: int64(median(allocs[0]))}
	m.With = TranslateFull{Ms: median(ms[1]), Allocs: int64(median(allocs[1]))}
	m.Ratio = median(m.RoundRatios)
	return m, nil
}

// median is the middle of v (the lower one of an even count); 0 when
// empty.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[(len(s)-1)/2]
}

// IncrementalChanges is how many single-route changes IncrementalTranslation
// averages.
const IncrementalChanges = 200

// IncrementalTranslation measures, in-process, the translation of one
// changed route of workload.Snapshot(n) as the controller's pipeline runs it:
// the Gateway API translation from the previous one (gatewayapi.
// Incremental, with the snapshot listing the change as the Kubernetes
// provider's do) and the Envoy resources of the Gateways
// (translate.Translator, which re-translates the changed parts only). It
// returns the mean over changes changes, each of another route, in ms.
func IncrementalTranslation(n, changes int) (float64, error) {
	snap := workload.Snapshot(n)
	opts := gatewayapi.Options{ControllerName: workload.ControllerName}
	x, tr := incremental.New(), translate.NewTranslator()
	res, _ := x.Translate(snap, opts)
	if _, errs := tr.TranslateAll(res.Gateways); errors.Join(errs...) != nil {
		return 0, fmt.Errorf("%d routes: %w", n, errors.Join(errs...))
	}
	runtime.GC()
	var total time.Duration
	for i := range changes {
		snap, _ = workload.ChangeRoute(snap, (i*7919)%n, i)
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
