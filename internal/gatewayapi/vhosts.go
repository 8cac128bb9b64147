package gatewayapi

import (
	"slices"
	"strings"

	"github.com/portico-dev/portico/internal/ir"
)

// Virtual hosts of a filter chain.
//
// A filter chain serves one Gateway listener (HTTPS: one chain per SNI) or
// several listeners sharing a port (HTTP). It gets a virtual host for every
// effective hostname of the routes attached to its listeners. Envoy sends a
// request to the most specific virtual host matching its Host, so every
// virtual host must hold all the routes that may serve that host:
//
//   - Listener isolation: a virtual host belongs to the most specific listener
//     of the chain whose hostname covers it, and holds routes of that listener
//     only (the Gateway picks the listener with the most specific hostname,
//     then routes of that listener). A listener whose hostname is covered by a
//     less specific listener of the same chain always gets a virtual host for
//     its hostname, even an empty one, so that its hosts are never served by
//     the routes of the less specific listener.
//   - Hostname fallback: a virtual host holds every route of its listener
//     whose effective hostname covers it ("foo.example.com" is covered by
//     "*.example.com" and by routes without hostnames), not only those naming
//     it exactly.
//   - Order: routes with the more specific matching hostname first (the most
//     characters in an exact hostname, then in a hostname, as the HTTPRoute
//     hostnames field specifies), then, among routes whose listener/route
//     intersections are the same hostname, the more specific of the
//     route's own hostnames that gave it (an exact "abc.example.com" before
//     "*.example.com", which is before a route naming no hostname; feature
//     GatewayRouteHostnameIntersectionPrecedence), then match precedence.

// hostRank orders the hostnames matching one virtual host: higher first.
type hostRank struct {
	exact  bool
	length int
}

func rankOf(h string) hostRank {
	return hostRank{exact: h != "" && h[0] != '*', length: len(h)}
}

func (r hostRank) above(o hostRank) bool {
	if r.exact != o.exact {
		return r.exact
	}
	return r.length > o.length
}

// originRank is the rank of the most specific of a route's own hostnames
// whose intersection with the listener hostname is effective: the
// hostname the route asked for, before the listener narrowed it. A route
// without hostnames ranks lowest.
func originRank(a *attachment, effective string) hostRank {
	best := rankOf("")
	for _, h := range a.route.hostnames {
		if i, ok := intersectHostnames(h, a.listener.hostname); ok && i == effective && rankOf(h).above(best) {
			best = rankOf(h)
		}
	}
	return best
}

// placedRoute is a compiled route in one virtual host.
type placedRoute struct {
	cr *compiledRoute
	// rank is that of the effective hostname matching the virtual host,
	// origin that of the route's own hostname it came from.
	rank, origin hostRank
	grpc         bool
}

// routeConfig places the routes attached to the listeners of one filter
// chain into virtual hosts. port is the chain's port, used by redirects
// that keep the listener's port.
//
// With guarded, the table is shared by the filter chains of the HTTPS
// listeners ls (misdirected.go): each virtual host is tagged with its
// owner and answers 421 to requests of another listener's chain.
func (b *irBuilder) routeConfig(chain string, port uint32, ls []*listener, guarded bool) *ir.RouteConfig {
	rc := &ir.RouteConfig{Name: b.gw.Key() + "/" + chain}
	domains := map[string]bool{}
	for _, l := range ls {
		for h := range l.hostIndex() {
			domains[h] = true
		}
		for _, o := range ls {
			if o != l && l.hostname != o.hostname && hostnameMatches(l.hostname, o.hostname) {
				domains[l.hostname] = true
			}
		}
		if guarded {
			// Every listener owns its hostname ("*" for none): a Host it
			// selects is 421 on another listener's chain, even without a
			// route for it.
			domains[l.hostname] = true
		}
	}
	names := make([]string, 0, len(domains))
	for h := range domains {
		names = append(names, h)
	}
	slices.SortFunc(names, func(a, b string) int { return strings.Compare(vhostName(a), vhostName(b)) })
	rc.VirtualHosts = make([]*ir.VirtualHost, 0, len(names))
	for _, h := range names {
		owner := ownerOf(h, ls)
		guard := ""
		if guarded {
			guard = listenerTag(owner)
		}
		rc.VirtualHosts = append(rc.VirtualHosts, b.virtualHost(rc.Name, h, port, owner.hostIndex(), b.t.clean(owner, h), guard))
	}
	return rc
}

