package gatewayapi

import (
	"sort"

	"github.com/portico-dev/portico/internal/ir"
)

// The IR of TLS, TCP and UDP listeners (l4.go compiles their routes).
//
// Choices where the specification leaves room:
//   - Several routes on one TCP or UDP listener (or with one effective SNI
//     hostname on a TLS listener) cannot share its traffic: one route is
//     served, the others stay attached (Accepted, counted in
//     attachedRoutes), as the conformance suite expects. For TLSRoutes the
//     route whose own hostname is the most specific wins (exact over
//     wildcard, longer wildcard over shorter: the hostname precedence of
//     HTTPRoutes), then the oldest (creationTimestamp, then
//     namespace/name).
//   - A listener with no route keeps its port: connections are closed at
//     once (a TCP route without backends), so the proxies' ports and
//     Service do not follow the coming and going of routes.

// l4Winners returns, for each effective hostname of a listener's live
// attachments, the attachment served, with the hostnames sorted.
func l4Winners(l *listener) ([]string, map[string]*attachment) {
	win := map[string]*attachment{}
	for _, a := range l.attachments {
		if a.lost || a.route == nil || a.route.rules.l4 == nil {
			continue
		}
		for _, h := range a.hostnames {
			if w, ok := win[h]; !ok || l4Before(a, w, h) {
				win[h] = a
			}
		}
	}
	hosts := make([]string, 0, len(win))
	for h := range win {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	return hosts, win
}

// l4Before reports whether attachment a takes effective hostname h from b:
// its own hostname for h is more specific, or as specific and it is older.
func l4Before(a, b *attachment, h string) bool {
	ra, rb := originRank(a, h), originRank(b, h)
	if ra != rb {
		return ra.above(rb)
	}
	x, y := a.route.meta, b.route.meta
	return olderFirst(x.CreationTimestamp, y.CreationTimestamp, x.Namespace, x.Name, y.Namespace, y.Name)
}

// l4Route returns the TCP route of a winning attachment (none: connections
// closed) and counts its clusters in the assembly under key.
func (b *irBuilder) l4Route(key vhostKey, port uint32, a *attachment) *ir.TCPForward {
	if a == nil {
		return &ir.TCPForward{Name: key.rc + "/none"}
	}
	r := a.route.rules.l4
	b.newVhosts[key] = &vhostMemo{port: port, uses: r.uses()}
	return r.tcpRoute()
}

// tlsChains makes the filter chains of a TLS listener: one per effective
// hostname of its routes, selected by that SNI name (a route without
// hostnames on a listener without one is the catch-all chain), forwarding
// to the oldest route of that name; the listener's certificates terminate
// TLS unless it is Passthrough.
func (b *irBuilder) tlsChains(listenerName string, l *listener) []*ir.FilterChain {
	hosts, win := l4Winners(l)
	if len(hosts) == 0 {
		hosts = []string{l.hostname}
	}
	var out []*ir.FilterChain
	for _, h := range hosts {
		fc := &ir.FilterChain{Name: chainName(listenerName, l, h)}
		if h != "" {
			fc.ServerNames = []string{h}
		}
		if !l.passthrough {
			for i, c := range l.certs {
				fc.CertificateSecrets = append(fc.CertificateSecrets, c)
				if sec := l.secrets[i]; sec != nil {
					b.secrets[c] = sec
				}
			}
		}
		fc.TCP = b.l4Route(vhostKey{fc.Name, h}, uint32(l.port), win[h])
		out = append(out, fc)
	}
	return out
}

// tcpListener makes the IR of a TCP listener: one chain forwarding to the
// oldest of its routes.
func (b *irBuilder) tcpListener(port int32, l *listener) *ir.Listener {
	name := portName("tcp", port)
	_, win := l4Winners(l)
	fc := &ir.FilterChain{Name: name}
	fc.TCP = b.l4Route(vhostKey{name, ""}, uint32(port), win[""])
	return &ir.Listener{Name: name, Port: uint32(port), Protocol: ir.ProtocolTCP, FilterChains: []*ir.FilterChain{fc}}
}

// udpListener makes the IR of a UDP listener, forwarding to the oldest of
// its routes.
func (b *irBuilder) udpListener(port int32, l *listener) *ir.Listener {
	name := portName("udp", port)
	_, win := l4Winners(l)
	r := b.l4Route(vhostKey{name, ""}, uint32(port), win[""])
	return &ir.Listener{Name: name, Port: uint32(port), Protocol: ir.ProtocolUDP, UDP: &ir.UDPForward{Name: r.Name, Backends: r.Backends}}
}
