package gatewayapi

import (
	"slices"
	"strings"

	"github.com/portico-dev/portico/internal/ir"
)

// Misdirected requests (feature GatewayHTTPSListenerDetectMisdirectedRequests).
//
// An HTTPS port serves one filter chain per listener, selected by the SNI
// of the TLS handshake. HTTP/2 lets a client reuse a connection for
// another hostname its certificate covers (connection coalescing, RFC 7540
// section 9.1.1), so a request may arrive on the chain of a listener other
// than the one its Host (:authority) selects. The Listener.Hostname
// documentation asks for HTTP 421 then:
//
//   - if another listener of the port has an exact match or a more specific
//     wildcard for the Host, 421;
//   - if the chain's listener does not match the Host: 421 when another
//     listener does, 404 when none does.
//
// That is: 421 whenever the listener the Host selects (the most specific
// hostname covering it, as for HTTP listeners sharing a port) is another
// listener of the port, 404 when no listener matches, and the chain's own
// routing otherwise.
//
// Design: the route table of each SNI chain answers it; no filter compares
// :authority with the SNI. When the port has several HTTPS listeners, the
// table of a listener's chain gets, besides the virtual hosts of its own
// routes, a virtual host for the hostname of every other HTTPS listener of
// the port ("*" for one without a hostname) whose one route answers 421.
// Envoy picks the most specific virtual host for a Host (exact, then the
// longest wildcard, then "*"), which is the rule listeners are selected by,
// so:
//
//   - a Host another listener owns reaches that listener's 421 virtual host,
//     or one of the chain's own that is more specific still only when it
//     belongs to the chain's listener (below);
//   - a virtual host of the chain's own routes whose hostname another, more
//     specific listener owns ("a.example.com" from a route on "*.example.com"
//     when listener "a.example.com" exists) is left out: its requests go to
//     the other listener (421), as the Host selects it;
//   - the chain's own hostname gets a virtual host, empty (404) if no route
//     serves it, when a 421 virtual host would otherwise cover it (a
//     wildcard or "*" of another listener).
//
// Routing where SNI and Host select the same listener is unchanged: the
// virtual hosts of that listener's routes are those of before, minus only
// those the Host would never select it for. A port with one HTTPS listener
// gets no 421 virtual host. TLS listeners sharing the port (their chains
// forward connections, no HTTP) take no part. Listeners that are not
// programmed take no part either: their hostnames are served by nobody.

// misdirectedRoute answers a misdirected request. It is shared by every
// 421 virtual host: the IR's routes are read only.
var misdirectedRoute = &ir.Route{Name: "misdirected-request", DirectResponse: &ir.DirectResponse{Status: 421}}

// chainRouteConfig is the route table of the filter chain of the HTTPS
// listener l, given the HTTPS listeners of its port (l among them).
func (b *irBuilder) chainRouteConfig(chain string, port uint32, l *listener, https []*listener) *ir.RouteConfig {
	if len(https) < 2 {
		return b.routeConfig(chain, port, []*listener{l})
	}
	rc := &ir.RouteConfig{Name: b.gw.Key() + "/" + chain}
	// The hostnames of the virtual hosts; misdirected[h] for those that
	// answer 421.
	domains := map[string]bool{}
	for h := range l.hostIndex() {
		if ownerOf(h, https) == l {
			domains[h] = false
		}
	}
	covered := false
	for _, o := range https {
		if o == l {
			continue
		}
		domains[o.hostname] = true
		covered = covered || (l.hostname != "" && hostnameMatches(l.hostname, o.hostname))
	}
	if _, ok := domains[l.hostname]; !ok && covered {
		domains[l.hostname] = false
	}
	names := make([]string, 0, len(domains))
	for h := range domains {
		names = append(names, h)
	}
	slices.SortFunc(names, func(a, b string) int { return strings.Compare(vhostName(a), vhostName(b)) })
	rc.VirtualHosts = make([]*ir.VirtualHost, 0, len(names))
	for _, h := range names {
		if domains[h] {
			rc.VirtualHosts = append(rc.VirtualHosts, b.misdirectedHost(rc.Name, h))
			continue
		}
		rc.VirtualHosts = append(rc.VirtualHosts, b.virtualHost(rc.Name, h, port, l.hostIndex(), b.t.clean(l, h)))
	}
	return rc
}

// misdirectedHost is the virtual host of host answering 421, the one of
// the previous translation when there was one (the same object, so that
// xds/translate reuses its translation).
func (b *irBuilder) misdirectedHost(rcName, host string) *ir.VirtualHost {
	// A key no hostname can be: the memo of a virtual host of routes for
	// the same hostname is distinct.
	key := vhostKey{rcName, "421 " + host}
	if m := b.oldVhosts[key]; m != nil {
		b.newVhosts[key] = m
		return m.vh
	}
	v := &ir.VirtualHost{Name: vhostName(host), Hostname: vhostName(host), Routes: []*ir.Route{misdirectedRoute}}
	b.newVhosts[key] = &vhostMemo{vh: v}
	return v
}
