package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/log"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/portico-dev/portico/internal/xds/translate"
)

// gatewayCache is the xDS cache of the server. Each Gateway has, per
// resource type, a go-control-plane LinearCache for state-of-the-world
// streams and a deltaCache (delta.go) for delta streams. An update hands
// each only the resources that were added, changed or removed
// (translate.Diff walks the content hashes), so its cost follows the size
// of the change, not the size of the Gateway.
//
// Route tables are served in two forms (translate's vhds.go): delta
// streams (every Portico proxy) get each table in VHDS form and its
// virtual hosts by VHDS, so that a change of a route sends its virtual
// host only; state-of-the-world streams, which cannot use VHDS, get the
// whole tables. The LinearCache encodes what a state-of-the-world stream
// is sent, and answers it with every resource of a changed type; the
// deltaCache answers a delta stream with the changed resources only.
//
// The whole tables are assembled on demand (translate.Resources.Routes):
// while no state-of-the-world stream of a Gateway watches its route
// tables, an update leaves the route tables of its LinearCache as they
// are, and checks references by name only; the first such watch brings
// them up to date (catchUpRoutes) before it starts. A state-of-the-world
// stream watches each type again after each response, when it ACKs, so a
// change made in between is picked up by that next watch.
//
// Updates are applied in make-before-break order: first the additions and
// changes, clusters and endpoints before listeners and routes (virtual
// hosts before their route configs), so that nothing is referenced before
// it is sent; then the removals, listeners and routes before what they
// referenced.
//
// A proxy of a Gateway that has no resources yet (not translated, or
// removed) waits: its watches are started when the Gateway's resources are
// first set. A removed Gateway's proxies keep their last configuration; its
// caches are dropped when its last watch ends.
type gatewayCache struct {
	log log.Logger
	// withholdSecrets: the Secrets of a set are not handed to the
	// LinearCaches nor fetched (clients are not authenticated; see
	// Server.UnauthenticatedSecrets). Set before the first set.
	withholdSecrets bool

	mu  sync.Mutex // guards gws; held while a LinearCache is updated or watched
	gws map[string]*gatewayState
}

// gatewayState is the cache of one Gateway.
type gatewayState struct {
	types map[string]*cachev3.LinearCache // by type URL, every servedType (state of the world)
	delta map[string]*deltaCache          // by type URL, every deltaTypes
	// res are the resources set last; nil before the first set.
	res *translate.Resources
	// serving: resources are set and the Gateway was not removed since.
	serving bool
	// watches counts the open watches, pending ones included.
	watches int
	// pending are the watches waiting for the Gateway's first resources,
	// with the function that starts each on its LinearCache.
	pending map[*watchRef]func(*gatewayState) (func(), error)
	refs    refIndex
	// sotwRoutes are the resources whose route tables the RouteType
	// LinearCache holds; they lag res while sotwRouteWatches, the
	// state-of-the-world watches of route tables open or pending, is 0.
	sotwRoutes       *translate.Resources
	sotwRouteWatches int
}

// watchRef is one watch handed to the xDS server.
type watchRef struct {
	typeURL string
	cancel  func() // the LinearCache's, once started
	done    bool
	// sotwRoutes: a state-of-the-world watch of route tables.
	sotwRoutes bool
}

// Order of the types when resources are added or changed, and when they
// are removed.
var (
	upsertOrder = []resourcev3.Type{
		resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.SecretType,
		resourcev3.VirtualHostType, resourcev3.RouteType, resourcev3.ScopedRouteType,
		resourcev3.ExtensionConfigType, resourcev3.ListenerType,
	}
	removeOrder = []resourcev3.Type{
		resourcev3.ListenerType, resourcev3.ExtensionConfigType, resourcev3.ScopedRouteType,
		resourcev3.RouteType, resourcev3.VirtualHostType,
		resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.SecretType,
	}
)

