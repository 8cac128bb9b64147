package translate

// Forwarding of whole connections (ir.TCPForward: TLS and TCP routes) and
// of datagrams (ir.UDPForward, udp.go).
//
// A TCP route becomes the tcp_proxy network filter of its filter chain:
//
//   - on a TCP listener, the listener's only chain, without a match: every
//     connection is forwarded as it is;
//   - on an HTTPS listener, a chain selected by SNI (tls_inspector) like
//     the HTTP chains beside it, so that HTTPS, TLS passthrough and TLS
//     terminate share one port. A chain with certificates terminates TLS
//     (the certificates by SDS, as for HTTPS, but no ALPN is offered: the
//     decrypted bytes are not HTTP's business) and forwards the plaintext;
//     one without has no transport socket and forwards the TLS stream
//     untouched. Envoy prefers an exact server name to a wildcard, and
//     both to the chain without server names. A TLS client whose SNI
//     matches no chain is accepted and then closed, with no TLS alert:
//     Envoy never spoke TLS to it.
//
// The upstream connection is made as soon as the downstream one is
// accepted (upstream_connect_mode IMMEDIATE; for a terminating chain,
// the handshake with the client goes on meanwhile), so servers that
// speak first work, and no PROXY protocol header is sent. The idle
// timeout of a forwarded connection is the Gateway's connection idle
// timeout (settings.go). Access logs are those of HTTP connection
// managers only.
//
// Backends (l4Targets): weight 0 gets nothing; backends naming one
// cluster are merged; one target is tcp_proxy's cluster, several its
// weighted_clusters (Envoy picks one per connection). A share given to an
// Invalid backend goes to InvalidBackendCluster, which never exists:
// tcp_proxy closes such a connection at once (downstream_cx_no_route) and
// udp_proxy drops such a session's datagrams (downstream_sess_no_route),
// so that they fail closed instead of reaching another backend. A route
// with no backend of positive weight sends everything there. A backend
// naming a cluster the Gateway does not have, or a UDP cluster from a TCP
// route (or the reverse), is malformed IR: the listener is left out
// (Problem). Unlike an HTTP route's, which the route table names by
// reference, these cluster names are part of the listener, so a reused
// listener checks them again (checkReused).

import (
	"fmt"
	"math"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"

	"github.com/portico-dev/portico/internal/ir"
)

// l4Targets merges the backends of a TCP route (udp false) or UDP route
// into the clusters that get connections, with positive weights, in order
// of first appearance; an Invalid backend's share goes to
// InvalidBackendCluster, and so does everything when no backend has a
// positive weight. It fails on a backend that names a cluster the Gateway
// lacks or of the other transport.
func (t *translator) l4Targets(backends []ir.WeightedBackend, udp bool) ([]weighted, error) {
	out := make([]weighted, 0, len(backends))
next:
	for _, b := range backends {
		name := InvalidBackendCluster
		if !b.Invalid {
			if err := t.checkL4Cluster(b.Cluster, udp); err != nil {
				return nil, err
			}
			name = b.Cluster
		}
		if b.Weight == 0 {
			continue
		}
		for i := range out {
			if out[i].name == name {
				out[i].weight += uint64(b.Weight)
				continue next
			}
		}
		out = append(out, weighted{name: name, weight: uint64(b.Weight)})
	}
	if len(out) == 0 {
		out = append(out, weighted{name: InvalidBackendCluster, weight: 1})
	}
	return out, nil
}

// checkL4Cluster checks that a TCP (udp false) or UDP route may forward to
// cluster name: the Gateway has it, and it is a UDP cluster exactly when
// the route is a UDP route.
func (t *translator) checkL4Cluster(name string, udp bool) error {
	if !t.clusters[name] {
		return fmt.Errorf("backend cluster %q is not among the gateway's clusters", name)
	}
	ce := t.next.clusters.get(name)
	if ce == nil {
		return fmt.Errorf("backend cluster %q has no translation", name)
	}
	switch isUDP := ce.protocol == ir.UpstreamUDP; {
	case udp && !isUDP:
		return fmt.Errorf("backend cluster %q of a UDP route is not a UDP cluster (protocol %q)", name, ce.protocol)
	case !udp && isUDP:
		return fmt.Errorf("backend cluster %q of a TCP route is a UDP cluster", name)
	}
	return nil
}

