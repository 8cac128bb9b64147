package gatewayapi

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/refs"
	"github.com/portico-dev/portico/internal/resource"
)

// routeState is a route being translated.
type routeState struct {
	kind    resource.Kind
	meta    *metav1.ObjectMeta
	spec    gwv1.CommonRouteSpec
	rules   compiledRules
	parents []*parentState

	// hostnames are the valid, lowercased spec.hostnames; noHostname is set
	// when spec.hostnames were given but none is valid.
	hostnames  []string
	noHostname bool
}

// parentState is the relation of a route to one parentRef of ours.
type parentState struct {
	ref  gwv1.ParentReference
	fail *problem // why Accepted is False; nil when accepted
	atts []*attachment
}

// attachment is a route attached to one listener.
type attachment struct {
	route     *routeState
	listener  *listener
	hostnames []string // effective hostnames, "" for any
	lost      bool     // lost a hostname collision with a route of another kind
	parent    int      // index of its parentState in route.parents
}

// compiledRules is the translation of a route's rules, independent of its
// parents.
type compiledRules struct {
	routes []*compiledRoute // the matches of the valid rules
	total  int              // number of rules
	// dropped describes each invalid rule; reason is the reason of the
	// first one.
	dropped []string
	reason  string
	// unresolved lists backend and filter references that failed; reason
	// of the first one.
	unresolved       []string
	unresolvedReason string
	// l4 is the rule of a route of an L4 kind (l4.go); nil for the kinds
	// placed in virtual hosts.
	l4 *l4Rule
}

func (c *compiledRules) drop(rule int, reason, msg string) {
	if c.reason == "" {
		c.reason = reason
	}
	c.dropped = append(c.dropped, fmt.Sprintf("rule %d: %s", rule, msg))
}

func (c *compiledRules) unresolvedRef(reason, msg string) {
	if c.unresolvedReason == "" {
		c.unresolvedReason = reason
	}
	c.unresolved = append(c.unresolved, msg)
}

func (r *routeState) ns() string { return r.meta.Namespace }

// processRoutes compiles and attaches every route (of the scope).
func (t *translator) processRoutes() {
	var refs []resource.Ref
	t.scope.eachRoute(t.in, func(ref resource.Ref) { refs = append(refs, ref) })
	ahead := t.compileAhead(refs)
	for i, ref := range refs {
		var c *compiledAhead
		if ahead != nil && ahead[i].ok {
			c = &ahead[i]
		}
		if rs := t.translateRoute(ref, c); rs != nil {
			rs.attachAll()
			t.routes = append(t.routes, rs)
		}
	}
	t.resolveKindCollisions()
	t.enforceGatewayBudgets()
	t.countAttachedRoutes()
}

// translateRoute reads route ref, compiles it (or takes what the cache
// kept of it, or what compileAhead compiled: ahead, nil if nothing) and
// resolves its parents; nil when it does not exist. Its attachments are
// not yet added to the listeners.
func (t *translator) translateRoute(ref resource.Ref, ahead *compiledAhead) *routeState {
	kind := routeKinds[ref.Kind]
	src, ok := routeSource{}, true
	if ahead != nil {
		src = ahead.src // read for no owner: nothing to record
	} else {
		src, ok = kind.read(t.in, ref.Key)
	}
	if !ok {
		return nil
	}
	var rs *routeState
	if c := t.cache.CompiledRoute(ref); c != nil {
		rs = newRouteState(ref.Kind, src.meta, src.spec)
		rs.rules, rs.hostnames, rs.noHostname = c.rules, c.hostnames, c.noHostname
	} else if ahead != nil {
		ahead.replay(t.in)
		rs = ahead.rs // the state compileOne made, with these rules and hostnames
		// A copy: a pointer into compileAhead's slice would keep all of it
		// (and every route's buffered reads) alive in the cache.
		kept := ahead.CompiledRoute
		t.cache.KeepCompiledRoute(ref, &kept)
	} else {
		rs = newRouteState(ref.Kind, src.meta, src.spec)
		rs.setHostnames(src.hostnames)
		kind.compile(t.readingFor(ref), rs, src.obj) // the route's reads
		t.cache.KeepCompiledRoute(ref, &CompiledRoute{rules: rs.rules, hostnames: rs.hostnames, noHostname: rs.noHostname})
	}
	t.attach(rs)
	return rs
}