// virtualHost places the routes serving host, given the attachments of its
// listener by effective hostname. The virtual host of the
// previous translation is reused when it was built from the same compiled
// routes.
// A guard (listenerTag of the owner) tags the virtual host and puts
// misdirectedRoute first.
func (b *irBuilder) virtualHost(rcName, host string, port uint32, byHost map[string][]*attachment, clean bool, guard string) *ir.VirtualHost {
	key := vhostKey{rcName, host}
	if m := b.oldVhosts[key]; m != nil && m.port == port && m.guard == guard && (clean || m.matches(host, port, byHost)) {
		b.newVhosts[key] = m
		return m.vh
	}
	placed := placeRoutes(host, byHost)
	v := &ir.VirtualHost{Name: vhostName(host), Hostname: vhostName(host), Routes: make([]*ir.Route, 0, len(placed)+1)}
	if guard != "" {
		v.ListenerTag = guard
		v.Routes = append(v.Routes, misdirectedRoute(guard))
	}
	for _, p := range placed {
		v.Routes = append(v.Routes, p.cr.routeOnPort(port))
	}
	m := newVhostMemo(host, port, byHost, placed, v)
	m.guard = guard
	b.newVhosts[key] = m
	return v
}

// clean reports whether the virtual host of host, owned by listener l, is
// known to be built from the same attachments as last time: the route path
// changed attachments of other listeners, or with hostnames that do not
// cover host.
func (t *translator) clean(l *listener, host string) bool {
	if t.reattached == nil {
		return false
	}
	hosts, touched := t.reattached[l]
	if !touched {
		return true
	}
	for _, h := range hosts {
		if hostnameMatches(host, h) {
			return false
		}
	}
	return true
}

// vhostKey identifies a virtual host of a Gateway: its route config and
// hostname.
type vhostKey struct{ rc, host string }

// hostIndex returns the live attachments of the listener by effective
// hostname, each list in translation order. It is built once, after
// kind collisions are resolved, and kept up to date by the route path.
func (l *listener) hostIndex() map[string][]*attachment {
	if l.byHost == nil {
		l.byHost = map[string][]*attachment{}
		for _, a := range l.attachments {
			if a.lost || a.route == nil {
				continue
			}
			for _, h := range a.hostnames {
				l.byHost[h] = append(l.byHost[h], a)
			}
		}
	}
	return l.byHost
}

// vhostMemo is a virtual host an earlier translation built, with what it
// was built from: for each hostname covering its host, the routes attached
// with that effective hostname (identified by their first compiled route).
type vhostMemo struct {
	port   uint32
	guard  string
	counts []int32
	inputs []vhostInput
	vh     *ir.VirtualHost
	// uses are the distinct clusters its routes use (a cluster is HTTP/2
	// when its appProtocol says so or a gRPC route of the Gateway uses it).
	uses []clusterUse
}

type vhostInput struct {
	first  *compiledRoute
	grpc   bool
	origin hostRank
}

type clusterUse struct {
	def  *clusterDef
	grpc bool
	l4   bool // forwarded connections (the L4 kinds)
}

func inputOf(a *attachment, effective string) vhostInput {
	in := vhostInput{grpc: routeKinds[a.route.kind].grpc, origin: originRank(a, effective)}
	if len(a.route.rules.routes) > 0 {
		in.first = a.route.rules.routes[0]
	}
	return in
}

func newVhostMemo(host string, port uint32, byHost map[string][]*attachment, placed []placedRoute, v *ir.VirtualHost) *vhostMemo {
	m := &vhostMemo{port: port, vh: v,
		counts: make([]int32, 0, strings.Count(host, ".")+2), inputs: make([]vhostInput, 0, len(placed))}
	coveringLists(host, byHost, func(h string, atts []*attachment, _ hostRank) {
		m.counts = append(m.counts, int32(len(atts)))
		for _, a := range atts {
			m.inputs = append(m.inputs, inputOf(a, h))
		}
	})
	// A virtual host uses few clusters: a linear scan dedups them without
	// a map.
	for _, p := range placed {
		for _, def := range p.cr.clusters {
			u := clusterUse{def: def, grpc: p.grpc}
			if !slices.Contains(m.uses, u) {
				m.uses = append(m.uses, u)
			}
		}
	}
	return m
}

// matches reports whether the virtual host would be built from the same
// routes.
func (m *vhostMemo) matches(host string, port uint32, byHost map[string][]*attachment) bool {
	if m.port != port {
		return false
	}
	i, j, ok := 0, 0, true
	coveringLists(host, byHost, func(h string, atts []*attachment, _ hostRank) {
		if !ok || j >= len(m.counts) || int(m.counts[j]) != len(atts) {
			ok = false
			return
		}
		j++
		for _, a := range atts {
			if m.inputs[i] != inputOf(a, h) {
				ok = false
				return
			}
			i++
		}
	})
	return ok && j == len(m.counts)
}