// deltaTypes are the types served to delta streams: servedTypes and the
// virtual hosts of VHDS.
var deltaTypes = append(servedTypes[:len(servedTypes):len(servedTypes)], resourcev3.VirtualHostType)

// deltaVersion is the system version of the responses of the delta cache
// of type t: the content hash of what it serves (the Gateway's version for
// Resources without type versions), so that the version a proxy ACKs tells
// whether it runs what is served, on any replica (package proxysync).
func deltaVersion(t resourcev3.Type, r *translate.Resources) string {
	if v := r.TypeVersion(deltaSource(t, r)); v != "" {
		return v
	}
	return r.Version
}

// deltaSource is the list of r a delta cache of type t is fed from: route
// tables in VHDS form, the rest as they are. Resources without VHDS forms
// (not built by the translate package) serve whole route tables.
func deltaSource(t resourcev3.Type, r *translate.Resources) resourcev3.Type {
	if t == resourcev3.RouteType && r.HasVHDS() {
		return translate.VHDSRouteType
	}
	return t
}

var _ cachev3.Cache = (*gatewayCache)(nil)

func newGatewayCache(l log.Logger) *gatewayCache {
	return &gatewayCache{log: l, gws: map[string]*gatewayState{}}
}

// CreateWatch implements cachev3.ConfigWatcher for state-of-the-world
// streams.
func (c *gatewayCache) CreateWatch(req *cachev3.Request, sub cachev3.Subscription, ch chan cachev3.Response) (func(), error) {
	if !served(req.GetTypeUrl()) {
		return c.unserved(req.GetNode().GetCluster(), req.GetTypeUrl())
	}
	sotwRoutes := req.GetTypeUrl() == resourcev3.RouteType
	return c.watch(req.GetNode().GetCluster(), req.GetTypeUrl(), sotwRoutes, func(g *gatewayState) (func(), error) {
		if sotwRoutes {
			if err := g.catchUpRoutes(); err != nil {
				return nil, err
			}
		}
		return g.types[req.GetTypeUrl()].CreateWatch(req, sub, ch)
	})
}

// CreateDeltaWatch implements cachev3.ConfigWatcher for delta streams.
func (c *gatewayCache) CreateDeltaWatch(req *cachev3.DeltaRequest, sub cachev3.Subscription, ch chan cachev3.DeltaResponse) (func(), error) {
	if !slices.Contains(deltaTypes, req.GetTypeUrl()) {
		return c.unserved(req.GetNode().GetCluster(), req.GetTypeUrl())
	}
	return c.watch(req.GetNode().GetCluster(), req.GetTypeUrl(), false, func(g *gatewayState) (func(), error) {
		return g.delta[req.GetTypeUrl()].watch(req, sub, ch), nil
	})
}

// unserved is the watch of a type that is not served: like an absent type
// of a snapshot, it never fires.
func (c *gatewayCache) unserved(gw, typeURL string) (func(), error) {
	c.log.Warnf("watch of gateway %s for type %s, which is not served", gw, typeURL)
	return func() {}, nil
}

func (c *gatewayCache) watch(gw, typeURL string, sotwRoutes bool, start func(*gatewayState) (func(), error)) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.gateway(gw)
	w := &watchRef{typeURL: typeURL, sotwRoutes: sotwRoutes}
	if g.serving {
		cancel, err := start(g)
		if err != nil {
			c.dropIfIdle(gw, g)
			return nil, err
		}
		w.cancel = cancel
	} else {
		g.pending[w] = start
	}
	g.watches++
	if sotwRoutes {
		g.sotwRouteWatches++
	}
	return func() { c.cancel(gw, g, w) }, nil
}

