package translate

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	udpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	consistenthashingv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/input_matchers/consistent_hashing/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"

	"github.com/portico-dev/portico/internal/ir"
)

const (
	clusterTLSA = "default/tls-a/443"
	clusterTLSB = "default/tls-b/443"
	clusterTCPA = "default/tcp-a/9000"
	clusterTCPB = "default/tcp-b/9000"
	clusterTCPC = "default/tcp-c/9000"
	clusterDNSA = "default/dns-a/53/udp"
	clusterDNSB = "default/dns-b/53/udp"
	clusterWeb  = "default/web/80"
)

func tcpRoute(name string, backends ...ir.WeightedBackend) *ir.TCPForward {
	return &ir.TCPForward{Name: name, Backends: backends}
}

func to(cluster string, w uint32) ir.WeightedBackend {
	return ir.WeightedBackend{Cluster: cluster, Weight: w}
}

// l4Gateway has an HTTPS listener mixing TLS passthrough, TLS terminate
// and HTTPS chains, a TCP listener split by weight (with a weight 0 and an
// Invalid backend) and a UDP listener split between two backends.
func l4Gateway() *ir.Gateway {
	tcp := func(name string, port uint32) *ir.Cluster {
		return &ir.Cluster{Name: name, Protocol: ir.UpstreamTCP, Endpoints: []ir.Endpoint{{Address: "10.0.3.1", Port: port}}}
	}
	udp := func(name string) *ir.Cluster {
		return &ir.Cluster{Name: name, Protocol: ir.UpstreamUDP, Endpoints: []ir.Endpoint{{Address: "10.0.4.1", Port: 5353}}}
	}
	web := &ir.RouteConfig{Name: "tls-443/web", VirtualHosts: []*ir.VirtualHost{{
		Name: "web.example.com", Hostname: "web.example.com",
		Routes: []*ir.Route{{Name: "httproute/default/web/rule/0/match/0", Forward: forwardTo(clusterWeb)}},
	}}}
	return &ir.Gateway{
		Namespace: "default", Name: "gw",
		Listeners: []*ir.Listener{
			{Name: "tls-443", Port: 443, Protocol: ir.ProtocolHTTPS, FilterChains: []*ir.FilterChain{
				{Name: "tls-443/a", ServerNames: []string{"a.example.com"}, TCP: tcpRoute("tlsroute/default/a/rule/0", to(clusterTLSA, 1))},
				{Name: "tls-443/b", ServerNames: []string{"*.b.example.com"}, TCP: tcpRoute("tlsroute/default/b/rule/0", to(clusterTLSB, 1))},
				{Name: "tls-443/t", ServerNames: []string{"t.example.com"}, CertificateSecrets: []string{secretA},
					TCP: tcpRoute("tlsroute/default/t/rule/0", to(clusterTCPA, 1))},
				{Name: "tls-443/web", ServerNames: []string{"web.example.com"}, CertificateSecrets: []string{secretA}, RouteConfig: web},
			}},
			{Name: "tcp-9000", Port: 9000, Protocol: ir.ProtocolTCP, FilterChains: []*ir.FilterChain{
				{Name: "tcp-9000", TCP: tcpRoute("tcproute/default/split/rule/0",
					to(clusterTCPA, 3), to(clusterTCPC, 0), ir.WeightedBackend{Invalid: true, Weight: 1})},
			}},
			{Name: "udp-53", Port: 53, Protocol: ir.ProtocolUDP, UDP: &ir.UDPForward{Name: "udproute/default/dns/rule/0",
				Backends: []ir.WeightedBackend{to(clusterDNSA, 1), to(clusterDNSB, 1)}}},
		},
		Clusters: []*ir.Cluster{
			udp(clusterDNSA), udp(clusterDNSB),
			tcp(clusterTCPA, 9000), tcp(clusterTCPB, 9000), tcp(clusterTCPC, 9000),
			tcp(clusterTLSA, 8443), tcp(clusterTLSB, 8443),
			{Name: clusterWeb, Protocol: ir.UpstreamHTTP1, Endpoints: []ir.Endpoint{{Address: "10.0.5.1", Port: 8080}}},
		},
		Secrets: []*ir.Secret{{Name: secretA, Cert: []byte(certA), Key: []byte(keyA)}},
	}
}