// coveringLists calls f with each hostname that covers host (see
// coveringHostnames), most specific first, byHost's attachments of it and
// its rank. The hostname passed is valid only during the call.
func coveringLists(host string, byHost map[string][]*attachment, f func(h string, atts []*attachment, rank hostRank)) {
	f(host, byHost[host], rankOf(host))
	if host == "" {
		return
	}
	var buf [256]byte
	name := strings.TrimPrefix(host, "*.")
	for i := strings.IndexByte(name, '.'); i >= 0; i = strings.IndexByte(name, '.') {
		name = name[i+1:]
		w := append(append(buf[:0], "*."...), name...)
		if atts := byHost[string(w)]; len(atts) > 0 {
			f(string(w), atts, hostRank{exact: false, length: len(w)})
		} else {
			f("", nil, hostRank{exact: false, length: len(w)})
		}
	}
	f("", byHost[""], rankOf(""))
}

// ownerOf returns the most specific listener whose hostname covers host.
// Listeners of one chain have distinct hostnames (others are conflicted),
// and the hostnames covering one name are nested.
func ownerOf(host string, ls []*listener) *listener {
	var owner *listener
	for _, l := range ls {
		if hostnameMatches(host, l.hostname) && (owner == nil || rankOf(l.hostname).above(rankOf(owner.hostname))) {
			owner = l
		}
	}
	return owner
}

// coveringHostnames returns the hostnames that cover host (hostnameMatches),
// most specific first: host itself, the wildcards of its parent domains
// from the longest, and "" (any hostname).
func coveringHostnames(host string) []string {
	out := []string{host}
	if host == "" {
		return out
	}
	name := strings.TrimPrefix(host, "*.")
	for i := strings.IndexByte(name, '.'); i >= 0; i = strings.IndexByte(name, '.') {
		name = name[i+1:]
		out = append(out, "*."+name)
	}
	return append(out, "")
}

// placeRoutes returns the routes serving host among the attachments of one
// listener, indexed by effective hostname, in order. A route met under
// several covering hostnames is placed once, at the first (most specific);
// the set of routes already placed is local to the call, so the compiled
// routes, which translations share through the cache, are only read.
func placeRoutes(host string, byHost map[string][]*attachment) []placedRoute {
	// A route is met twice only when an attachment of it has several
	// effective hostnames covering host (it is then in several lists), or
	// when it is attached to the listener twice (two parentRefs): such
	// attachments are adjacent in a list, which is in translation order
	// (route, then parent). The set of routes placed is needed in the
	// first case only; the second is an adjacent repeat.
	// The first pass also counts the routes (an upper bound), so that out
	// is allocated once.
	multi, n := false, 0
	coveringLists(host, byHost, func(_ string, atts []*attachment, _ hostRank) {
		for _, a := range atts {
			multi = multi || len(a.hostnames) > 1
			n += len(a.route.rules.routes)
		}
	})
	out := make([]placedRoute, 0, n)
	var placed map[*compiledRoute]struct{}
	if multi {
		placed = map[*compiledRoute]struct{}{}
	}
	// Covering hostnames come most specific first: the first time a route
	// is met gives the rank of its most specific matching hostname.
	coveringLists(host, byHost, func(h string, atts []*attachment, rank hostRank) {
		var last *routeState
		for _, a := range atts {
			if a.route == last {
				continue
			}
			last = a.route
			origin := originRank(a, h)
			for _, cr := range a.route.rules.routes {
				if placed != nil {
					if _, ok := placed[cr]; ok {
						continue
					}
					placed[cr] = struct{}{}
				}
				out = append(out, placedRoute{cr: cr, rank: rank, origin: origin, grpc: routeKinds[a.route.kind].grpc})
			}
		}
	})
	slices.SortStableFunc(out, func(a, b placedRoute) int {
		if a.rank != b.rank {
			if a.rank.above(b.rank) {
				return -1
			}
			return 1
		}
		if a.origin != b.origin {
			if a.origin.above(b.origin) {
				return -1
			}
			return 1
		}
		if a.cr.key.before(&b.cr.key) {
			return -1
		}
		if b.cr.key.before(&a.cr.key) {
			return 1
		}
		return 0
	})
	return out
}

// routeOnPort is withListenerPort(cr.route, port), copied once per port
// in a row.
func (cr *compiledRoute) routeOnPort(port uint32) *ir.Route {
	r := cr.route
	if r.Redirect == nil || r.Redirect.Port != nil {
		return r
	}
	portCopyMu.Lock() // Gateways may be assembled in parallel (build_parallel.go)
	defer portCopyMu.Unlock()
	if cr.withPort == nil || cr.portOf != port {
		cr.withPort, cr.portOf = withListenerPort(r, port), port
	}
	return cr.withPort
}

// withListenerPort returns r, or a copy of it whose redirect names port
// when the redirect sets neither scheme nor port: the HTTPRoute
// specification then requires the port of the Gateway listener.
func withListenerPort(r *ir.Route, port uint32) *ir.Route {
	if r.Redirect == nil || r.Redirect.Port != nil {
		return r
	}
	c := *r
	rd := *r.Redirect
	rd.Port = &port
	c.Redirect = &rd
	return &c
}