// scaledWeights are the weights of cs, scaled down when their sum exceeds
// MaxUint32/2 (every share kept above zero), so that the sum fits a
// uint32 as Envoy's weighted clusters and udpMatcher's modulo need.
func scaledWeights(cs []weighted) []uint32 {
	var sum uint64
	for _, c := range cs {
		sum += c.weight
	}
	div := uint64(1)
	if sum > math.MaxUint32/2 {
		div = sum/(math.MaxUint32/2) + 1
	}
	out := make([]uint32, len(cs))
	for i, c := range cs {
		out[i] = uint32(max(c.weight/div, 1))
	}
	return out
}

// tcpProxyFilter is the tcp_proxy filter forwarding the connections of
// route r; fallbackStat is the stat prefix when r has no name.
func (t *translator) tcpProxyFilter(r *ir.TCPForward, fallbackStat string) (*listenerv3.Filter, error) {
	targets, err := t.l4Targets(r.Backends, false)
	if err != nil {
		return nil, fmt.Errorf("TCP route %q: %w", r.Name, err)
	}
	stat := fallbackStat
	if r.Name != "" {
		stat = statName(r.Name)
	}
	tp := &tcpproxyv3.TcpProxy{
		StatPrefix:          stat,
		IdleTimeout:         t.settings.connectionIdle,
		UpstreamConnectMode: tcpproxyv3.UpstreamConnectMode_IMMEDIATE,
	}
	if len(targets) == 1 {
		tp.ClusterSpecifier = &tcpproxyv3.TcpProxy_Cluster{Cluster: targets[0].name}
	} else {
		wc := &tcpproxyv3.TcpProxy_WeightedCluster{}
		for i, w := range scaledWeights(targets) {
			wc.Clusters = append(wc.Clusters, &tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{Name: targets[i].name, Weight: w})
		}
		tp.ClusterSpecifier = &tcpproxyv3.TcpProxy_WeightedClusters{WeightedClusters: wc}
	}
	a, err := toAny("TCP proxy", tp)
	if err != nil {
		return nil, err
	}
	return &listenerv3.Filter{Name: wellknown.TCPProxy, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: a}}, nil
}

// tcpListenerChain is the only filter chain of a TCP listener: no match,
// no TLS, every connection forwarded by its TCP route.
func (t *translator) tcpListenerChain(statPrefix string, l *ir.Listener) (*listenerv3.FilterChain, error) {
	if len(l.FilterChains) != 1 || l.FilterChains[0] == nil {
		return nil, fmt.Errorf("a TCP listener needs exactly one filter chain")
	}
	fc := l.FilterChains[0]
	switch {
	case len(fc.ServerNames) != 0:
		return nil, fmt.Errorf("filter chain %q: a TCP listener's chain selects nothing by server name", fc.Name)
	case len(fc.CertificateSecrets) != 0:
		return nil, fmt.Errorf("filter chain %q: a TCP listener's chain has no certificates (TLS is for HTTPS listeners)", fc.Name)
	case fc.RouteConfig != nil || fc.TCP == nil:
		return nil, fmt.Errorf("filter chain %q: a TCP listener's chain forwards connections (TCP) and routes no HTTP", fc.Name)
	}
	f, err := t.tcpProxyFilter(fc.TCP, statPrefix)
	if err != nil {
		return nil, fmt.Errorf("filter chain %q: %w", fc.Name, err)
	}
	return &listenerv3.FilterChain{Name: fc.Name, Filters: []*listenerv3.Filter{f}}, nil
}

// checkChainAction checks that a chain routes HTTP or forwards
// connections, not both or neither.
func checkChainAction(fc *ir.FilterChain) error {
	switch {
	case fc.RouteConfig != nil && fc.TCP != nil:
		return fmt.Errorf("both a route config and a TCP route")
	case fc.RouteConfig == nil && fc.TCP == nil:
		return fmt.Errorf("neither a route config nor a TCP route")
	}
	return nil
}

// checkReusedTCP checks the backends of the TCP route of a chain of a
// listener whose translation is reused, against this translation's
// clusters (which may have gone or changed transport since).
func (t *translator) checkReusedTCP(fc *ir.FilterChain) error {
	if _, err := t.l4Targets(fc.TCP.Backends, false); err != nil {
		return fmt.Errorf("filter chain %q: TCP route %q: %w", fc.Name, fc.TCP.Name, err)
	}
	return nil
}

// checkReusedUDP is checkReusedTCP for the UDP route of a listener.
func (t *translator) checkReusedUDP(l *ir.Listener) error {
	if l.UDP == nil {
		return nil
	}
	if _, err := t.l4Targets(l.UDP.Backends, true); err != nil {
		return fmt.Errorf("UDP route %q: %w", l.UDP.Name, err)
	}
	return nil
}