// catchUpRoutes brings the route tables of the RouteType LinearCache up
// to those of res (see sotwRoutes). Called with c.mu held.
func (g *gatewayState) catchUpRoutes() error {
	if g.sotwRoutes == g.res || g.res == nil {
		return nil
	}
	lc := g.types[resourcev3.RouteType]
	changed, removed := translate.Diff(g.sotwRoutes, g.res, resourcev3.RouteType)
	if len(changed) > 0 {
		m := make(map[string]types.Resource, len(changed))
		for _, res := range changed {
			m[cachev3.GetResourceName(res)] = res
		}
		if err := lc.UpdateResources(m, nil); err != nil {
			return fmt.Errorf("route tables: %w", err)
		}
	}
	if len(removed) > 0 {
		if err := lc.UpdateResources(nil, removed); err != nil {
			return fmt.Errorf("route tables: %w", err)
		}
	}
	g.sotwRoutes = g.res
	return nil
}

func (c *gatewayCache) cancel(gw string, g *gatewayState, w *watchRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.done {
		return
	}
	w.done = true
	if w.sotwRoutes {
		g.sotwRouteWatches--
	}
	delete(g.pending, w)
	if w.cancel != nil {
		w.cancel()
	}
	g.watches--
	c.dropIfIdle(gw, g)
}

// gateway returns the state of gw, creating it. Called with c.mu held.
func (c *gatewayCache) gateway(gw string) *gatewayState {
	g := c.gws[gw]
	if g == nil {
		g = &gatewayState{
			types:   make(map[string]*cachev3.LinearCache, len(servedTypes)),
			delta:   make(map[string]*deltaCache, len(deltaTypes)),
			pending: map[*watchRef]func(*gatewayState) (func(), error){},
		}
		for _, t := range servedTypes {
			g.types[t] = cachev3.NewLinearCache(t, cachev3.WithLogger(c.log))
		}
		for _, t := range deltaTypes {
			g.delta[t] = newDeltaCache(t, t == resourcev3.VirtualHostType)
		}
		c.gws[gw] = g
	}
	return g
}

func (c *gatewayCache) dropIfIdle(gw string, g *gatewayState) {
	if !g.serving && g.watches == 0 && c.gws[gw] == g {
		delete(c.gws, gw)
	}
}