func chainNamed(t *testing.T, l *listenerv3.Listener, name string) *listenerv3.FilterChain {
	t.Helper()
	for _, fc := range l.FilterChains {
		if fc.Name == name {
			return fc
		}
	}
	t.Fatalf("listener %s has no chain %q", l.Name, name)
	return nil
}

func tcpProxyOf(t *testing.T, fc *listenerv3.FilterChain) *tcpproxyv3.TcpProxy {
	t.Helper()
	if len(fc.Filters) != 1 || fc.Filters[0].Name != wellknown.TCPProxy {
		t.Fatalf("chain %q filters = %v", fc.Name, fc.Filters)
	}
	tp := &tcpproxyv3.TcpProxy{}
	if err := fc.Filters[0].GetTypedConfig().UnmarshalTo(tp); err != nil {
		t.Fatal(err)
	}
	return tp
}

// tcpTargets are the clusters of a tcp_proxy with their weights
// ("name=weight"; a lone cluster has weight 1).
func tcpTargets(tp *tcpproxyv3.TcpProxy) []string {
	if c := tp.GetCluster(); c != "" {
		return []string{c + "=1"}
	}
	var out []string
	for _, c := range tp.GetWeightedClusters().GetClusters() {
		out = append(out, c.Name+"="+strconv.FormatUint(uint64(c.Weight), 10))
	}
	return out
}

