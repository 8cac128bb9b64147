package gatewayapi

import (
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
// That is: the listener the Host selects (the most specific hostname
// covering it, as among HTTP listeners sharing a port) serves the request
// when it is the connection's; another listener gives 421, none 404.
//
// Design: when a port has several HTTPS listeners, their chains share one
// route table, built as the table of HTTP listeners sharing a port is
// (vhosts.go: each virtual host belongs to the most specific listener
// covering its hostname, and holds that listener's routes only). Each
// chain's connection manager tags its requests with its listener
// (ir.FilterChain.ListenerTag, in a header set before routing, whatever
// the client sent), and each virtual host answers 421 first to requests
// tagged with another listener (misdirectedRoute), then routes; the tag is
// removed before forwarding. Envoy picks the virtual host by Host as the
// listener is picked, so a Host another listener owns reaches that
// listener's virtual host (421 for this connection), a Host no listener
// covers reaches none (404), and a Host of the connection's own listener
// is routed as before. No filter compares :authority with the SNI.
//
// Trade-offs: the table is O(listeners + hostnames) for the whole port
// (one virtual host per hostname, one guard route each), where 421 virtual
// hosts in per-chain tables would be O(listeners²). Routing is unchanged
// where SNI and Host select the same listener, and so is a port with one
// HTTPS listener (its own table, no tag). TLS listeners sharing the port
// (their chains forward connections, no HTTP) take no part; listeners that
// are not programmed neither: their hostnames are nobody's.

// listenerTag identifies an HTTPS listener among those of its port (their
// hostnames are distinct).
func listenerTag(l *listener) string { return vhostName(l.hostname) }

// misdirectedRoute answers 421 to the requests of a chain whose listener
// is not tag.
func misdirectedRoute(tag string) *ir.Route {
	return &ir.Route{
		Name:           "misdirected-request",
		Match:          ir.Match{Headers: []ir.StringMatch{{Name: ir.ListenerTagHeader, Type: ir.StringExact, Value: tag, Invert: true}}},
		DirectResponse: &ir.DirectResponse{Status: 421},
	}
}
