package gatewayapi

import (
	"slices"
	"strings"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/resource"
)

// The route path: when only routes changed, the Gateways they name keep
// their translated state (listeners, ListenerSets, the routes attached to
// them) from the previous translation; the changed routes are detached
// from their listeners, compiled and attached again, and only the statuses
// of those routes and of their Gateways and ListenerSets, and the IR of
// those Gateways, are computed again (the IR reusing the virtual hosts
// whose routes did not change). Unchanged routes are not looked at, even
// those attached to the same Gateways: nothing they depend on changed.
//
// Not handled (the incremental path does it): a listener holding both
// HTTPRoutes and GRPCRoutes, whose routes may take hostnames from each
// other.

// saveStates keeps the states a translation computed for the next route
// path: those of the Gateways, ListenerSets and routes in scope (all of
// them when gateways, sets and routes are nil).
func (x *Incremental) saveStates(t *translator, gateways, sets set[resource.Key], routes set[resource.Ref]) {
	m := x.memo
	if gateways == nil {
		m.gateways = make(map[resource.Key]*gatewayState, len(t.gateways))
		m.sets = make(map[resource.Key]*listenerSetState, len(t.sets))
		m.routes = make(map[resource.Ref]*routeState, len(t.routes))
	} else {
		for g := range gateways {
			delete(m.gateways, g)
		}
		for s := range sets {
			delete(m.sets, s)
		}
		for r := range routes {
			delete(m.routes, r)
		}
	}
	for k, g := range t.gateways {
		m.gateways[k] = g
	}
	for _, s := range t.sets {
		m.sets[resource.Key{Namespace: s.obj.Namespace, Name: s.obj.Name}] = s
	}
	for _, rs := range t.routes {
		m.routes[rs.ref()] = rs
	}
}

func (rs *routeState) ref() resource.Ref {
	kind := resource.KindHTTPRoute
	if rs.kind == resource.KindGRPCRoute {
		kind = resource.KindGRPCRoute
	}
	return resource.Ref{Kind: kind, Key: resource.Key{Namespace: rs.meta.Namespace, Name: rs.meta.Name}}
}

