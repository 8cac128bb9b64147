// Package incremental is the incremental engine: it translates successive
// snapshots of the same world, doing again only what the changes since the
// previous snapshot require, by calling the Gateway API semantics (package
// gatewayapi's TranslateScope, Reattach and PatchEndpoints) on the part of
// the world that changed. Its results are exactly those of
// gatewayapi.Translate (see the caveat on status-only updates of
// resource.Snapshot.Changes); the differential test checks it on random
// edits. The semantics know nothing of it: what it owns is the choice of
// what to translate again, the invalidation of what it lets translations
// reuse, and the merge of their partial results.
//
// It keeps an index of the last snapshot (routes by parent, ListenerSets by
// Gateway, Gateways by class, Gateways by the Services of their clusters;
// index.go) and a dependency index (deps.go): what every Gateway and route
// read from the snapshot (Services, Secrets, ReferenceGrants, Namespaces,
// ProxyConfigs, Deployments, BackendTLSPolicies by namespace, CA
// ConfigMaps and ClusterTrustBundles), including objects that did not exist, as
// package inputs' accessors record it (the semantics read nothing else). A
// change then selects the Gateways to translate again:
//
//   - a Gateway, or a ListenerSet (its old and new parent Gateway);
//   - a route: the Gateways it named and names;
//   - a GatewayClass: the Gateways of that class;
//   - an object read by a Gateway (or its class): that Gateway;
//   - an object read by a route: the route, compiled again, and its
//     Gateways.
//
// Those Gateways are translated again (TranslateScope) with every route
// attached to them (closed over the other parents of those routes),
// reusing through the cache (cache.go) the compiled rules of unchanged
// routes, the endpoints of unchanged Services and the virtual hosts whose
// routes did not change. The statuses, IR and infrastructure specs of other
// objects are kept (merge.go): the new StatusSet is the previous one with
// the statuses translated again replaced, sharing the rest (O(changed
// statuses · log n), not a copy).
//
// Two cheaper paths handle the most frequent changes:
//
//   - routes only (ModeRoutes, routes.go): the Gateways the changed routes
//     name keep their translated states and gatewayapi.Reattach attaches
//     the changed routes again; only their statuses, those of their
//     Gateways and ListenerSets, and the virtual hosts their hostnames
//     cover, are computed again;
//   - EndpointSlices only (ModeEndpoints): the endpoints of the clusters
//     of the Services they belong to are computed again
//     (gatewayapi.PatchEndpoints), in the IR of the Gateways that have
//     such clusters, and nothing else: statuses do not depend on
//     endpoints.
//
// Route kinds are handled alike: the engine knows them as
// resource.RouteKinds and reads their parents through the snapshot.
package incremental

import (
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/resource"
)

// Translator translates successive snapshots incrementally. It is not safe
// for concurrent use. A translation that panics leaves it invalid: the
// next translation is a full one.
type Translator struct {
	snap   *resource.Snapshot
	opts   gatewayapi.Options
	res    *gatewayapi.Result
	idx    *index
	rec    *recorder
	cache  *cache
	states *gatewayapi.States
	valid  bool
}

// Mode says how a translation was done.
type Mode string

const (
	// ModeFull translated the whole snapshot.
	ModeFull Mode = "full"
	// ModeIncremental translated the Gateways the changes affect.
	ModeIncremental Mode = "incremental"
	// ModeRoutes translated changed routes only, reusing the state of
	// their Gateways.
	ModeRoutes Mode = "routes"
	// ModeEndpoints updated the endpoints of clusters only.
	ModeEndpoints Mode = "endpoints"
	// ModeUnchanged found no change.
	ModeUnchanged Mode = "unchanged"
)

// Stats describe one translation of a Translator.
type Stats struct {
	Mode Mode
	// Changes is the number of changed objects (0 for a full translation).
	Changes int
	// Gateways is the number of Gateways whose IR was computed again (or
	// whose endpoints were updated); Routes the number of routes attached
	// again, Compiled of those compiled again.
	Gateways, Routes, Compiled int
	// StatusesChanged is false when Result.StatusSet is that of the
	// previous result (nothing to publish); likewise InfraChanged.
	StatusesChanged, InfraChanged bool
}