func (rs *routeState) ref() resource.Ref {
	return resource.Ref{Kind: rs.kind, Key: resource.Key{Namespace: rs.meta.Namespace, Name: rs.meta.Name}}
}

// attachAll adds the attachments of the route's accepted parents to their
// listeners.
func (rs *routeState) attachAll() {
	for i, ps := range rs.parents {
		for _, a := range ps.atts {
			a.parent = i
			a.listener.attachments = append(a.listener.attachments, a)
			a.listener.kindCount[kindIndex(rs.kind)]++
		}
	}
}

func newRouteState(kind resource.Kind, meta *metav1.ObjectMeta, spec gwv1.CommonRouteSpec) *routeState {
	return &routeState{kind: kind, meta: meta, spec: spec}
}

// setHostnames sets the valid, lowercased hostnames of a route.
func (rs *routeState) setHostnames(hostnames []gwv1.Hostname) {
	for _, h := range hostnames {
		if n, ok := normalizeHostname(string(h)); ok {
			rs.hostnames = append(rs.hostnames, n)
		}
	}
	sort.Strings(rs.hostnames)
	rs.hostnames = dedupSorted(rs.hostnames)
	rs.noHostname = len(hostnames) > 0 && len(rs.hostnames) == 0
}

// attach resolves the parentRefs of a route and attaches it to listeners.
func (t *translator) attach(rs *routeState) {
	for _, ref := range rs.spec.ParentRefs {
		p := refs.ParentOf(rs.ns(), ref)
		key := resource.Key{Namespace: p.Namespace, Name: p.Name}
		var candidates []*listener
		var g *gatewayState
		notAllowed := false
		switch {
		case p.IsGateway():
			if g = t.gateways[key]; g == nil {
				continue
			}
			candidates = g.own
		case p.IsListenerSet():
			s := t.listenerSet(key)
			if s == nil {
				continue
			}
			g = s.gw
			candidates, notAllowed = s.listeners, !s.allowed
		default:
			continue
		}
		parentDesc := parentName{p, notAllowed}
		ps := &parentState{ref: ref}
		rs.parents = append(rs.parents, ps)
		// What the listeners' allowedRoutes read is the Gateway's.
		t.readingForGateway(g.key()).attachParent(rs, ps, candidates, parentDesc)
	}
	t.enforceBudget(rs)
}

func (t *translator) listenerSet(key resource.Key) *listenerSetState {
	if t.setByKey == nil {
		t.setByKey = make(map[resource.Key]*listenerSetState, len(t.sets))
		for _, s := range t.sets {
			t.setByKey[resource.Key{Namespace: s.obj.Namespace, Name: s.obj.Name}] = s
		}
	}
	return t.setByKey[key]
}

// parentName is a resolved parent, named in messages; only failure
// messages do, so the string is built then.
type parentName struct {
	ref        refs.Parent
	notAllowed bool
}

func (p parentName) desc() string {
	d := p.ref.Kind + " " + p.ref.ID()
	if p.notAllowed {
		d += " (not allowed by its Gateway)"
	}
	return d
}