func udpProxyOf(t *testing.T, l *listenerv3.Listener) *udpproxyv3.UdpProxyConfig {
	t.Helper()
	if len(l.ListenerFilters) != 1 || l.ListenerFilters[0].Name != "envoy.filters.udp_listener.udp_proxy" {
		t.Fatalf("listener %s filters = %v", l.Name, l.ListenerFilters)
	}
	cfg := &udpproxyv3.UdpProxyConfig{}
	if err := l.ListenerFilters[0].GetTypedConfig().UnmarshalTo(cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func matcherCluster(t *testing.T, om *matcherv3.Matcher_OnMatch) string {
	t.Helper()
	r := &udpproxyv3.Route{}
	if err := om.GetAction().GetTypedConfig().UnmarshalTo(r); err != nil {
		t.Fatal(err)
	}
	return r.Cluster
}

// udpShares evaluates a udp_proxy matcher as Envoy does for every hash
// value of [0, modulo): the number of values that route to each cluster.
func udpShares(t *testing.T, m *matcherv3.Matcher) map[string]uint64 {
	t.Helper()
	type rng struct {
		threshold, modulo uint32
		cluster           string
	}
	var ranges []rng
	for _, fm := range m.GetMatcherList().GetMatchers() {
		sp := fm.GetPredicate().GetSinglePredicate()
		if in := sp.GetInput(); in.GetName() != "envoy.matching.inputs.source_port" {
			t.Fatalf("matcher input %v", in)
		}
		cm := sp.GetCustomMatch()
		ch := &consistenthashingv3.ConsistentHashing{}
		if cm.GetName() != "envoy.matching.matchers.consistent_hashing" || cm.GetTypedConfig().UnmarshalTo(ch) != nil {
			t.Fatalf("custom match %v", cm)
		}
		if ch.Seed != udpSplitSeed || ch.Threshold == 0 || ch.Threshold >= ch.Modulo {
			t.Fatalf("consistent hashing %v", ch)
		}
		ranges = append(ranges, rng{ch.Threshold, ch.Modulo, matcherCluster(t, fm.OnMatch)})
	}
	fallback := matcherCluster(t, m.OnNoMatch)
	if len(ranges) == 0 {
		return map[string]uint64{fallback: 1}
	}
	mod := ranges[0].modulo
	out := map[string]uint64{}
	for h := uint32(0); h < mod; h++ {
		c := fallback
		for _, r := range ranges {
			if r.modulo != mod {
				t.Fatalf("moduli %d and %d", mod, r.modulo)
			}
			if h%r.modulo >= r.threshold {
				c = r.cluster
				break
			}
		}
		out[c]++
	}
	return out
}

func TestL4Resources(t *testing.T) {
	res := mustTranslate(t, l4Gateway())
	checkValid(t, res)
	if len(res.Problems) != 0 {
		t.Fatalf("problems: %+v", res.Problems)
	}
	if got := names(res.Listeners); !slices.Equal(got, []string{"default/gw/tcp-9000", "default/gw/tls-443", "default/gw/udp-53"}) {
		t.Fatalf("listeners %v", got)
	}
	// The HTTPS chain's route table only: TCP routes have none.
	if got := names(res.Routes()); !slices.Equal(got, []string{"default/gw/tls-443/web"}) {
		t.Errorf("routes %v", got)
	}

	tls := find[*listenerv3.Listener](t, res.Listeners, "default/gw/tls-443")
	if len(tls.ListenerFilters) != 1 || tls.ListenerFilters[0].Name != wellknown.TLSInspector {
		t.Errorf("TLS listener filters %v", tls.ListenerFilters)
	}
	for _, c := range []struct{ chain, sni, cluster string }{
		{"tls-443/a", "a.example.com", clusterTLSA},
		{"tls-443/b", "*.b.example.com", clusterTLSB},
	} {
		fc := chainNamed(t, tls, c.chain)
		if fc.TransportSocket != nil {
			t.Errorf("passthrough chain %s terminates TLS", c.chain)
		}
		if m := fc.FilterChainMatch; m.TransportProtocol != "tls" || !slices.Equal(m.ServerNames, []string{c.sni}) {
			t.Errorf("chain %s match %v", c.chain, m)
		}
		tp := tcpProxyOf(t, fc)
		if got := tcpTargets(tp); !slices.Equal(got, []string{c.cluster + "=1"}) {
			t.Errorf("chain %s targets %v", c.chain, got)
		}
		if tp.StatPrefix != statName("tlsroute/default/"+c.chain[len("tls-443/"):]+"/rule/0") {
			t.Errorf("chain %s stat prefix %q", c.chain, tp.StatPrefix)
		}
		if tp.UpstreamConnectMode != tcpproxyv3.UpstreamConnectMode_IMMEDIATE || tp.IdleTimeout.AsDuration() != DefaultConnectionIdleTimeout {
			t.Errorf("chain %s: connect mode %v, idle timeout %v", c.chain, tp.UpstreamConnectMode, tp.IdleTimeout)
		}
	}
	term := chainNamed(t, tls, "tls-443/t")
	if got := tcpTargets(tcpProxyOf(t, term)); !slices.Equal(got, []string{clusterTCPA + "=1"}) {
		t.Errorf("terminate targets %v", got)
	}
	ctx := downstreamContext(t, term)
	if sds := ctx.CommonTlsContext.TlsCertificateSdsSecretConfigs; len(sds) != 1 || sds[0].Name != secretA {
		t.Errorf("terminate certificates %v", sds)
	}
	if alpn := ctx.CommonTlsContext.AlpnProtocols; len(alpn) != 0 {
		t.Errorf("terminate chain offers ALPN %v", alpn)
	}
	webChain := chainNamed(t, tls, "tls-443/web")
	hcmOf(t, webChain)
	if alpn := downstreamContext(t, webChain).CommonTlsContext.AlpnProtocols; !slices.Equal(alpn, alpnProtocols) {
		t.Errorf("HTTPS chain ALPN %v", alpn)
	}

	tcp := find[*listenerv3.Listener](t, res.Listeners, "default/gw/tcp-9000")
	if len(tcp.FilterChains) != 1 || tcp.FilterChains[0].FilterChainMatch != nil || tcp.FilterChains[0].TransportSocket != nil || len(tcp.ListenerFilters) != 0 {
		t.Fatalf("TCP listener %v", tcp)
	}
	// Weight 0 is dropped, the Invalid share fails closed.
	if got := tcpTargets(tcpProxyOf(t, tcp.FilterChains[0])); !slices.Equal(got, []string{clusterTCPA + "=3", InvalidBackendCluster + "=1"}) {
		t.Errorf("TCP targets %v", got)
	}
	if sa := tcp.Address.GetSocketAddress(); sa.Protocol != corev3.SocketAddress_TCP || sa.GetPortValue() != 9000 {
		t.Errorf("TCP address %v", sa)
	}

	udp := find[*listenerv3.Listener](t, res.Listeners, "default/gw/udp-53")
	if sa := udp.Address.GetSocketAddress(); sa.Protocol != corev3.SocketAddress_UDP || sa.GetPortValue() != 53 || sa.Address != "0.0.0.0" {
		t.Errorf("UDP address %v", sa)
	}
	if len(udp.FilterChains) != 0 {
		t.Errorf("UDP listener has chains %v", udp.FilterChains)
	}
	cfg := udpProxyOf(t, udp)
	if cfg.StatPrefix != statName("udproute/default/dns/rule/0") {
		t.Errorf("UDP stat prefix %q", cfg.StatPrefix)
	}
	if got := udpShares(t, cfg.GetMatcher()); got[clusterDNSA] != 1 || got[clusterDNSB] != 1 || len(got) != 2 {
		t.Errorf("UDP shares %v", got)
	}

	for _, c := range clusterList(t, res.Clusters) {
		if c.Name == clusterWeb {
			continue
		}
		if len(c.TypedExtensionProtocolOptions) != 0 {
			t.Errorf("L4 cluster %s has protocol options %v", c.Name, c.TypedExtensionProtocolOptions)
		}
		if c.GetType() != clusterv3.Cluster_EDS {
			t.Errorf("cluster %s type %v", c.Name, c.GetType())
		}
	}
	for name, want := range map[string]corev3.SocketAddress_Protocol{clusterDNSA: corev3.SocketAddress_UDP, clusterTCPA: corev3.SocketAddress_TCP} {
		cla := find[*endpointv3.ClusterLoadAssignment](t, res.Endpoints, name)
		if p := cla.Endpoints[0].LbEndpoints[0].GetEndpoint().Address.GetSocketAddress().Protocol; p != want {
			t.Errorf("endpoints of %s: protocol %v, want %v", name, p, want)
		}
	}
}

func downstreamContext(t *testing.T, fc *listenerv3.FilterChain) *tlsv3.DownstreamTlsContext {
	t.Helper()
	ts := fc.TransportSocket
	if ts == nil || ts.Name != wellknown.TransportSocketTLS {
		t.Fatalf("chain %s transport socket %v", fc.Name, ts)
	}
	ctx := &tlsv3.DownstreamTlsContext{}
	if err := ts.GetTypedConfig().UnmarshalTo(ctx); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// TestL4Weights: which clusters get a TCP route's connections, and a UDP
// route's sessions, by weight: exactly the positive weights, merged by
// cluster, Invalid shares and routes without a positive weight to the
// cluster that does not exist.
func TestL4Weights(t *testing.T) {
	invalid := func(w uint32) ir.WeightedBackend { return ir.WeightedBackend{Invalid: true, Weight: w} }
	cases := []struct {
		name     string
		backends []ir.WeightedBackend
		want     []string
	}{
		{"one", []ir.WeightedBackend{to(clusterTCPA, 5)}, []string{clusterTCPA + "=1"}},
		{"none", nil, []string{InvalidBackendCluster + "=1"}},
		{"all zero", []ir.WeightedBackend{to(clusterTCPA, 0), to(clusterTCPB, 0)}, []string{InvalidBackendCluster + "=1"}},
		{"invalid only", []ir.WeightedBackend{invalid(1)}, []string{InvalidBackendCluster + "=1"}},
		{"zero and invalid", []ir.WeightedBackend{to(clusterTCPA, 0), invalid(3)}, []string{InvalidBackendCluster + "=1"}},
		{"70/30/0", []ir.WeightedBackend{to(clusterTCPA, 70), to(clusterTCPB, 30), to(clusterTCPC, 0)},
			[]string{clusterTCPA + "=70", clusterTCPB + "=30"}},
		{"merged", []ir.WeightedBackend{to(clusterTCPB, 1), invalid(2), to(clusterTCPA, 3), to(clusterTCPB, 4), invalid(5)},
			[]string{clusterTCPB + "=5", InvalidBackendCluster + "=7", clusterTCPA + "=3"}},
		{"same cluster twice", []ir.WeightedBackend{to(clusterTCPA, 1), to(clusterTCPA, 1)}, []string{clusterTCPA + "=1"}},
		{"overflow", []ir.WeightedBackend{to(clusterTCPA, math.MaxUint32), to(clusterTCPB, math.MaxUint32), to(clusterTCPC, 1)},
			// Scaled by 5 to fit a uint32, the smallest share kept.
			[]string{clusterTCPA + "=858993459", clusterTCPB + "=858993459", clusterTCPC + "=1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gw := l4Gateway()
			gw.Listeners[1].FilterChains[0].TCP.Backends = c.backends
			res := mustTranslate(t, gw)
			checkValid(t, res)
			tcp := find[*listenerv3.Listener](t, res.Listeners, "default/gw/tcp-9000")
			got := tcpTargets(tcpProxyOf(t, tcp.FilterChains[0]))
			if !slices.Equal(got, c.want) {
				t.Errorf("TCP targets %v, want %v", got, c.want)
			}

			// The same backends on UDP clusters: the matcher's shares of
			// the hash values are the TCP route's weights, exactly.
			toUDP := strings.NewReplacer(clusterTCPA, clusterDNSA, clusterTCPB, clusterDNSB, clusterTCPC, clusterDNSA+"-c")
			udpB := slices.Clone(c.backends)
			for i := range udpB {
				udpB[i].Cluster = toUDP.Replace(udpB[i].Cluster)
			}
			gw = l4Gateway()
			gw.Clusters = append(gw.Clusters, &ir.Cluster{Name: clusterDNSA + "-c", Protocol: ir.UpstreamUDP})
			gw.Listeners[2].UDP.Backends = udpB
			res = mustTranslate(t, gw)
			checkValid(t, res)
			if c.name == "overflow" {
				return // 2^31 hash values are too many to count
			}
			shares := udpShares(t, udpProxyOf(t, find[*listenerv3.Listener](t, res.Listeners, "default/gw/udp-53")).GetMatcher())
			want := map[string]uint64{}
			for _, w := range c.want {
				name, weight, _ := strings.Cut(w, "=")
				n, _ := strconv.ParseUint(weight, 10, 64)
				want[toUDP.Replace(name)] = n
			}
			if !maps.Equal(shares, want) {
				t.Errorf("UDP shares %v, want %v", shares, want)
			}
		})
	}
}

func TestL4Errors(t *testing.T) {
	cases := map[string]struct {
		change   func(*ir.Gateway)
		listener string
		want     string
	}{
		"route config and TCP": {func(g *ir.Gateway) {
			g.Listeners[0].FilterChains[3].TCP = tcpRoute("x", to(clusterTCPA, 1))
		}, "tls-443", "both a route config and a TCP route"},
		"neither": {func(g *ir.Gateway) { g.Listeners[0].FilterChains[0].TCP = nil }, "tls-443", "neither a route config nor a TCP route"},
		"HTTP chain without certificate": {func(g *ir.Gateway) {
			g.Listeners[0].FilterChains[3].CertificateSecrets = nil
		}, "tls-443", "no certificate"},
		"terminate with unknown secret": {func(g *ir.Gateway) {
			g.Listeners[0].FilterChains[2].CertificateSecrets = []string{"default/nope"}
		}, "tls-443", `"default/nope" is not among`},
		"duplicate SNI across kinds": {func(g *ir.Gateway) {
			g.Listeners[0].FilterChains[0].ServerNames = []string{"web.example.com"}
		}, "tls-443", "both match server name"},
		"TCP listener certificates": {func(g *ir.Gateway) {
			g.Listeners[1].FilterChains[0].CertificateSecrets = []string{secretA}
		}, "tcp-9000", "has no certificates"},
		"TCP listener server names": {func(g *ir.Gateway) {
			g.Listeners[1].FilterChains[0].ServerNames = []string{"a.example.com"}
		}, "tcp-9000", "selects nothing by server name"},
		"TCP listener two chains": {func(g *ir.Gateway) {
			g.Listeners[1].FilterChains = append(g.Listeners[1].FilterChains, &ir.FilterChain{Name: "x", TCP: tcpRoute("x")})
		}, "tcp-9000", "exactly one filter chain"},
		"TCP listener no chain": {func(g *ir.Gateway) { g.Listeners[1].FilterChains = nil }, "tcp-9000", "exactly one filter chain"},
		"TCP listener routes HTTP": {func(g *ir.Gateway) {
			g.Listeners[1].FilterChains[0].RouteConfig = g.Listeners[0].FilterChains[3].RouteConfig
		}, "tcp-9000", "routes no HTTP"},
		"TCP listener without TCP": {func(g *ir.Gateway) { g.Listeners[1].FilterChains[0].TCP = nil }, "tcp-9000", "forwards connections"},
		"UDP route on TCP listener": {func(g *ir.Gateway) {
			g.Listeners[1].UDP = &ir.UDPForward{Name: "x", Backends: []ir.WeightedBackend{to(clusterDNSA, 1)}}
		}, "tcp-9000", "has no UDP route"},
		"HTTP listener forwarding": {func(g *ir.Gateway) {
			g.Listeners[1].Protocol = ir.ProtocolHTTP
		}, "tcp-9000", "an HTTP listener's chain routes HTTP"},
		"UDP listener with chains": {func(g *ir.Gateway) {
			g.Listeners[2].FilterChains = []*ir.FilterChain{{Name: "x", TCP: tcpRoute("x", to(clusterTCPA, 1))}}
		}, "udp-53", "a UDP listener needs a UDP route and no filter chains"},
		"UDP listener without route": {func(g *ir.Gateway) { g.Listeners[2].UDP = nil }, "udp-53", "a UDP listener needs a UDP route"},
		"TCP backend not a cluster": {func(g *ir.Gateway) {
			g.Listeners[1].FilterChains[0].TCP.Backends[0].Cluster = "default/nope/1"
		}, "tcp-9000", `"default/nope/1" is not among the gateway's clusters`},
		"weight 0 backend not a cluster": {func(g *ir.Gateway) {
			g.Listeners[1].FilterChains[0].TCP.Backends[1].Cluster = "default/nope/1"
		}, "tcp-9000", `"default/nope/1" is not among the gateway's clusters`},
		"passthrough backend not a cluster": {func(g *ir.Gateway) {
			g.Listeners[0].FilterChains[1].TCP.Backends[0].Cluster = ""
		}, "tls-443", `"" is not among the gateway's clusters`},
		"UDP backend not a cluster": {func(g *ir.Gateway) {
			g.Listeners[2].UDP.Backends[1].Cluster = "default/nope/53/udp"
		}, "udp-53", `"default/nope/53/udp" is not among the gateway's clusters`},
		"TCP route to a UDP cluster": {func(g *ir.Gateway) {
			g.Listeners[1].FilterChains[0].TCP.Backends[0].Cluster = clusterDNSA
		}, "tcp-9000", "is a UDP cluster"},
		"UDP route to a TCP cluster": {func(g *ir.Gateway) {
			g.Listeners[2].UDP.Backends[0].Cluster = clusterTCPA
		}, "udp-53", "is not a UDP cluster"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			gw := l4Gateway()
			c.change(gw)
			res, err := Translate(gw)
			if err != nil {
				t.Fatalf("the Gateway failed for one listener: %v", err)
			}
			if len(res.Problems) != 1 || res.Problems[0].Listener != c.listener || !strings.Contains(res.Problems[0].Err, c.want) {
				t.Fatalf("problems = %+v, want one of listener %s containing %q", res.Problems, c.listener, c.want)
			}
			if len(res.Listeners) != 2 || slices.Contains(names(res.Listeners), "default/gw/"+c.listener) {
				t.Errorf("listeners served: %v", names(res.Listeners))
			}
			checkValid(t, res)
		})
	}
}

// A TCP chain without server names is the HTTPS listener's catch-all,
// after the chains selected by SNI; with another catch-all it is an error.
func TestL4CatchAll(t *testing.T) {
	gw := l4Gateway()
	https := gw.Listeners[0]
	https.FilterChains = append([]*ir.FilterChain{{Name: "tls-443/any", TCP: tcpRoute("tlsroute/default/any/rule/0", to(clusterTLSB, 1))}}, https.FilterChains...)
	res := mustTranslate(t, gw)
	l := find[*listenerv3.Listener](t, res.Listeners, "default/gw/tls-443")
	last := l.FilterChains[len(l.FilterChains)-1]
	if last.Name != "tls-443/any" || len(last.FilterChainMatch.ServerNames) != 0 || last.FilterChainMatch.TransportProtocol != "tls" {
		t.Fatalf("last chain %v", last)
	}
	https.FilterChains[1].ServerNames = []string{"*"}
	if res := mustTranslate(t, gw); len(res.Problems) != 1 || !strings.Contains(res.Problems[0].Err, "both match any server name") {
		t.Fatalf("two catch-alls: %+v", res.Problems)
	}
}

func TestL4Deterministic(t *testing.T) {
	a := mustTranslate(t, l4Gateway())
	identical(t, mustTranslate(t, l4Gateway()), a, "first translation")
	gw := l4Gateway()
	fcs := gw.Listeners[0].FilterChains
	fcs[0], fcs[3] = fcs[3], fcs[0]
	if v := mustTranslate(t, gw).Version; v != a.Version {
		t.Errorf("reordered chains: version %s, want %s", v, a.Version)
	}
	changes := map[string]func(*ir.Gateway){
		"TCP weight":   func(g *ir.Gateway) { g.Listeners[1].FilterChains[0].TCP.Backends[0].Weight = 4 },
		"UDP weight":   func(g *ir.Gateway) { g.Listeners[2].UDP.Backends[0].Weight = 2 },
		"UDP endpoint": func(g *ir.Gateway) { g.Clusters[0].Endpoints[0].Port = 5354 },
		"passthrough":  func(g *ir.Gateway) { g.Listeners[0].FilterChains[0].TCP.Backends[0].Cluster = clusterTLSB },
		"route name":   func(g *ir.Gateway) { g.Listeners[2].UDP.Name = "udproute/default/other/rule/0" },
		"timeout": func(g *ir.Gateway) {
			g.Proxy = &ir.ProxySettings{Timeouts: ir.Timeouts{ConnectionIdle: ptr(time.Minute)}}
		},
	}
	for what, change := range changes {
		gw := l4Gateway()
		change(gw)
		if v := mustTranslate(t, gw).Version; v == a.Version {
			t.Errorf("changed %s: same version %s", what, v)
		}
	}
}

// cowListener returns a copy of g whose listener i is a copy the caller
// may edit, its chains copied too.
func cowListener(g *ir.Gateway, i int) (*ir.Gateway, *ir.Listener) {
	c := cowGateway(g)
	l := *c.Listeners[i]
	l.FilterChains = slices.Clone(l.FilterChains)
	for k, fc := range l.FilterChains {
		f := *fc
		if f.TCP != nil {
			f.TCP = &ir.TCPForward{Name: f.TCP.Name, Backends: slices.Clone(f.TCP.Backends)}
		}
		l.FilterChains[k] = &f
	}
	if l.UDP != nil {
		l.UDP = &ir.UDPForward{Name: l.UDP.Name, Backends: slices.Clone(l.UDP.Backends)}
	}
	c.Listeners[i] = &l
	return c, &l
}

// A Translator reuses TCP and UDP listeners only while their routes and
// the clusters they name are unchanged, and its output is always that of
// a fresh translation.
func TestTranslatorL4(t *testing.T) {
	x := NewTranslator()
	gw := l4Gateway()
	prev, err := x.Translate(gw)
	if err != nil {
		t.Fatal(err)
	}
	sameAsFresh(t, gw, prev)
	steps := []struct {
		name     string
		edit     func(*ir.Gateway) *ir.Gateway
		same     []string // resources that must be the previous objects
		problems int
	}{
		{"TCP weights", func(g *ir.Gateway) *ir.Gateway {
			c, l := cowListener(g, 1)
			l.FilterChains[0].TCP.Backends[0].Weight = 7
			return c
		}, []string{"L/default/gw/tls-443", "L/default/gw/udp-53", "C/" + clusterTCPA, "E/" + clusterTCPA}, 0},
		{"equal copy", func(g *ir.Gateway) *ir.Gateway {
			c, _ := cowListener(g, 0)
			c, _ = cowListener(c, 2)
			return c
		}, []string{"L/default/gw/tls-443", "L/default/gw/udp-53", "L/default/gw/tcp-9000"}, 0},
		{"UDP backend", func(g *ir.Gateway) *ir.Gateway {
			c, l := cowListener(g, 2)
			l.UDP.Backends = l.UDP.Backends[:1]
			return c
		}, []string{"L/default/gw/tls-443", "L/default/gw/tcp-9000"}, 0},
		{"passthrough cluster gone", func(g *ir.Gateway) *ir.Gateway {
			c := cowGateway(g)
			c.Clusters = slices.DeleteFunc(c.Clusters, func(cl *ir.Cluster) bool { return cl.Name == clusterTLSB })
			return c
		}, []string{"L/default/gw/tcp-9000", "L/default/gw/udp-53"}, 1},
		{"passthrough cluster back", func(g *ir.Gateway) *ir.Gateway {
			c := cowGateway(g)
			c.Clusters = l4Gateway().Clusters
			return c
		}, nil, 0},
		{"UDP cluster becomes TCP", func(g *ir.Gateway) *ir.Gateway {
			c := cowGateway(g)
			cl := *c.Clusters[0]
			cl.Protocol = ir.UpstreamTCP
			c.Clusters[0] = &cl
			return c
		}, []string{"L/default/gw/tls-443", "L/default/gw/tcp-9000"}, 1},
		{"and back", func(g *ir.Gateway) *ir.Gateway {
			c := cowGateway(g)
			cl := *c.Clusters[0]
			cl.Protocol = ir.UpstreamUDP
			c.Clusters[0] = &cl
			return c
		}, []string{"L/default/gw/tls-443", "L/default/gw/tcp-9000"}, 0},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			next := s.edit(gw)
			got, err := x.Translate(next)
			if err != nil {
				t.Fatal(err)
			}
			sameAsFresh(t, next, got)
			if fresh := mustTranslate(t, next); !slices.Equal(fresh.Problems, got.Problems) {
				t.Errorf("problems %+v, fresh translation %+v", got.Problems, fresh.Problems)
			}
			if len(got.Problems) != s.problems {
				t.Errorf("problems %+v, want %d", got.Problems, s.problems)
			}
			for _, id := range s.same {
				if a, b := byID(t, prev, id), byID(t, got, id); a != b {
					t.Errorf("%s translated again", id)
				}
			}
			gw, prev = next, got
		})
	}
	// The endpoints of a cluster that changes transport change protocol,
	// on every path of the cluster memo (in place, merged and full).
	for _, path := range []string{"in place", "merged", "full"} {
		x := NewTranslator()
		gw := l4Gateway()
		if _, err := x.Translate(gw); err != nil {
			t.Fatal(err)
		}
		c := cowGateway(gw)
		cl := *c.Clusters[1]
		cl.Protocol = ir.UpstreamTCP
		c.Clusters[1] = &cl
		switch path {
		case "merged":
			c.Clusters = append(c.Clusters, &ir.Cluster{Name: "default/zz/1", Protocol: ir.UpstreamTCP})
		case "full":
			slices.Reverse(c.Clusters)
		}
		got, err := x.Translate(c)
		if err != nil {
			t.Fatal(err)
		}
		sameAsFresh(t, c, got)
		cla := find[*endpointv3.ClusterLoadAssignment](t, got.Endpoints, clusterDNSB)
		if p := cla.Endpoints[0].LbEndpoints[0].GetEndpoint().Address.GetSocketAddress().Protocol; p != corev3.SocketAddress_TCP {
			t.Errorf("%s: endpoints of %s kept protocol %v", path, clusterDNSB, p)
		}
	}
}