// New returns a Translator whose first translation is full.
func New() *Translator { return &Translator{} }

// Translate translates snap, reusing the previous translation where the
// changes since the previous snapshot allow. The changes are snap.Changes
// when they are relative to the previous snapshot, else resource.Diff of
// the two snapshots. The Result must not be modified.
func (x *Translator) Translate(snap *resource.Snapshot, opts gatewayapi.Options) (*gatewayapi.Result, Stats) {
	if snap == nil {
		x.valid = false
		return &gatewayapi.Result{}, Stats{Mode: ModeFull, StatusesChanged: true, InfraChanged: true}
	}
	ch := x.changes(snap, opts)
	switch {
	case ch == nil || ch.Len() > snap.Len()/2+10:
		// Unknown changes, or so many (a file provider reads every object
		// again) that a full translation is cheaper.
		return x.full(snap, opts), Stats{Mode: ModeFull, StatusesChanged: true, InfraChanged: true}
	case ch.Len() == 0:
		x.snap = snap
		return x.res, Stats{Mode: ModeUnchanged}
	}
	return x.incremental(snap, opts, ch)
}

// changes returns the changes since the previous snapshot, or nil when a
// full translation is needed.
func (x *Translator) changes(snap *resource.Snapshot, opts gatewayapi.Options) *resource.Changes {
	if !x.valid || x.snap == nil || opts != x.opts {
		return nil
	}
	if snap == x.snap {
		return resource.NewChanges(snap.ID())
	}
	if c := snap.Changes; c != nil && c.Since == x.snap.ID() {
		return c
	}
	return resource.Diff(x.snap, snap)
}

func (x *Translator) full(snap *resource.Snapshot, opts gatewayapi.Options) *gatewayapi.Result {
	x.valid = false
	x.idx, x.rec = newIndex(), newRecorder()
	x.cache = newCache(x.rec)
	x.idx.build(snap)
	p := gatewayapi.TranslateScope(snap, opts, nil, x.cache, x.rec)
	res := gatewayapi.WithPolicyStatuses(snap, opts, &gatewayapi.Result{Gateways: p.Gateways, Infra: p.Infra, StatusSet: gatewayapi.NewStatusSet(p.Statuses)})
	x.states = p.States
	for _, gw := range res.Gateways {
		x.idx.setServices(resource.Key{Namespace: gw.Namespace, Name: gw.Name}, servicesOf(gw))
	}
	x.snap, x.opts, x.res, x.valid = snap, opts, res, true
	return res
}

// affected collects what a set of changes requires to do again.
type affected struct {
	gateways  set[resource.Key] // Gateways to translate again
	routes    set[resource.Ref] // routes to translate again
	compile   set[resource.Ref] // routes to compile again
	sets      set[resource.Key] // changed ListenerSets
	endpoints set[resource.Key] // Services whose endpoints may have changed
	// onlyEndpoints: every change is of an EndpointSlice; onlyRoutes:
	// every change is of a route or EndpointSlice, and one of a route.
	onlyEndpoints, onlyRoutes bool
}

func (x *Translator) incremental(snap *resource.Snapshot, opts gatewayapi.Options, ch *resource.Changes) (*gatewayapi.Result, Stats) {
	x.valid = false // until done: a panic leaves it invalid
	a := x.classify(snap, ch)
	for svc := range a.endpoints {
		x.cache.forgetService(svc)
	}
	x.cache.changed = a.endpoints
	defer func() { x.cache.changed = nil }()
	st := Stats{Mode: ModeIncremental, Changes: ch.Len()}
	res := x.res
	switch {
	case a.onlyEndpoints:
		st.Mode = ModeEndpoints
	case a.onlyRoutes:
		var ok bool
		if res, st, ok = x.routesOnly(snap, opts, a, st); ok {
			st.Mode = ModeRoutes
			break
		}
		res, st = x.retranslate(snap, opts, a, st)
	default:
		res, st = x.retranslate(snap, opts, a, st)
	}
	var patched int
	res, patched = x.patchEndpoints(snap, res, a)
	st.Gateways += patched
	if !a.onlyEndpoints {
		// The policies' statuses follow the merged IR (their ancestors
		// are the Gateways of the clusters they apply to).
		if r := gatewayapi.WithPolicyStatuses(snap, opts, res); r != res {
			res, st.StatusesChanged = r, true
		}
	}
	x.snap, x.opts, x.res, x.valid = snap, opts, res, true
	return res, st
}

