package gatewayapi

import (
	"sort"

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
	domains := map[string]bool{}
	for _, l := range ls {
		for _, a := range l.attachments {
			if a.lost || a.route == nil {
				continue
			}
			for _, h := range a.hostnames {
				domains[h] = true
			}
		}
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
		placed := b.placeRoutes(h, ownerOf(h, ls))
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

// placeRoutes returns the routes of listener l serving host, in order.
func (b *irBuilder) placeRoutes(host string, l *listener) []placedRoute {
	if l == nil {
		return nil
	}
	index := map[string]int{}
	var out []placedRoute
	for _, a := range l.attachments {
		if a.lost || a.route == nil {
			continue
		}
		// The most specific effective hostname of the route covering host.
		found, best := false, hostRank{}
		for _, h := range a.hostnames {
			if hostnameMatches(host, h) && (!found || rankOf(h).above(best)) {
				found, best = true, rankOf(h)
			}
		}
		if !found {
			continue
		}
		for _, cr := range a.route.rules.routes {
			if i, ok := index[cr.route.Name]; ok {
				if best.above(out[i].rank) {
					out[i].rank = best
				}
				continue
			}
			index[cr.route.Name] = len(out)
			out = append(out, placedRoute{cr: cr, rank: best, grpc: a.route.kind == KindGRPCRoute})
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
