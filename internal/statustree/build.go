package statustree

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/refs"
	"github.com/portico-dev/portico/internal/resource"
)

// Options select what the tree shows.
type Options struct {
	// ControllerName is Portico's GatewayClass controllerName
	// (gatewayapi.DefaultControllerName when empty).
	ControllerName string
	// Namespace keeps the Gateways of one namespace; "": all.
	Namespace string
	// Gateway keeps one Gateway; nil: all (of Namespace).
	Gateway *resource.Key
	// Route keeps only the path to one route: the Gateways, ListenerSets
	// and listeners it appears under, and it alone there.
	Route *resource.Ref
	// UnknownClasses shows the Gateways whose GatewayClass is not among
	// the objects (it could not be read) as if it were Portico's.
	UnknownClasses bool
	// Unreadable are the namespaces whose Services, EndpointSlices and
	// ReferenceGrants could not be read: their backends are Unknown.
	Unreadable map[string]bool
}

// Build returns the tree of the Gateways of snap that opts selects, with
// the statuses st gives. snap must have been built (resource.Snapshot.Build).
func Build(snap *resource.Snapshot, st Statuses, opts Options) *Tree {
	if opts.ControllerName == "" {
		opts.ControllerName = gatewayapi.DefaultControllerName
	}
	b := &builder{snap: snap, st: st, opts: opts,
		gws: map[resource.Key]*gwNode{}, sets: map[resource.Key]*lsNode{}}
	b.gateways()
	b.listenerSets()
	b.routes()
	return b.tree()
}

type builder struct {
	snap  *resource.Snapshot
	st    Statuses
	opts  Options
	gwOrd []*gwNode
	gws   map[resource.Key]*gwNode
	sets  map[resource.Key]*lsNode
}

// parentNode is what a Gateway and a ListenerSet share: listeners that
// routes attach to, and routes attached to none.
type parentNode struct {
	kind       string // "Gateway" or "ListenerSet"
	key        resource.Key
	listeners  []*listenerNode
	byName     map[string]*listenerNode
	unattached []Route
}

type gwNode struct {
	parentNode
	out  Gateway
	sets []*lsNode
}

type lsNode struct {
	parentNode
	out ListenerSet
}

// listenerNode is a listener and what attachment reads of it.
type listenerNode struct {
	out           Listener
	ownerNS       string
	allowedRoutes *gwv1.AllowedRoutes
	// kinds are the status' supportedKinds; hasStatus: the listener has
	// a status entry (kinds then decide, an empty list allowing none).
	kinds     []gwv1.RouteGroupKind
	hasStatus bool
}

// ours reports whether the Gateway's class is Portico's.
func (b *builder) ours(gw *gwv1.Gateway) (class string, ok bool) {
	class = string(gw.Spec.GatewayClassName)
	gc, found := b.snap.GatewayClasses.Get(class)
	if !found || gc == nil {
		return class, b.opts.UnknownClasses
	}
	return class, string(gc.Spec.ControllerName) == b.opts.ControllerName
}

func (b *builder) gateways() {
	for _, k := range resource.SortedKeys(b.snap.Gateways) {
		gw := b.snap.Gateways.Value(k)
		if gw == nil {
			continue
		}
		if b.opts.Gateway != nil && *b.opts.Gateway != k {
			continue
		}
		if b.opts.Gateway == nil && b.opts.Namespace != "" && k.Namespace != b.opts.Namespace {
			continue
		}
		class, ok := b.ours(gw)
		if !ok {
			continue
		}
		n := &gwNode{parentNode: parentNode{kind: refs.KindGateway, key: k, byName: map[string]*listenerNode{}},
			out: Gateway{Namespace: k.Namespace, Name: k.Name, Class: class, Conditions: []Condition{}}}
		var statusListeners []gwv1.ListenerStatus
		if s := b.st.Gateway(k); s != nil && len(s.Conditions) > 0 {
			n.out.Conditions = conditions(s.Conditions, gw.Generation)
			statusListeners = s.Listeners
		} else {
			n.out.NoStatus = true
		}
		for _, l := range gw.Spec.Listeners {
			ln := &listenerNode{out: Listener{Name: string(l.Name), Port: int32(l.Port), Protocol: string(l.Protocol), Hostname: hostname(l.Hostname)},
				ownerNS: k.Namespace, allowedRoutes: l.AllowedRoutes}
			for _, ls := range statusListeners {
				if ls.Name == l.Name {
					ln.setStatus(ls.SupportedKinds, ls.AttachedRoutes, ls.Conditions, gw.Generation)
					break
				}
			}
			n.add(ln)
		}
		b.gwOrd = append(b.gwOrd, n)
		b.gws[k] = n
	}
}