// classify updates the indexes for the changes and says what to do again.
func (x *Translator) classify(snap *resource.Snapshot, ch *resource.Changes) *affected {
	a := &affected{
		gateways: set[resource.Key]{}, routes: set[resource.Ref]{}, compile: set[resource.Ref]{},
		sets: set[resource.Key]{}, endpoints: set[resource.Key]{}, onlyEndpoints: true,
	}
	users := func(ref resource.Ref) {
		for o := range x.rec.usersOf(ref) {
			switch o.Kind {
			case resource.KindGateway:
				a.gateways.add(o.Key)
			case resource.KindGatewayClass:
				for g := range x.idx.classGateways[o.Key.Name] {
					a.gateways.add(g)
				}
			default:
				a.routes.add(o)
				a.compile.add(o)
			}
		}
	}
	routes, others := 0, 0
	for c := range ch.Objects {
		switch {
		case c.Kind == resource.KindEndpointSlice:
		case c.Kind.IsRoute():
			routes++
			a.onlyEndpoints = false
		default:
			others++
			a.onlyEndpoints = false
		}
		switch {
		case c.Kind == resource.KindGatewayClass:
			for g := range x.idx.classGateways[c.Key.Name] {
				a.gateways.add(g)
			}
		case c.Kind == resource.KindGateway:
			a.gateways.add(c.Key)
			x.idx.updateGateway(snap, c.Key)
		case c.Kind == resource.KindListenerSet:
			if g, ok := x.idx.setParent[c.Key]; ok {
				a.gateways.add(g)
			}
			x.idx.updateSet(snap, c.Key)
			if g, ok := x.idx.setParent[c.Key]; ok {
				a.gateways.add(g)
			}
			a.sets.add(c.Key)
		case c.Kind.IsRoute():
			for _, p := range x.idx.routeParents[c] {
				if g, ok := x.idx.gatewayOf(p); ok {
					a.gateways.add(g)
				}
			}
			x.idx.updateRoute(snap, c)
			for _, p := range x.idx.routeParents[c] {
				if g, ok := x.idx.gatewayOf(p); ok {
					a.gateways.add(g)
				}
			}
			a.routes.add(c)
			a.compile.add(c)
		case c.Kind == resource.KindReferenceGrant:
			users(resource.Ref{Kind: resource.KindReferenceGrant, Key: resource.Key{Namespace: c.Key.Namespace}})
		case c.Kind == resource.KindBackendTLSPolicy:
			// Read by the Service's namespace (inputs.BackendTLSPolicies).
			users(resource.Ref{Kind: resource.KindBackendTLSPolicy, Key: resource.Key{Namespace: c.Key.Namespace}})
		case c.Kind == resource.KindService:
			users(c)
			a.endpoints.add(c.Key)
		case c.Kind == resource.KindEndpointSlice:
			for _, es := range []*discoveryv1.EndpointSlice{x.snap.EndpointSlices.Value(c.Key), snap.EndpointSlices.Value(c.Key)} {
				if es != nil && es.Labels[discoveryv1.LabelServiceName] != "" {
					a.endpoints.add(resource.Key{Namespace: es.Namespace, Name: es.Labels[discoveryv1.LabelServiceName]})
				}
			}
		default: // Secrets, Namespaces, ProxyConfigs, Deployments, ConfigMaps, ClusterTrustBundles
			users(c)
		}
	}
	a.onlyRoutes = routes > 0 && others == 0
	return a
}