// set makes r the resources of gw. It first checks that r is consistent
// (see refIndex) and, if not, returns an error and keeps the resources set
// before.
func (c *gatewayCache) set(gw string, r *translate.Resources) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.gateway(gw)
	// lazyRoutes: the whole route tables are not needed now (see
	// sotwRoutes); their references are checked by name.
	lazyRoutes := g.sotwRouteWatches == 0 && r.HasVHDS()
	diffs := make(map[resourcev3.Type]typeDiff, len(servedTypes))
	for _, t := range servedTypes {
		if t == resourcev3.RouteType && lazyRoutes {
			names, removed := translate.DiffNames(g.res, r, t)
			diffs[t] = typeDiff{names: names, removed: removed}
			continue
		}
		changed, removed := translate.Diff(g.res, r, t)
		diffs[t] = typeDiff{changed: changed, removed: removed}
	}
	if g.res != nil {
		diffs[resourcev3.EndpointType] = rewarm(diffs[resourcev3.ClusterType], diffs[resourcev3.EndpointType], r)
	}
	deltaDiffs := make(map[resourcev3.Type]deltaDiff, len(deltaTypes))
	for _, t := range deltaTypes {
		if t == resourcev3.EndpointType {
			deltaDiffs[t] = deltaDiffOf(diffs[t], r, t)
			continue
		}
		if t == resourcev3.SecretType && c.withholdSecrets {
			continue
		}
		src := deltaSource(t, r)
		prev := g.res
		if prev != nil && deltaSource(t, prev) != src {
			prev = nil // another form: every resource counts as changed
		}
		changed, removed := translate.Diff(prev, r, src)
		deltaDiffs[t] = deltaDiffOf(typeDiff{changed: changed, removed: removed}, r, src)
	}
	plan, err := g.refs.plan(diffs, r)
	if err != nil {
		c.dropIfIdle(gw, g)
		return fmt.Errorf("resources of gateway %s are inconsistent: %w", gw, err)
	}
	g.refs.commit(plan)

	var errs []error
	for _, t := range upsertOrder {
		if t == resourcev3.SecretType && c.withholdSecrets {
			continue
		}
		if lc := g.types[t]; t == resourcev3.ScopedRouteType && lc != nil {
			if d := diffs[t]; len(d.changed) > 0 || len(d.removed) > 0 {
				lc.SetResources(fullState(r.ScopedRoutes))
			}
		} else if lc != nil && !(t == resourcev3.RouteType && lazyRoutes) {
			if d := diffs[t]; len(d.changed) > 0 {
				m := make(map[string]types.Resource, len(d.changed))
				for _, res := range d.changed {
					m[cachev3.GetResourceName(res)] = res
				}
				if err := lc.UpdateResources(m, nil); err != nil {
					errs = append(errs, fmt.Errorf("gateway %s: %s: %w", gw, t, err))
				}
			}
		}
		if d := deltaDiffs[t]; len(d.changed) > 0 {
			g.delta[t].update(deltaVersion(t, r), d.changed, nil)
		}
	}
	for _, t := range removeOrder {
		if t == resourcev3.SecretType && c.withholdSecrets {
			continue
		}
		if lc := g.types[t]; lc != nil && t != resourcev3.ScopedRouteType && !(t == resourcev3.RouteType && lazyRoutes) {
			if d := diffs[t]; len(d.removed) > 0 {
				if err := lc.UpdateResources(nil, d.removed); err != nil {
					errs = append(errs, fmt.Errorf("gateway %s: %s: %w", gw, t, err))
				}
			}
		}
		if d := deltaDiffs[t]; len(d.removed) > 0 {
			g.delta[t].update(deltaVersion(t, r), nil, d.removed)
		}
	}
	for t, dc := range g.delta {
		dc.version = deltaVersion(t, r)
	}
	g.res = r
	if !lazyRoutes {
		g.sotwRoutes = r
	}
	if !g.serving {
		g.serving = true
		for w, start := range g.pending {
			delete(g.pending, w)
			cancel, err := start(g)
			if err != nil {
				errs = append(errs, fmt.Errorf("gateway %s: start a %s watch: %w", gw, w.typeURL, err))
				continue
			}
			w.cancel = cancel
		}
	}
	return errors.Join(errs...)
}

// fullState maps every resource of s by name. State-of-the-world scopes
// (SRDS) are a full-state type for Envoy: a response without a scope
// removes it. The LinearCache sends full state for listeners and clusters
// only, so on any change of scopes they are all set again, which makes
// its next response hold every one (a change of routes leaves scopes as
// they are: O(scopes) per change of hostnames only).
func fullState(s []types.Resource) map[string]types.Resource {
	m := make(map[string]types.Resource, len(s))
	for _, res := range s {
		m[cachev3.GetResourceName(res)] = res
	}
	return m
}

// deltaDiff is a typeDiff with the versions of the changed resources.
type deltaDiff struct {
	changed map[string]versioned
	removed []string
}

// deltaDiffOf gives the changes of d their versions, those of the
// resources of type t in r, or, for resources not built by the translate
// package, a hash of their encoding. It looks up the changed resources
// only: a map of every version would cost O(Gateway) per update.
func deltaDiffOf(d typeDiff, r *translate.Resources, t resourcev3.Type) deltaDiff {
	out := deltaDiff{removed: d.removed}
	if len(d.changed) > 0 {
		out.changed = make(map[string]versioned, len(d.changed))
	}
	for _, res := range d.changed {
		name := cachev3.GetResourceName(res)
		v, ok := r.ResourceVersion(t, name)
		if !ok {
			v = cachev3.HashResource(mustMarshal(res))
		}
		out.changed[name] = versioned{version: v, res: res}
	}
	return out
}

func mustMarshal(res types.Resource) []byte {
	b, err := cachev3.MarshalResource(res)
	if err != nil {
		return []byte(err.Error())
	}
	return b
}

// remove stops serving gw: its proxies keep their configuration, new
// proxies wait, and its caches are dropped once no watch is open.
func (c *gatewayCache) remove(gw string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.gws[gw]; g != nil {
		g.serving = false
		c.dropIfIdle(gw, g)
	}
}