func (b *builder) listenerSets() {
	for _, k := range resource.SortedKeys(b.snap.ListenerSets) {
		ls := b.snap.ListenerSets.Value(k)
		if ls == nil {
			continue
		}
		parent, ok := gatewayapi.ListenerSetParent(ls)
		if !ok {
			continue
		}
		g := b.gws[parent]
		if g == nil {
			continue
		}
		n := &lsNode{parentNode: parentNode{kind: refs.KindListenerSet, key: k, byName: map[string]*listenerNode{}},
			out: ListenerSet{Namespace: k.Namespace, Name: k.Name, Conditions: []Condition{}}}
		var statusListeners []gwv1.ListenerEntryStatus
		if s := b.st.ListenerSet(k); s != nil && len(s.Conditions) > 0 {
			n.out.Conditions = conditions(s.Conditions, ls.Generation)
			statusListeners = s.Listeners
		} else {
			n.out.NoStatus = true
		}
		for _, l := range ls.Spec.Listeners {
			ln := &listenerNode{out: Listener{Name: string(l.Name), Port: int32(l.Port), Protocol: string(l.Protocol), Hostname: hostname(l.Hostname)},
				ownerNS: k.Namespace, allowedRoutes: l.AllowedRoutes}
			for _, st := range statusListeners {
				if st.Name == l.Name {
					ln.setStatus(st.SupportedKinds, st.AttachedRoutes, st.Conditions, ls.Generation)
					break
				}
			}
			n.add(ln)
		}
		g.sets = append(g.sets, n)
		b.sets[k] = n
	}
}

func (p *parentNode) add(l *listenerNode) {
	if _, dup := p.byName[l.out.Name]; dup {
		return // the CRD forbids it; the first one counts
	}
	p.listeners = append(p.listeners, l)
	p.byName[l.out.Name] = l
}

func (l *listenerNode) setStatus(kinds []gwv1.RouteGroupKind, attached int32, conds []metav1.Condition, gen int64) {
	l.hasStatus, l.kinds = true, kinds
	l.out.AttachedRoutes = &attached
	l.out.Conditions = conditions(conds, gen)
}

// routes places every route under the parents its parentRefs name.
func (b *builder) routes() {
	for _, kind := range resource.RouteKinds {
		for _, k := range b.snap.Keys(kind) {
			ref := resource.Ref{Kind: kind, Key: k}
			if b.opts.Route != nil && *b.opts.Route != ref {
				continue
			}
			obj, ok := b.snap.Get(kind, k)
			if !ok {
				continue
			}
			view, ok := b.snap.Route(ref)
			if !ok {
				continue
			}
			b.route(kind, obj, view)
		}
	}
}