// routesOnly translates changes of routes only by the route path. It
// returns false, having changed nothing but caches, when the path does not
// apply.
func (x *Incremental) routesOnly(snap *resource.Snapshot, opts Options, a *affected, st Stats) (*Result, Stats, bool) {
	m := x.memo
	if m.gateways == nil {
		return nil, st, false
	}
	t := newTranslator(snap, opts, x.rec)
	t.memo, t.dirtyServices = x.memo, a.endpoints
	for g := range a.gateways {
		if gs := m.gateways[g]; gs != nil {
			t.gateways[g] = gs
			t.gwOrder = append(t.gwOrder, gs)
		}
	}
	slices.SortFunc(t.gwOrder, func(a, b *gatewayState) int { return resource.CompareKeys(a.key(), b.key()) })
	for _, g := range t.gwOrder {
		for _, k := range sortedKeys(x.idx.setsByGateway[g.key()]) {
			if s := m.sets[k]; s != nil {
				t.sets = append(t.sets, s)
			}
		}
	}
	slices.SortFunc(t.sets, func(a, b *listenerSetState) int {
		return compareNames(a.obj.Namespace, a.obj.Name, b.obj.Namespace, b.obj.Name)
	})

	// The changed routes, as they are now.
	changed := make([]resource.Ref, 0, len(a.routes))
	for r := range a.routes {
		changed = append(changed, r)
	}
	slices.SortFunc(changed, compareRouteRefs)
	old := set[*routeState]{}
	for _, r := range changed {
		if rs := m.routes[r]; rs != nil {
			old.add(rs)
		}
		delete(m.compiled, r)
		x.rec.forget(r)
	}
	for _, r := range changed {
		var rs *routeState
		switch r.Kind {
		case resource.KindHTTPRoute:
			hr := snap.HTTPRoutes.Value(r.Key)
			if hr == nil {
				continue
			}
			rs = newRouteState(resource.KindHTTPRoute, &hr.ObjectMeta, hr.Spec.CommonRouteSpec)
			t.compile(rs, r, hr.Spec.Hostnames, func() { t.compileHTTPRoute(rs, hr.Spec.Rules) })
		case resource.KindGRPCRoute:
			gr := snap.GRPCRoutes.Value(r.Key)
			if gr == nil {
				continue
			}
			rs = newRouteState(resource.KindGRPCRoute, &gr.ObjectMeta, gr.Spec.CommonRouteSpec)
			t.compile(rs, r, gr.Spec.Hostnames, func() { t.compileGRPCRoute(rs, gr.Spec.Rules) })
		}
		t.attach(rs)
		t.routes = append(t.routes, rs)
	}

	// The listeners whose attachments change, with their new attachments
	// in translation order (routes sorted, then parents in order).
	added := map[*listener][]*attachment{}
	var touched []*listener
	touch := func(l *listener) {
		if _, ok := added[l]; !ok {
			added[l] = nil
			touched = append(touched, l)
		}
	}
	for rs := range old {
		for _, ps := range rs.parents {
			for _, at := range ps.atts {
				touch(at.listener)
			}
		}
	}
	for _, rs := range t.routes {
		for i, ps := range rs.parents {
			for _, at := range ps.atts {
				at.parent = i
				touch(at.listener)
				added[at.listener] = append(added[at.listener], at)
			}
		}
	}
	for _, l := range touched {
		if mixedKinds(l, old, added[l]) {
			return nil, st, false
		}
	}
	// A Gateway budget binds across routes: whenever it could, the
	// Gateway is retranslated as a whole instead.
	if !t.fastPathWithinBudgets(old) {
		return nil, st, false
	}

	// From here on the saved states change.
	t.dirtyHosts = make(map[*listener][]string, len(touched))
	for _, l := range touched {
		hosts := []string{}
		for _, at := range added[l] {
			hosts = append(hosts, at.hostnames...)
		}
		for rs := range old {
			for _, ps := range rs.parents {
				for _, at := range ps.atts {
					if at.listener == l {
						hosts = append(hosts, at.hostnames...)
					}
				}
			}
		}
		t.dirtyHosts[l] = hosts
	}
	for _, l := range touched {
		replaceAttachments(l, old, added[l])
		l.routes, l.lastRoute = 0, nil
		for _, at := range l.attachments {
			if at.route != l.lastRoute {
				l.lastRoute = at.route
				l.routes++
			}
		}
	}
	t.routeStatuses()
	t.gatewayStatuses()
	part := &Result{}
	part.Gateways = t.buildIR()
	part.Infra = t.infraSpecs(part.Gateways)
	sortStatuses(t.statuses)

	for _, r := range changed {
		delete(m.routes, r)
	}
	for _, rs := range t.routes {
		m.routes[rs.ref()] = rs
	}
	scope := make([]statusKey, 0, len(a.gateways)+len(t.sets)+len(changed))
	for g := range a.gateways {
		scope = append(scope, statusKey{resource.KindGateway, g})
	}
	for _, s := range t.sets {
		scope = append(scope, statusKey{resource.KindListenerSet, resource.Key{Namespace: s.obj.Namespace, Name: s.obj.Name}})
	}
	for _, r := range changed {
		kind := resource.KindHTTPRoute
		if r.Kind == resource.KindGRPCRoute {
			kind = resource.KindGRPCRoute
		}
		scope = append(scope, statusKey{kind, r.Key})
	}
	res := x.merge(part, t.statuses, scope, a.gateways)
	st.Gateways, st.Routes = len(t.gwOrder), len(changed)
	st.StatusesChanged = true
	return res, st, true
}

// mixedKinds reports whether listener l holds, or would hold once the
// attachments of the old routes are replaced by added, both HTTPRoutes
// and GRPCRoutes.
func mixedKinds(l *listener, old set[*routeState], added []*attachment) bool {
	before := l.kindCount
	after := before
	for rs := range old {
		for _, ps := range rs.parents {
			for _, at := range ps.atts {
				if at.listener == l {
					after[kindIndex(rs.kind)]--
				}
			}
		}
	}
	for _, at := range added {
		after[kindIndex(at.route.kind)]++
	}
	h, g := kindIndex(resource.KindHTTPRoute), kindIndex(resource.KindGRPCRoute)
	return (before[h] > 0 && before[g] > 0) || (after[h] > 0 && after[g] > 0)
}

