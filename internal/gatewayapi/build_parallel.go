package gatewayapi

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/resource"
)

// Assembling Gateways in parallel.
//
// buildIR assembles the IR of each accepted Gateway (gatewayIR): its
// listeners, virtual hosts and clusters. At 10,000 routes over ten
// Gateways that is a sixth of the Gateway API stage of a full
// translation, and it ran on one goroutine. The assemblies of two
// Gateways are independent but for what they share, so with two Gateways
// or more and at least parallelBuildMin routes they run on up to
// GOMAXPROCS goroutines; each Gateway's IR is its serial one, and the list
// is in Gateway order:
//   - the Cache (the endpoints of each cluster, each Gateway's assembly)
//     is shared: during the parallel build it is behind a mutex
//     (lockedCache); an entry does not depend on which Gateway computes it
//     first (the endpoints of a cluster are those of its Service's slices
//     in the immutable snapshot);
//   - a compiled route attached to several Gateways keeps its copy with a
//     listener's port for redirects (routeOnPort): it is made under
//     portCopyMu;
//   - reads are not recorded: the translation's own Reader has no owner
//     (the assemblies read the EndpointSlices of clusters, which the Cache
//     tracks itself); a Reader that records keeps the build serial;
//   - a panic in a worker stops the others and is raised again on the
//     translation's goroutine, where the pipeline's recovery expects it.
//
// Everything else an assembly touches is its Gateway's (listeners and
// their host indexes, the previous assembly) or read only (compiled
// routes, cluster definitions, secrets).

// parallelBuildMin is the fewest routes for which Gateways are assembled
// in parallel: an incremental translation of a few routes reuses most
// virtual hosts, and goroutines would cost more than they save. A
// variable so that tests run small inputs through the parallel path.
var parallelBuildMin = 256

// portCopyMu guards the redirect copies of compiled routes (routeOnPort)
// during a parallel build.
var portCopyMu sync.Mutex

// buildIR assembles the IR of the accepted Gateways, in order.
func (t *translator) buildIR() []*ir.Gateway {
	var gws []*gatewayState
	for _, g := range t.gwOrder {
		if g.accepted {
			gws = append(gws, g)
		}
	}
	if len(gws) == 0 {
		return nil
	}
	out := make([]*ir.Gateway, len(gws))
	workers := min(runtime.GOMAXPROCS(0), len(gws))
	if workers < 2 || len(t.routes) < parallelBuildMin || t.in.Records() {
		for i, g := range gws {
			out[i] = t.gatewayIR(g)
		}
		return out
	}
	shared := t.cache
	t.cache = &lockedCache{Cache: shared}
	defer func() { t.cache = shared }()
	var failure atomic.Pointer[workerPanic]
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for failure.Load() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(gws) {
					return
				}
				if p := t.assembleSafe(gws[i], &out[i]); p != nil {
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

// assembleSafe is gatewayIR into out, with a panic returned, not raised.
func (t *translator) assembleSafe(g *gatewayState, out **ir.Gateway) (panicked any) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
	}()
	*out = t.gatewayIR(g)
	return nil
}

// lockedCache is a Cache behind a mutex, for the parallel build.
type lockedCache struct {
	mu sync.Mutex
	Cache
}

func (c *lockedCache) Endpoints(cluster string) ([]ir.Endpoint, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Cache.Endpoints(cluster)
}

func (c *lockedCache) KeepEndpoints(cluster string, svc resource.Key, e []ir.Endpoint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Cache.KeepEndpoints(cluster, svc, e)
}

func (c *lockedCache) Assembly(gw resource.Key) *Assembly {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Cache.Assembly(gw)
}

func (c *lockedCache) KeepAssembly(gw resource.Key, a *Assembly) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Cache.KeepAssembly(gw, a)
}

func (c *lockedCache) EndpointsChanged() func(svc resource.Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Cache.EndpointsChanged()
}

func (c *lockedCache) CompiledRoute(ref resource.Ref) *CompiledRoute {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Cache.CompiledRoute(ref)
}

func (c *lockedCache) KeepCompiledRoute(ref resource.Ref, cr *CompiledRoute) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.Cache.KeepCompiledRoute(ref, cr)
}
