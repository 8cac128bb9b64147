package gatewayapi

import (
	"sort"
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
//     hostnames field specifies), then match precedence.

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

// placedRoute is a compiled route in one virtual host.
type placedRoute struct {
	cr   *compiledRoute
	rank hostRank
	grpc bool
}

// routeConfig places the routes attached to the listeners of one filter
// chain into virtual hosts. port is the chain's port, used by redirects
// that keep the listener's port.
func (b *irBuilder) routeConfig(chain string, port uint32, ls []*listener) *ir.RouteConfig {
	rc := &ir.RouteConfig{Name: b.gw.Key() + "/" + chain}
	// byHost indexes the live attachments of each listener by effective
	// hostname.
	byHost := make(map[*listener]map[string][]*attachment, len(ls))
	domains := map[string]bool{}
	for _, l := range ls {
		idx := map[string][]*attachment{}
		for _, a := range l.attachments {
			if a.lost || a.route == nil {
				continue
			}
			for _, h := range a.hostnames {
				idx[h] = append(idx[h], a)
				domains[h] = true
			}
		}
		byHost[l] = idx
		for _, o := range ls {
			if o != l && l.hostname != o.hostname && hostnameMatches(l.hostname, o.hostname) {
				domains[l.hostname] = true
			}
		}
	}
	names := make([]string, 0, len(domains))
	for h := range domains {
		names = append(names, h)
	}
	sort.Slice(names, func(i, j int) bool { return vhostName(names[i]) < vhostName(names[j]) })
	for _, h := range names {
		placed := placeRoutes(h, byHost[ownerOf(h, ls)])
		v := &ir.VirtualHost{Name: vhostName(h), Hostname: vhostName(h), Routes: make([]*ir.Route, 0, len(placed))}
		for _, p := range placed {
			b.useClusters(p.cr, p.grpc)
			v.Routes = append(v.Routes, withListenerPort(p.cr.route, port))
		}
		rc.VirtualHosts = append(rc.VirtualHosts, v)
	}
	return rc
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
// listener, indexed by effective hostname, in order.
func placeRoutes(host string, byHost map[string][]*attachment) []placedRoute {
	seen := map[string]bool{}
	var out []placedRoute
	// Covering hostnames come most specific first: the first time a route
	// is met gives the rank of its most specific matching hostname.
	for _, h := range coveringHostnames(host) {
		rank := rankOf(h)
		for _, a := range byHost[h] {
			for _, cr := range a.route.rules.routes {
				if seen[cr.route.Name] {
					continue
				}
				seen[cr.route.Name] = true
				out = append(out, placedRoute{cr: cr, rank: rank, grpc: a.route.kind == KindGRPCRoute})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].rank != out[j].rank {
			return out[i].rank.above(out[j].rank)
		}
		return out[i].cr.key.before(&out[j].cr.key)
	})
	return out
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