// replaceAttachments replaces, in the attachments of l and its host
// index, those of the old routes by added, in translation order. The lists
// are sorted: attachments are found and placed by binary search.
func replaceAttachments(l *listener, old set[*routeState], added []*attachment) {
	l.attachments = slices.Clone(l.attachments)
	remove := func(list []*attachment, at *attachment) []*attachment {
		if i, ok := slices.BinarySearchFunc(list, at, compareAttachments); ok && list[i] == at {
			return slices.Delete(list, i, i+1)
		}
		return list
	}
	insert := func(list []*attachment, at *attachment) []*attachment {
		i, _ := slices.BinarySearchFunc(list, at, compareAttachments)
		return slices.Insert(list, i, at)
	}
	for rs := range old {
		for _, ps := range rs.parents {
			for _, at := range ps.atts {
				if at.listener != l {
					continue
				}
				l.attachments = remove(l.attachments, at)
				l.kindCount[kindIndex(rs.kind)]--
				if l.byHost != nil {
					for _, h := range at.hostnames {
						if list := remove(l.byHost[h], at); len(list) > 0 {
							l.byHost[h] = list
						} else {
							delete(l.byHost, h)
						}
					}
				}
			}
		}
	}
	for _, at := range added {
		l.attachments = insert(l.attachments, at)
		l.kindCount[kindIndex(at.route.kind)]++
		if l.byHost != nil {
			for _, h := range at.hostnames {
				l.byHost[h] = insert(slices.Clip(l.byHost[h]), at)
			}
		}
	}
}

// compareAttachments orders attachments as a translation makes them:
// HTTPRoutes then GRPCRoutes, by namespace and name, then parent.
func compareAttachments(a, b *attachment) int {
	if c := compareRouteRefs(a.route.ref(), b.route.ref()); c != 0 {
		return c
	}
	return a.parent - b.parent
}

func compareRouteRefs(a, b resource.Ref) int {
	if a.Kind != b.Kind {
		if a.Kind == resource.KindHTTPRoute {
			return -1
		}
		return 1
	}
	return resource.CompareKeys(a.Key, b.Key)
}

// statusKey identifies a status.
type statusKey struct {
	kind resource.Kind
	key  resource.Key
}

func compareStatusKeys(a, b statusKey) int {
	if c := strings.Compare(a.kind.String(), b.kind.String()); c != 0 {
		return c
	}
	return resource.CompareKeys(a.key, b.key)
}

func keyOfStatus(s *Status) statusKey {
	return statusKey{s.Kind, resource.Key{Namespace: s.Namespace, Name: s.Name}}
}

// merge combines the previous result with part, which holds the IR and
// infrastructure of gateways, and with statuses (sorted), those of scope:
// a status of scope missing from statuses is removed. The statuses of the
// previous result outside scope are shared, not copied.
func (x *Incremental) merge(part *Result, statuses []Status, scope []statusKey, gateways set[resource.Key]) *Result {
	slices.SortFunc(scope, compareStatusKeys)
	res := &Result{
		StatusSet: x.res.StatusSet.apply(statusEdits(statuses, slices.Compact(scope))),
		Gateways: mergeSorted(x.res.Gateways, part.Gateways, func(g **ir.Gateway) bool {
			return hasKey(gateways, resource.Key{Namespace: (*g).Namespace, Name: (*g).Name})
		}, func(a, b **ir.Gateway) int { return compareNames((*a).Namespace, (*a).Name, (*b).Namespace, (*b).Name) }),
	}
	res.Infra = mergeInfra(x.res.Infra, part.Infra, gateways)
	byKey := make(map[resource.Key]*ir.Gateway, len(part.Gateways))
	for _, gw := range part.Gateways {
		byKey[resource.Key{Namespace: gw.Namespace, Name: gw.Name}] = gw
	}
	for g := range gateways {
		gw := byKey[g]
		if gw == nil {
			delete(x.memo.irs, g)
			x.idx.setServices(g, nil)
			continue
		}
		if prev := x.gateway(g); prev != nil && sameClusters(prev.Clusters, gw.Clusters) {
			continue // the same Services
		}
		x.idx.setServices(g, servicesOf(gw))
	}
	return res
}

// gateway returns the IR of Gateway k in the previous result.
func (x *Incremental) gateway(k resource.Key) *ir.Gateway {
	gws := x.res.Gateways
	i, ok := slices.BinarySearchFunc(gws, k, func(g *ir.Gateway, k resource.Key) int {
		return compareNames(g.Namespace, g.Name, k.Namespace, k.Name)
	})
	if !ok {
		return nil
	}
	return gws[i]
}

// sameClusters reports whether a and b are the same slice.
func sameClusters(a, b []*ir.Cluster) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