// resources returns the resources set for gw and whether they are served.
func (c *gatewayCache) resources(gw string) (*translate.Resources, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.gws[gw]; g != nil && g.serving {
		return g.res, true
	}
	return nil, false
}

// pendingWatches returns the number of watches of gw waiting for its first
// resources, or -1 when the cache has no state for gw.
func (c *gatewayCache) pendingWatches(gw string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g := c.gws[gw]; g != nil {
		return len(g.pending)
	}
	return -1
}

func served(typeURL string) bool {
	for _, t := range servedTypes {
		if t == typeURL {
			return true
		}
	}
	return false
}

// Fetch implements cachev3.ConfigFetcher (the unary Fetch* RPCs): the
// resources of the request's type and names (all when none are named) of
// the node's Gateway, versioned by the type's content hash.
func (c *gatewayCache) Fetch(_ context.Context, req *cachev3.Request) (cachev3.Response, error) {
	gw, typeURL := req.GetNode().GetCluster(), req.GetTypeUrl()
	r, ok := c.resources(gw)
	if !ok {
		return nil, fmt.Errorf("gateway %q has no resources", gw)
	}
	if !served(typeURL) {
		return nil, fmt.Errorf("resource type %q is not served", typeURL)
	}
	version := r.TypeVersion(typeURL)
	if version == "" {
		version = r.Version
	}
	if req.GetVersionInfo() == version {
		return nil, errors.New("skip fetch: version up to date")
	}
	names := map[string]bool{}
	for _, n := range req.GetResourceNames() {
		names[n] = true
	}
	out := &discoveryv3.DiscoveryResponse{VersionInfo: version, TypeUrl: typeURL}
	c.mu.Lock()
	withhold := c.withholdSecrets && typeURL == resourcev3.SecretType
	c.mu.Unlock()
	if withhold {
		return &cachev3.PassthroughResponse{Request: req, DiscoveryResponse: out}, nil
	}
	for _, res := range r.ByType()[typeURL] {
		if len(names) > 0 && !names[cachev3.GetResourceName(res)] {
			continue
		}
		a, err := anypb.New(res)
		if err != nil {
			return nil, fmt.Errorf("gateway %s: %w", gw, err)
		}
		out.Resources = append(out.Resources, a)
	}
	return &cachev3.PassthroughResponse{Request: req, DiscoveryResponse: out}, nil
}

// rewarm adds to the endpoint changes the load assignments of the EDS
// clusters that changed (a new TLS context, protocol or timeout) while
// their endpoints did not: Envoy warms a changed cluster again and waits
// for its load assignment, which a state-of-the-world stream sends only
// when its version changes (the LinearCache gives the assignment set
// again a new version). Without it the new cluster would wait for the
// initial fetch timeout, the old one serving meanwhile.
func rewarm(clusters, endpoints typeDiff, r *translate.Resources) typeDiff {
	if len(clusters.changed) == 0 {
		return endpoints
	}
	have := make(map[string]bool, len(endpoints.changed))
	for _, e := range endpoints.changed {
		have[cachev3.GetResourceName(e)] = true
	}
	var want map[string]bool
	for _, res := range clusters.changed {
		cl, ok := res.(*clusterv3.Cluster)
		if !ok || cl.GetEdsClusterConfig() == nil {
			continue
		}
		name := cl.GetEdsClusterConfig().GetServiceName()
		if name == "" {
			name = cl.GetName()
		}
		if !have[name] {
			if want == nil {
				want = map[string]bool{}
			}
			want[name] = true
		}
	}
	if want == nil {
		return endpoints
	}
	out := typeDiff{changed: slices.Clone(endpoints.changed), removed: endpoints.removed}
	for _, e := range r.Endpoints {
		if want[cachev3.GetResourceName(e)] {
			out.changed = append(out.changed, e)
		}
	}
	return out
}