// retranslate translates again the affected Gateways and routes, closed
// over the parents of those routes, and merges the result with the
// previous one.
func (x *Translator) retranslate(snap *resource.Snapshot, opts gatewayapi.Options, a *affected, st Stats) (*gatewayapi.Result, Stats) {
	for r := range a.compile {
		x.cache.forgetRoute(r)
	}
	x.close(a)

	sc := &gatewayapi.Scope{Gateways: sortedKeys(a.gateways)}
	setScope := set[resource.Key]{}
	for k := range a.sets {
		setScope.add(k)
	}
	for _, g := range sc.Gateways {
		x.rec.forget(gatewayRef(g))
		for s := range x.idx.setsByGateway[g] {
			setScope.add(s)
		}
	}
	for s := range setScope {
		if p, ok := x.idx.setParent[s]; ok && hasKey(a.gateways, p) {
			sc.ListenerSets = append(sc.ListenerSets, s)
		}
	}
	slices.SortFunc(sc.ListenerSets, resource.CompareKeys)
	for r := range a.routes {
		sc.Routes = append(sc.Routes, r)
	}
	slices.SortFunc(sc.Routes, gatewayapi.CompareRouteRefs)

	x.cache.kept = 0
	p := gatewayapi.TranslateScope(snap, opts, sc, x.cache, x.rec)
	st.Compiled = x.cache.kept
	st.Gateways, st.Routes = len(a.gateways), len(a.routes)
	st.StatusesChanged, st.InfraChanged = true, true

	setList := sortedKeys(setScope)
	x.states.Replace(p.States, sc.Gateways, setList, sc.Routes)

	scope := make([]gatewayapi.StatusKey, 0, len(a.gateways)+len(setScope)+len(a.routes)+4)
	for s := range x.res.StatusSet.OfKind(resource.KindGatewayClass) {
		scope = append(scope, gatewayapi.KeyOf(s))
	}
	for i := range p.Statuses {
		if s := &p.Statuses[i]; s.Kind == resource.KindGatewayClass {
			scope = append(scope, gatewayapi.KeyOf(s))
		}
	}
	for _, g := range sc.Gateways {
		scope = append(scope, gatewayapi.StatusKey{Kind: resource.KindGateway, Key: g})
	}
	for _, s := range setList {
		scope = append(scope, gatewayapi.StatusKey{Kind: resource.KindListenerSet, Key: s})
	}
	for _, r := range sc.Routes {
		scope = append(scope, gatewayapi.StatusKey{Kind: r.Kind, Key: r.Key})
	}
	return x.merge(p, scope, a.gateways), st
}

// close closes the affected Gateways and routes over attachment: the
// routes of every affected Gateway, and the Gateways of every such route.
func (x *Translator) close(a *affected) {
	queue := make([]resource.Key, 0, len(a.gateways))
	for g := range a.gateways {
		queue = append(queue, g)
	}
	for r := range a.routes {
		for _, p := range x.idx.routeParents[r] {
			if g, ok := x.idx.gatewayOf(p); ok && !hasKey(a.gateways, g) {
				a.gateways.add(g)
				queue = append(queue, g)
			}
		}
	}
	for len(queue) > 0 {
		g := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		var before []resource.Ref
		added := set[resource.Ref]{}
		x.idx.routesOf(g, added)
		for r := range added {
			if _, ok := a.routes[r]; !ok {
				a.routes.add(r)
				before = append(before, r)
			}
		}
		for _, r := range before {
			for _, p := range x.idx.routeParents[r] {
				if g2, ok := x.idx.gatewayOf(p); ok && !hasKey(a.gateways, g2) {
					a.gateways.add(g2)
					queue = append(queue, g2)
				}
			}
		}
	}
}

func hasKey[K comparable](s set[K], k K) bool {
	_, ok := s[k]
	return ok
}
