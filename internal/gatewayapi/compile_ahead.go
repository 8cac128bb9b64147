package gatewayapi

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/portico-dev/portico/internal/gatewayapi/inputs"
	"github.com/portico-dev/portico/internal/resource"
)

// Compiling routes in parallel.
//
// Compiling a route (its matches, filters and backends: CompiledRoute) is
// most of the Gateway API stage of a full translation, and depends on the
// route and the objects it reads only. compileAhead runs it for every
// route the cache does not hold on GOMAXPROCS goroutines, before the
// translation takes the routes in order; everything else (attachment,
// budgets, conflicts, statuses) stays on the translation's goroutine, in
// route order. The result is the serial one, byte for byte:
//   - the workers read the snapshot, which is immutable, through Readers
//     detached from the translation's (inputs.Reader.Detached), after the
//     shared indexes are built (Prepare);
//   - what routes share, the resolved clusters and the evaluated
//     BackendTLSPolicies, is behind translation.mu; a definition depends on
//     the Service, the port and the policies only, so whichever route
//     computes it first, every route gets the same one (keepClusterDef);
//   - the reads each route makes are buffered and replayed, in route
//     order, when the translation reaches the route: the Recorder sees
//     what it sees serially (the semantics record the same reads whether a
//     memo answers or not);
//   - a panic in a worker stops the others and is raised again on the
//     translation's goroutine, where the pipeline's recovery expects it.
//
// Below parallelCompileMin uncached routes, or with one CPU, compiling
// stays serial: an incremental translation compiles a handful of routes,
// for which goroutines cost more than they save.

// parallelCompileMin is the fewest routes to compile that are worth
// spreading over goroutines; a variable so that tests run small inputs
// through the parallel path.
var parallelCompileMin = 64

// compiledAhead is one route compiled by compileAhead, with the reads its
// compilation made: those its worker's buffer kept between two marks.
type compiledAhead struct {
	CompiledRoute
	// rs is the route's state the compilation filled in, taken over by
	// the translation (translateRoute).
	rs       *routeState
	src      routeSource
	ok       bool // compiled (the route exists)
	reads    *inputs.Buffer
	from, to int
}

// replay records, for the translation, the reads made compiling the route.
func (c *compiledAhead) replay(in *inputs.Reader) { c.reads.Replay(in, c.from, c.to) }

// compileAhead compiles the routes of refs the cache does not hold, in
// parallel; the result is indexed like refs (ok false: compile it in
// place), or nil when it is not worth it.
func (t *translator) compileAhead(refs []resource.Ref) []compiledAhead {
	workers := runtime.GOMAXPROCS(0)
	if workers < 2 || len(refs) < parallelCompileMin {
		return nil
	}
	var todo []int
	for i, ref := range refs {
		if t.cache.CompiledRoute(ref) == nil {
			todo = append(todo, i)
		}
	}
	if len(todo) < parallelCompileMin {
		return nil
	}
	workers = min(workers, len(todo))
	t.in.Prepare()
	out := make([]compiledAhead, len(refs))
	var failure atomic.Pointer[workerPanic]
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			buf := &inputs.Buffer{}
			wt := &translator{in: t.in.Detached(buf), translation: t.translation}
			for failure.Load() == nil {
				n := int(next.Add(1)) - 1
				if n >= len(todo) {
					return
				}
				i := todo[n]
				if p := wt.compileOne(refs[i], &out[i], buf); p != nil {
					failure.CompareAndSwap(nil, &workerPanic{i, p})
				}
			}
		})
	}
	wg.Wait()
	if p := failure.Load(); p != nil {
		panic(p.value)
	}
	return out
}

// workerPanic is a panic of a worker compiling route refs[index].
type workerPanic struct {
	index int
	value any
}

// compileOne compiles route ref on a worker (t reads for no owner, into
// buf) into c, left unset when the route does not exist. A panic is
// returned, not raised.
func (t *translator) compileOne(ref resource.Ref, c *compiledAhead, buf *inputs.Buffer) (panicked any) {
	defer func() {
		if p := recover(); p != nil {
			*c, panicked = compiledAhead{}, p
		}
	}()
	kind := routeKinds[ref.Kind]
	src, ok := kind.read(t.in, ref.Key)
	if !ok {
		return nil
	}
	rs := newRouteState(ref.Kind, src.meta, src.spec)
	rs.setHostnames(src.hostnames)
	from := buf.Len()
	kind.compile(t.readingFor(ref), rs, src.obj)
	*c = compiledAhead{
		CompiledRoute: CompiledRoute{rules: rs.rules, hostnames: rs.hostnames, noHostname: rs.noHostname},
		rs:            rs, src: src, ok: true, reads: buf, from: from, to: buf.Len(),
	}
	return nil
}
