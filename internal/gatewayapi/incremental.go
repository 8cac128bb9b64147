package gatewayapi

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/proxyspec"
	"github.com/portico-dev/portico/internal/resource"
)

// Incremental translates successive snapshots of the same world, doing
// again only what the changes since the previous snapshot require. Its
// results are exactly those of Translate (see the caveat on status-only
// updates of resource.Snapshot.Changes).
//
// It keeps an index of the last snapshot (routes by parent, ListenerSets by
// Gateway, Gateways by class, Gateways by the Services of their clusters)
// and a dependency index: what every Gateway and route read from the
// snapshot (Services, Secrets, ReferenceGrants, Namespaces, ProxyConfigs,
// Deployments), including objects that did not exist, as package inputs'
// accessors record it (the semantics read nothing else). A change then
// selects the Gateways to translate again:
//
//   - a Gateway, or a ListenerSet (its old and new parent Gateway);
//   - a route: the Gateways it named and names;
//   - a GatewayClass: the Gateways of that class;
//   - an object read by a Gateway (or its class): that Gateway;
//   - an object read by a route: the route, compiled again, and its
//     Gateways.
//
// Those Gateways are translated again with every route attached to them
// (closed over the other parents of those routes), reusing the compiled
// rules of unchanged routes, the endpoints of unchanged Services and the
// virtual hosts whose routes did not change. The statuses, IR and
// infrastructure specs of other objects are kept: the new StatusSet is the
// previous one with the statuses translated again replaced, sharing the
// rest (O(changed statuses · log n), not a copy).
//
// Two cheaper paths handle the most frequent changes:
//
//   - routes only (ModeRoutes, see fastpath.go): the Gateways the changed
//     routes name keep their translated listeners and the other routes
//     attached to them; only the changed routes are compiled and attached
//     again, and only their statuses, those of their Gateways and
//     ListenerSets, and the virtual hosts their hostnames cover, are
//     computed again;
//   - EndpointSlices only (ModeEndpoints): the endpoints of the clusters
//     of the Services they belong to are computed again, in the IR of the
//     Gateways that have such clusters, and nothing else: statuses do not
//     depend on endpoints.
//
// An Incremental is not safe for concurrent use. A translation that panics
// leaves it invalid: the next translation is a full one.
type Incremental struct {
	snap  *resource.Snapshot
	opts  Options
	res   *Result
	idx   *index
	rec   *recorder
	memo  *memo
	valid bool
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

// Stats describe one translation of an Incremental.
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

// NewIncremental returns an Incremental whose first translation is full.
func NewIncremental() *Incremental { return &Incremental{} }

// memo holds what translations computed that later ones may reuse.
type memo struct {
	// compiled rules of routes, valid until the route or something it
	// read changes.
	compiled map[resource.Ref]*compiledMemo
	// endpoints of clusters by name, valid until their Service or its
	// EndpointSlices change; svcClusters lists the clusters of a Service.
	endpoints   map[string][]ir.Endpoint
	svcClusters map[resource.Key]set[string]
	// irs are what each Gateway's last IR was built from.
	irs map[resource.Key]*irMemo
	// The translated states of the Gateways of ours, their ListenerSets
	// and the routes, for the route path (see fastpath.go).
	gateways map[resource.Key]*gatewayState
	sets     map[resource.Key]*listenerSetState
	routes   map[resource.Ref]*routeState
}

func newMemo() *memo {
	return &memo{
		compiled:    map[resource.Ref]*compiledMemo{},
		endpoints:   map[string][]ir.Endpoint{},
		svcClusters: map[resource.Key]set[string]{},
		irs:         map[resource.Key]*irMemo{},
	}
}

// endpointsOf returns the memoized endpoints of a cluster, computed from
// the EndpointSlices slicesOf returns when not memoized.
func (m *memo) endpointsOf(slicesOf func(resource.Key) []*discoveryv1.EndpointSlice, def *clusterDef) []ir.Endpoint {
	return m.clusterEndpoints(slicesOf, def.name, def.svc, def.port.Name)
}

func (m *memo) clusterEndpoints(slicesOf func(resource.Key) []*discoveryv1.EndpointSlice, cluster string, svc resource.Key, portName string) []ir.Endpoint {
	if e, ok := m.endpoints[cluster]; ok {
		return e
	}
	e := clusterEndpoints(slicesOf(svc), portName)
	m.endpoints[cluster] = e
	s := m.svcClusters[svc]
	if s == nil {
		s = set[string]{}
		m.svcClusters[svc] = s
	}
	s.add(cluster)
	return e
}

// forgetService drops the endpoints of a Service's clusters.
func (m *memo) forgetService(svc resource.Key) {
	for c := range m.svcClusters[svc] {
		delete(m.endpoints, c)
	}
	delete(m.svcClusters, svc)
}

// Translate translates snap, reusing the previous translation where the
// changes since the previous snapshot allow. The changes are snap.Changes
// when they are relative to the previous snapshot, else resource.Diff of
// the two snapshots. The Result must not be modified.
func (x *Incremental) Translate(snap *resource.Snapshot, opts Options) (*Result, Stats) {
	if snap == nil {
		x.valid = false
		return &Result{}, Stats{Mode: ModeFull, StatusesChanged: true, InfraChanged: true}
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
func (x *Incremental) changes(snap *resource.Snapshot, opts Options) *resource.Changes {
	if !x.valid || x.snap == nil || opts.ControllerName != x.opts.ControllerName || opts.Infrastructure != x.opts.Infrastructure || opts.MaxRouteExpansion != x.opts.MaxRouteExpansion || opts.MaxGatewayExpansion != x.opts.MaxGatewayExpansion {
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

func (x *Incremental) full(snap *resource.Snapshot, opts Options) *Result {
	x.valid = false
	x.idx, x.rec, x.memo = newIndex(), newRecorder(), newMemo()
	x.idx.build(snap)
	t := newTranslator(snap, opts, x.rec)
	t.memo = x.memo
	res := t.run(&Result{})
	res.StatusSet = NewStatusSet(t.statuses)
	x.saveStates(t, nil, nil, nil)
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

func (x *Incremental) incremental(snap *resource.Snapshot, opts Options, ch *resource.Changes) (*Result, Stats) {
	x.valid = false // until done: a panic leaves it invalid
	a := x.classify(snap, ch)
	for svc := range a.endpoints {
		x.memo.forgetService(svc)
	}
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
	x.snap, x.opts, x.res, x.valid = snap, opts, res, true
	return res, st
}

// classify updates the indexes for the changes and says what to do again.
func (x *Incremental) classify(snap *resource.Snapshot, ch *resource.Changes) *affected {
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
		switch c.Kind {
		case resource.KindEndpointSlice:
		case resource.KindHTTPRoute, resource.KindGRPCRoute:
			routes++
		default:
			others++
		}
		if c.Kind != resource.KindEndpointSlice {
			a.onlyEndpoints = false
		}
		switch c.Kind {
		case resource.KindGatewayClass:
			for g := range x.idx.classGateways[c.Key.Name] {
				a.gateways.add(g)
			}
		case resource.KindGateway:
			a.gateways.add(c.Key)
			x.idx.updateGateway(snap, c.Key)
		case resource.KindListenerSet:
			if g, ok := x.idx.setParent[c.Key]; ok {
				a.gateways.add(g)
			}
			x.idx.updateSet(snap, c.Key)
			if g, ok := x.idx.setParent[c.Key]; ok {
				a.gateways.add(g)
			}
			a.sets.add(c.Key)
		case resource.KindHTTPRoute, resource.KindGRPCRoute:
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
		case resource.KindReferenceGrant:
			users(resource.Ref{Kind: resource.KindReferenceGrant, Key: resource.Key{Namespace: c.Key.Namespace}})
		case resource.KindService:
			users(c)
			a.endpoints.add(c.Key)
		case resource.KindEndpointSlice:
			for _, es := range []*discoveryv1.EndpointSlice{x.snap.EndpointSlices.Value(c.Key), snap.EndpointSlices.Value(c.Key)} {
				if es != nil && es.Labels[discoveryv1.LabelServiceName] != "" {
					a.endpoints.add(resource.Key{Namespace: es.Namespace, Name: es.Labels[discoveryv1.LabelServiceName]})
				}
			}
		default: // Secrets, Namespaces, ProxyConfigs, Deployments
			users(c)
		}
	}
	a.onlyRoutes = routes > 0 && others == 0
	return a
}

// retranslate translates again the affected Gateways and routes, closed
// over the parents of those routes, and merges the result with the
// previous one.
func (x *Incremental) retranslate(snap *resource.Snapshot, opts Options, a *affected, st Stats) (*Result, Stats) {
	for r := range a.compile {
		delete(x.memo.compiled, r)
		x.rec.forget(r)
	}
	// Close over routes: the Gateways' routes, and the routes' Gateways.
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
		before := make([]resource.Ref, 0)
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

	sc := &scope{gateways: sortedKeys(a.gateways)}
	setScope := set[resource.Key]{}
	for k := range a.sets {
		setScope.add(k)
	}
	for _, g := range sc.gateways {
		x.rec.forget(gatewayRef(g))
		for s := range x.idx.setsByGateway[g] {
			setScope.add(s)
		}
	}
	for s := range setScope {
		if p, ok := x.idx.setParent[s]; ok && hasKey(a.gateways, p) {
			sc.sets = append(sc.sets, s)
		}
	}
	slices.SortFunc(sc.sets, resource.CompareKeys)
	for r := range a.routes {
		if r.Kind == resource.KindHTTPRoute {
			sc.httpRoutes = append(sc.httpRoutes, r.Key)
		} else {
			sc.grpcRoutes = append(sc.grpcRoutes, r.Key)
		}
	}
	slices.SortFunc(sc.httpRoutes, resource.CompareKeys)
	slices.SortFunc(sc.grpcRoutes, resource.CompareKeys)

	t := newTranslator(snap, opts, x.rec)
	t.scope, t.memo, t.dirtyServices = sc, x.memo, a.endpoints
	compiledBefore := len(x.memo.compiled)
	part := t.run(&Result{})
	st.Compiled = len(x.memo.compiled) - compiledBefore
	st.Gateways, st.Routes = len(a.gateways), len(a.routes)
	st.StatusesChanged, st.InfraChanged = true, true

	x.saveStates(t, a.gateways, setScope, a.routes)

	scope := make([]statusKey, 0, len(a.gateways)+len(setScope)+len(a.routes)+4)
	for st := range x.res.StatusSet.ofKind(resource.KindGatewayClass) {
		scope = append(scope, keyOfStatus(st))
	}
	for i := range t.statuses {
		if st := &t.statuses[i]; st.Kind == resource.KindGatewayClass {
			scope = append(scope, keyOfStatus(st))
		}
	}
	for g := range a.gateways {
		scope = append(scope, statusKey{resource.KindGateway, g})
	}
	for s := range setScope {
		scope = append(scope, statusKey{resource.KindListenerSet, s})
	}
	for r := range a.routes {
		kind := resource.KindHTTPRoute
		if r.Kind == resource.KindGRPCRoute {
			kind = resource.KindGRPCRoute
		}
		scope = append(scope, statusKey{kind, r.Key})
	}
	return x.merge(part, t.statuses, slices.Compact(sortedStatusKeys(scope)), a.gateways), st
}

func sortedStatusKeys(s []statusKey) []statusKey {
	slices.SortFunc(s, compareStatusKeys)
	return s
}

func mergeInfra(prev, part []proxyspec.Spec, gateways set[resource.Key]) []proxyspec.Spec {
	return mergeSorted(prev, part, func(s *proxyspec.Spec) bool {
		return hasKey(gateways, resource.Key{Namespace: s.Gateway.Namespace, Name: s.Gateway.Name})
	}, func(a, b *proxyspec.Spec) int {
		return compareNames(a.Gateway.Namespace, a.Gateway.Name, b.Gateway.Namespace, b.Gateway.Name)
	})
}

// patchEndpoints updates the endpoints of the clusters of the Services in
// a.endpoints, in the IR of Gateways not translated again.
func (x *Incremental) patchEndpoints(snap *resource.Snapshot, res *Result, a *affected) (*Result, int) {
	targets := set[resource.Key]{}
	for svc := range a.endpoints {
		for g := range x.idx.serviceGateways[svc] {
			if !hasKey(a.gateways, g) {
				targets.add(g)
			}
		}
	}
	if len(targets) == 0 {
		return res, 0
	}
	var gws []*ir.Gateway
	n := 0
	for i, gw := range res.Gateways {
		if !hasKey(targets, resource.Key{Namespace: gw.Namespace, Name: gw.Name}) {
			continue
		}
		p := x.patchGateway(snap, gw, a.endpoints)
		if p == gw {
			continue
		}
		if gws == nil {
			gws = slices.Clone(res.Gateways)
		}
		gws[i] = p
		n++
	}
	if gws == nil {
		return res, 0
	}
	out := *res
	out.Gateways = gws
	return &out, n
}

// patchGateway returns gw with the endpoints of the clusters of svcs
// computed again, or gw itself when they did not change.
func (x *Incremental) patchGateway(snap *resource.Snapshot, gw *ir.Gateway, svcs set[resource.Key]) *ir.Gateway {
	var clusters []*ir.Cluster
	// The clusters of a Service, named "<ns>/<name>/<port>", are adjacent
	// in the sorted list: found by binary search.
	var idx []int
	for svc := range svcs {
		prefix := svc.Namespace + "/" + svc.Name + "/"
		i, _ := slices.BinarySearchFunc(gw.Clusters, prefix, func(c *ir.Cluster, p string) int { return strings.Compare(c.Name, p) })
		for ; i < len(gw.Clusters) && strings.HasPrefix(gw.Clusters[i].Name, prefix); i++ {
			if c := gw.Clusters[i]; c.ServiceNamespace == svc.Namespace && c.ServiceName == svc.Name {
				idx = append(idx, i)
			}
		}
	}
	for _, i := range idx {
		c := gw.Clusters[i]
		svc := resource.Key{Namespace: c.ServiceNamespace, Name: c.ServiceName}
		eps := x.memo.clusterEndpoints(snap.EndpointSlicesFor, c.Name, svc, servicePortName(snap.Services.Value(svc), c.ServicePort))
		if slices.Equal(eps, c.Endpoints) {
			continue
		}
		if clusters == nil {
			clusters = slices.Clone(gw.Clusters)
		}
		nc := *c
		nc.Endpoints = eps
		clusters[i] = &nc
	}
	if clusters == nil {
		return gw
	}
	out := *gw
	out.Clusters = clusters
	if m := x.memo.irs[resource.Key{Namespace: gw.Namespace, Name: gw.Name}]; m != nil {
		m.clusters = clusters
	}
	return &out
}

// servicePortName is the name of the TCP port of a Service a cluster
// uses, as resolveBackend finds it.
func servicePortName(svc *corev1.Service, port int32) string {
	if svc == nil {
		return ""
	}
	for _, p := range svc.Spec.Ports {
		if p.Port == port && (p.Protocol == "" || p.Protocol == corev1.ProtocolTCP) {
			return p.Name
		}
	}
	return ""
}

// servicesOf lists the Services of a Gateway's clusters.
func servicesOf(gw *ir.Gateway) []resource.Key {
	out := make([]resource.Key, 0, len(gw.Clusters))
	for _, c := range gw.Clusters {
		k := resource.Key{Namespace: c.ServiceNamespace, Name: c.ServiceName}
		if len(out) == 0 || out[len(out)-1] != k {
			out = append(out, k)
		}
	}
	return out
}

func hasKey[K comparable](s set[K], k K) bool {
	_, ok := s[k]
	return ok
}

func compareNames(nsa, na, nsb, nb string) int {
	if c := strings.Compare(nsa, nsb); c != 0 {
		return c
	}
	return strings.Compare(na, nb)
}

func compareStatuses(a, b *Status) int {
	if c := strings.Compare(a.Kind.String(), b.Kind.String()); c != 0 {
		return c
	}
	return compareNames(a.Namespace, a.Name, b.Namespace, b.Name)
}

// mergeSorted merges prev, without its elements in scope, with part, both
// sorted by cmp, into a new sorted slice.
func mergeSorted[T any](prev, part []T, inScope func(*T) bool, cmp func(a, b *T) int) []T {
	out := make([]T, 0, len(prev)+len(part))
	j := 0
	for i := range prev {
		if inScope(&prev[i]) {
			continue
		}
		for j < len(part) && cmp(&part[j], &prev[i]) < 0 {
			out = append(out, part[j])
			j++
		}
		out = append(out, prev[i])
	}
	out = append(out, part[j:]...)
	if len(out) == 0 {
		return nil // as a full translation gives
	}
	return out
}
