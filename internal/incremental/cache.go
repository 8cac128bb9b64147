package incremental

import (
	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/resource"
)

// cache is the gatewayapi.Cache of the engine: what translations computed
// that later ones reuse, and the engine's invalidation of it. Every entry
// is valid for the current snapshot: the engine drops an entry before a
// translation whenever something it was computed from changed.
type cache struct {
	rec *recorder
	// compiled rules of routes, valid until the route or something it
	// read changes.
	compiled map[resource.Ref]*gatewayapi.CompiledRoute
	// endpoints of clusters by name, valid until their Service or its
	// EndpointSlices change; svcClusters lists the clusters of a Service.
	endpoints   map[string][]ir.Endpoint
	svcClusters map[resource.Key]set[string]
	// assemblies are what each Gateway's last IR was assembled from.
	assemblies map[resource.Key]*gatewayapi.Assembly
	// changed are the Services whose endpoints may have changed since the
	// assemblies were made (set for one translation).
	changed set[resource.Key]
	// kept counts the routes compiled since the counter was reset.
	kept int
}

func newCache(rec *recorder) *cache {
	return &cache{
		rec:         rec,
		compiled:    map[resource.Ref]*gatewayapi.CompiledRoute{},
		endpoints:   map[string][]ir.Endpoint{},
		svcClusters: map[resource.Key]set[string]{},
		assemblies:  map[resource.Key]*gatewayapi.Assembly{},
	}
}

// CompiledRoute returns the kept compiled rules of a route. On a miss the
// route is compiled again: what it read before is forgotten, the new
// compilation records its reads.
func (c *cache) CompiledRoute(ref resource.Ref) *gatewayapi.CompiledRoute {
	if cr := c.compiled[ref]; cr != nil {
		return cr
	}
	c.rec.forget(ref)
	return nil
}

func (c *cache) KeepCompiledRoute(ref resource.Ref, cr *gatewayapi.CompiledRoute) {
	c.compiled[ref] = cr
	c.kept++
}

// forgetRoute drops what is kept of a route and what it read.
func (c *cache) forgetRoute(ref resource.Ref) {
	delete(c.compiled, ref)
	c.rec.forget(ref)
}

func (c *cache) Endpoints(cluster string) ([]ir.Endpoint, bool) {
	e, ok := c.endpoints[cluster]
	return e, ok
}

func (c *cache) KeepEndpoints(cluster string, svc resource.Key, e []ir.Endpoint) {
	c.endpoints[cluster] = e
	s := c.svcClusters[svc]
	if s == nil {
		s = set[string]{}
		c.svcClusters[svc] = s
	}
	s.add(cluster)
}

// forgetService drops the endpoints of a Service's clusters.
func (c *cache) forgetService(svc resource.Key) {
	for cl := range c.svcClusters[svc] {
		delete(c.endpoints, cl)
	}
	delete(c.svcClusters, svc)
}

func (c *cache) Assembly(gw resource.Key) *gatewayapi.Assembly { return c.assemblies[gw] }

func (c *cache) KeepAssembly(gw resource.Key, a *gatewayapi.Assembly) { c.assemblies[gw] = a }

func (c *cache) EndpointsChanged() func(resource.Key) bool {
	if len(c.changed) == 0 {
		return nil
	}
	return func(svc resource.Key) bool { return hasKey(c.changed, svc) }
}
