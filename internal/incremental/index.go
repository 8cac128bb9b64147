package incremental

import (
	"slices"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/refs"
	"github.com/portico-dev/portico/internal/resource"
)

// set is a set of object references.
type set[K comparable] map[K]struct{}

func (s set[K]) add(k K) { s[k] = struct{}{} }

// sortedKeys returns the keys of a set of Keys in namespace/name order.
func sortedKeys(s set[resource.Key]) []resource.Key {
	out := make([]resource.Key, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	slices.SortFunc(out, resource.CompareKeys)
	return out
}

// index relates the objects of the last translated snapshot: which routes
// name which parents, which ListenerSets belong to which Gateway, which
// Gateways are of which class. It is kept up to date object by object.
type index struct {
	// routeParents are the parents a route names (Gateways and
	// ListenerSets, whether or not they exist).
	routeParents   map[resource.Ref][]resource.Ref
	routesByParent map[resource.Ref]set[resource.Ref]
	// setParent is the Gateway a ListenerSet names.
	setParent     map[resource.Key]resource.Key
	setsByGateway map[resource.Key]set[resource.Key]
	gatewayClass  map[resource.Key]string
	classGateways map[string]set[resource.Key]
	// serviceGateways are the Gateways whose IR has a cluster of a
	// Service; gatewayServices the reverse.
	serviceGateways map[resource.Key]set[resource.Key]
	gatewayServices map[resource.Key][]resource.Key
}

func newIndex() *index {
	return &index{
		routeParents:    map[resource.Ref][]resource.Ref{},
		routesByParent:  map[resource.Ref]set[resource.Ref]{},
		setParent:       map[resource.Key]resource.Key{},
		setsByGateway:   map[resource.Key]set[resource.Key]{},
		gatewayClass:    map[resource.Key]string{},
		classGateways:   map[string]set[resource.Key]{},
		serviceGateways: map[resource.Key]set[resource.Key]{},
		gatewayServices: map[resource.Key][]resource.Key{},
	}
}

// build indexes every object of snap.
func (x *index) build(snap *resource.Snapshot) {
	for _, kind := range resource.RouteKinds {
		for _, k := range snap.Keys(kind) {
			x.updateRoute(snap, resource.Ref{Kind: kind, Key: k})
		}
	}
	for k := range snap.ListenerSets.All() {
		x.updateSet(snap, k)
	}
	for k := range snap.Gateways.All() {
		x.updateGateway(snap, k)
	}
}

// routeParentRefs lists the parents (Gateways and ListenerSets) a route
// names, resolved by package refs as the semantics resolve them.
func routeParentRefs(ns string, parentRefs []gwv1.ParentReference) []resource.Ref {
	var out []resource.Ref
	for _, ref := range parentRefs {
		p := refs.ParentOf(ns, ref)
		key := resource.Key{Namespace: p.Namespace, Name: p.Name}
		switch {
		case p.IsGateway():
			out = append(out, resource.Ref{Kind: resource.KindGateway, Key: key})
		case p.IsListenerSet():
			out = append(out, resource.Ref{Kind: resource.KindListenerSet, Key: key})
		}
	}
	return out
}

// currentRouteParents are the parents route names in snap (none when it
// does not exist).
func currentRouteParents(snap *resource.Snapshot, route resource.Ref) []resource.Ref {
	ns, parentRefs, _ := snap.RouteParentRefs(route)
	return routeParentRefs(ns, parentRefs)
}

// updateRoute re-indexes a route as it is in snap.
func (x *index) updateRoute(snap *resource.Snapshot, route resource.Ref) {
	for _, p := range x.routeParents[route] {
		if s := x.routesByParent[p]; s != nil {
			delete(s, route)
			if len(s) == 0 {
				delete(x.routesByParent, p)
			}
		}
	}
	parents := currentRouteParents(snap, route)
	if len(parents) == 0 {
		delete(x.routeParents, route)
		return
	}
	x.routeParents[route] = parents
	for _, p := range parents {
		addTo(x.routesByParent, p, route)
	}
}

// updateSet re-indexes a ListenerSet as it is in snap.
func (x *index) updateSet(snap *resource.Snapshot, k resource.Key) {
	unlink(x.setParent, x.setsByGateway, k)
	ls := snap.ListenerSets.Value(k)
	if ls == nil {
		return
	}
	if g, ok := gatewayapi.ListenerSetParent(ls); ok {
		link(x.setParent, x.setsByGateway, k, g)
	}
}

// updateGateway re-indexes a Gateway's class as it is in snap.
func (x *index) updateGateway(snap *resource.Snapshot, k resource.Key) {
	unlink(x.gatewayClass, x.classGateways, k)
	if gw := snap.Gateways.Value(k); gw != nil {
		link(x.gatewayClass, x.classGateways, k, string(gw.Spec.GatewayClassName))
	}
}

// link records that k belongs to group g: fwd[k] = g and k ∈ rev[g].
func link[K, G comparable](fwd map[K]G, rev map[G]set[K], k K, g G) {
	fwd[k] = g
	addTo(rev, g, k)
}

// addTo adds v to the set m[k], making the set if needed.
func addTo[K, V comparable](m map[K]set[V], k K, v V) {
	s := m[k]
	if s == nil {
		s = set[V]{}
		m[k] = s
	}
	s.add(v)
}

// unlink forgets k's group, dropping the group's set once it is empty.
func unlink[K, G comparable](fwd map[K]G, rev map[G]set[K], k K) {
	g, ok := fwd[k]
	if !ok {
		return
	}
	if s := rev[g]; s != nil {
		delete(s, k)
		if len(s) == 0 {
			delete(rev, g)
		}
	}
	delete(fwd, k)
}

// setServices records the Services of the clusters of a Gateway's IR.
// A change usually adds or removes a Service or two in a long list, always
// built in the same order: only the part between the common head and the
// common tail of the old and new lists is re-indexed.
func (x *index) setServices(gw resource.Key, svcs []resource.Key) {
	old := x.gatewayServices[gw]
	if slices.Equal(old, svcs) {
		return
	}
	head := 0
	for head < len(old) && head < len(svcs) && old[head] == svcs[head] {
		head++
	}
	tail := 0
	for tail < len(old)-head && tail < len(svcs)-head && old[len(old)-1-tail] == svcs[len(svcs)-1-tail] {
		tail++
	}
	gone, added := old[head:len(old)-tail], svcs[head:len(svcs)-tail]
	for _, s := range added {
		addTo(x.serviceGateways, s, gw)
	}
	for _, s := range gone {
		// A Service may also be elsewhere in the new list.
		if slices.Contains(added, s) || slices.Contains(svcs[:head], s) || slices.Contains(svcs[len(svcs)-tail:], s) {
			continue
		}
		if g := x.serviceGateways[s]; g != nil {
			delete(g, gw)
			if len(g) == 0 {
				delete(x.serviceGateways, s)
			}
		}
	}
	if len(svcs) == 0 {
		delete(x.gatewayServices, gw)
		return
	}
	x.gatewayServices[gw] = svcs
}

// routesOf adds to out the routes that name Gateway g or one of its
// ListenerSets.
func (x *index) routesOf(g resource.Key, out set[resource.Ref]) {
	for r := range x.routesByParent[resource.Ref{Kind: resource.KindGateway, Key: g}] {
		out.add(r)
	}
	for s := range x.setsByGateway[g] {
		for r := range x.routesByParent[resource.Ref{Kind: resource.KindListenerSet, Key: s}] {
			out.add(r)
		}
	}
}

// gatewayOf is the Gateway a route parent is or belongs to.
func (x *index) gatewayOf(p resource.Ref) (resource.Key, bool) {
	if p.Kind == resource.KindGateway {
		return p.Key, true
	}
	g, ok := x.setParent[p.Key]
	return g, ok
}