func (b *builder) route(kind resource.Kind, obj resource.Object, view resource.RouteView) {
	ns := view.Meta.Namespace
	var entries []gwv1.RouteParentStatus
	if rs := b.st.Route(kind, resource.Key{Namespace: ns, Name: view.Meta.Name}); rs != nil {
		for _, e := range rs.Parents {
			if string(e.ControllerName) == b.opts.ControllerName {
				entries = append(entries, e)
			}
		}
	}
	for _, pref := range view.Spec.ParentRefs {
		p := refs.ParentOf(ns, pref)
		key := resource.Key{Namespace: p.Namespace, Name: p.Name}
		var parent *parentNode
		switch {
		case p.IsGateway() && b.gws[key] != nil:
			parent = &b.gws[key].parentNode
		case p.IsListenerSet() && b.sets[key] != nil:
			parent = &b.sets[key].parentNode
		default:
			continue
		}
		r := Route{Kind: kind.String(), Namespace: ns, Name: view.Meta.Name, SectionName: p.SectionName}
		if p.HasPort {
			r.Port = p.Port
		}
		entry := findEntry(entries, pref)
		var resolvedRefs *metav1.Condition
		if entry == nil {
			r.NoStatus = true
			r.Conditions = []Condition{}
			r.Note = fmt.Sprintf("no status.parents entry of %s for this parentRef: the controller has not taken the route up (yet)", b.opts.ControllerName)
		} else {
			r.Conditions = conditions(entry.Conditions, view.Meta.Generation)
			resolvedRefs = findCondition(entry.Conditions, string(gwv1.RouteConditionResolvedRefs))
		}
		r.Backends = b.backends(kind, obj, ns, resolvedRefs)

		accepted := entry != nil && conditionTrue(entry.Conditions, string(gwv1.RouteConditionAccepted))
		named := parent.byName[p.SectionName] // nil when unset or naming no listener
		switch {
		case !accepted && named != nil:
			named.out.Routes = append(named.out.Routes, r)
		case !accepted:
			parent.unattached = append(parent.unattached, r)
		default:
			placed := false
			for _, l := range parent.listeners {
				if b.attaches(l, kind, ns, view, p) {
					l.out.Routes = append(l.out.Routes, r)
					placed = true
				}
			}
			if !placed {
				r.Note = "Accepted, but no listener matches it by this view's reading of the spec (see each listener's attachedRoutes)"
				parent.unattached = append(parent.unattached, r)
			}
		}
	}
}

// findEntry returns the status.parents entry of ref, nil when none.
func findEntry(entries []gwv1.RouteParentStatus, ref gwv1.ParentReference) *gwv1.RouteParentStatus {
	id := refs.EntryOf(ref)
	for i := range entries {
		if refs.EntryOf(entries[i].ParentRef) == id {
			return &entries[i]
		}
	}
	return nil
}

// tree assembles the output, pruning to the path of Options.Route.
func (b *builder) tree() *Tree {
	t := &Tree{Gateways: []Gateway{}}
	only := b.opts.Route != nil
	for _, g := range b.gwOrd {
		out := g.out
		var found bool
		out.Listeners, out.Unattached, found = g.assemble(only)
		for _, s := range g.sets {
			ls := s.out
			var inSet bool
			ls.Listeners, ls.Unattached, inSet = s.assemble(only)
			if only && !inSet {
				continue
			}
			found = found || inSet
			out.ListenerSets = append(out.ListenerSets, ls)
		}
		if only && !found {
			continue
		}
		t.Gateways = append(t.Gateways, out)
	}
	return t
}

// assemble returns the listeners and unattached routes of p (with only,
// just those holding a route) and whether p holds any route.
func (p *parentNode) assemble(only bool) ([]Listener, []Route, bool) {
	listeners := []Listener{}
	found := len(p.unattached) > 0
	for _, l := range p.listeners {
		if only && len(l.out.Routes) == 0 {
			continue
		}
		found = found || len(l.out.Routes) > 0
		out := l.out
		if out.Conditions == nil {
			out.Conditions = []Condition{}
		}
		listeners = append(listeners, out)
	}
	return listeners, p.unattached, found
}

func hostname(h *gwv1.Hostname) string {
	if h == nil {
		return ""
	}
	return string(*h)
}

// conditions converts status conditions, marking those observed at an
// older generation than gen.
func conditions(conds []metav1.Condition, gen int64) []Condition {
	out := make([]Condition, 0, len(conds))
	for _, c := range conds {
		oc := Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message, ObservedGeneration: c.ObservedGeneration}
		if c.ObservedGeneration > 0 && gen > 0 && c.ObservedGeneration < gen {
			oc.Stale, oc.Generation = true, gen
		}
		out = append(out, oc)
	}
	return out
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

func conditionTrue(conds []metav1.Condition, typ string) bool {
	c := findCondition(conds, typ)
	return c != nil && c.Status == metav1.ConditionTrue
}