// attachParent selects the listeners of one parent a route attaches to.
func (t *translator) attachParent(rs *routeState, ps *parentState, candidates []*listener, parent parentName) {
	ref := parent.ref
	var relevantBuf, allowedBuf [8]*listener // on the stack for most Gateways
	relevant := relevantBuf[:0]
	for _, l := range candidates {
		if ref.SectionName != "" && ref.SectionName != l.name {
			continue
		}
		if ref.HasPort && ref.Port != l.port {
			continue
		}
		relevant = append(relevant, l)
	}
	if len(relevant) == 0 {
		ps.fail = &problem{string(gwv1.RouteReasonNoMatchingParent), fmt.Sprintf("%s has no listener%s", parent.desc(), selectorDesc(ref))}
		return
	}
	allowed := allowedBuf[:0]
	kindOK := false
	for _, l := range relevant {
		if !l.allowed[kindIndex(rs.kind)] {
			continue
		}
		kindOK = true
		if l.routeNS.allows(t, rs.ns()) {
			allowed = append(allowed, l)
		}
	}
	if len(allowed) == 0 {
		msg := fmt.Sprintf("no listener of %s%s allows %ss", parent.desc(), selectorDesc(ref), rs.kind)
		if kindOK {
			msg = fmt.Sprintf("no listener of %s%s allows routes from namespace %s", parent.desc(), selectorDesc(ref), rs.ns())
		}
		ps.fail = &problem{string(gwv1.RouteReasonNotAllowedByListeners), msg}
		return
	}
	var atts []attachment // allocated together, when the first one is
	for _, l := range allowed {
		if rs.noHostname {
			break
		}
		if hs := effectiveHostnames(l.hostname, rs.hostnames); len(hs) > 0 {
			if atts == nil {
				atts = make([]attachment, 0, len(allowed))
				ps.atts = slices.Grow(ps.atts, len(allowed))
			}
			atts = append(atts, attachment{route: rs, listener: l, hostnames: hs})
			ps.atts = append(ps.atts, &atts[len(atts)-1])
		}
	}
	if len(ps.atts) == 0 {
		ps.fail = &problem{string(gwv1.RouteReasonNoMatchingListenerHostname),
			fmt.Sprintf("no hostname of the route matches the hostname of a listener of %s%s", parent.desc(), selectorDesc(ref))}
		return
	}
	if len(rs.rules.routes) == 0 && rs.rules.l4 == nil {
		ps.fail = &problem{rs.rules.reason, "no rule is valid: " + joinUnique(rs.rules.dropped)}
		ps.atts = nil
		return
	}
}

func selectorDesc(ref refs.Parent) string {
	var parts []string
	if ref.SectionName != "" {
		parts = append(parts, fmt.Sprintf("named %q", ref.SectionName))
	}
	if ref.HasPort {
		parts = append(parts, fmt.Sprintf("on port %d", ref.Port))
	}
	if len(parts) == 0 {
		return ""
	}
	return " " + strings.Join(parts, " ")
}

// resolveKindCollisions enforces the GRPCRoute rule: an HTTPRoute and a
// GRPCRoute with intersecting hostnames may not share a listener; the older
// route (then the first by namespace/name) keeps it. It applies to any two
// kinds placed in virtual hosts (routeKind.vhosts).
func (t *translator) resolveKindCollisions() {
	for _, g := range t.gwOrder {
		for _, l := range g.merged {
			var count [maxRouteKinds]int
			for _, a := range l.attachments {
				count[kindIndex(a.route.kind)]++
			}
			if !mixedVhostKinds(count) {
				continue
			}
			atts := append([]*attachment(nil), l.attachments...)
			sort.SliceStable(atts, func(i, j int) bool {
				a, b := atts[i].route.meta, atts[j].route.meta
				return olderFirst(a.CreationTimestamp, b.CreationTimestamp, a.Namespace, a.Name, b.Namespace, b.Name)
			})
			var kept []*attachment
			for _, a := range atts {
				for _, k := range kept {
					if k.route.kind != a.route.kind && hostnameSetsIntersect(k.hostnames, a.hostnames) {
						a.lost = true
						break
					}
				}
				if !a.lost {
					kept = append(kept, a)
				}
			}
		}
	}
	for _, rs := range t.routes {
		for _, ps := range rs.parents {
			if ps.fail != nil {
				continue
			}
			live := ps.atts[:0]
			for _, a := range ps.atts {
				if !a.lost {
					live = append(live, a)
				}
			}
			if len(live) == 0 {
				ps.fail = &problem{string(gwv1.RouteReasonNotAllowedByListeners),
					"an older route of the other kind (HTTPRoute or GRPCRoute) uses the same hostnames on every matching listener"}
			}
			ps.atts = live
		}
	}
}

// countAttachedRoutes records, for every listener, the routes attached to
// it with an accepted parentRef.
func (t *translator) countAttachedRoutes() {
	for _, rs := range t.routes {
		for _, ps := range rs.parents {
			if ps.fail != nil {
				continue
			}
			for _, a := range ps.atts {
				if a.listener.lastRoute != rs {
					a.listener.lastRoute = rs
					a.listener.routes++
				}
			}
		}
	}
}
