package translate

// UDP listeners (ir.ProtocolUDP): a listener of socket protocol UDP whose
// only filter is the udp_proxy listener filter, forwarding the datagrams
// of each session (client address and port) to one cluster. Replies go
// back to the client from the address and port it sent to (udp_proxy
// sends them from the listener's socket, with the datagram's original
// destination as source).
//
// Weights: udp_proxy's Route names one cluster, and Envoy 1.40 has no
// weighted clusters for it; its matcher chooses the route instead. The
// matcher hashes the client's source port (envoy.matching.inputs.
// source_port, xxHash64 with a fixed seed) modulo the sum W of the
// weights, and the consistent_hashing input matcher (hash % W >=
// threshold) cuts [0, W) into one range per target, of its weight's size:
// the matchers are tried from the last range down, each matching from its
// start, and the first range is the matcher's on_no_match. Each new
// client socket therefore picks a target with probability weight/W, and
// a session keeps its target: udp_proxy routes a session once, on its
// first datagram. Targets, weight 0, merging and failing closed are those
// of TCP routes (tcp.go, l4Targets): a share of an Invalid backend routes
// to InvalidBackendCluster, which does not exist, so its datagrams are
// dropped.
//
// Sessions end after udp_proxy's default idle timeout (1 minute); each
// counts against its cluster's max_connections circuit breaker while it
// lives.

import (
	"fmt"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	udpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	networkinputsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/network/v3"
	consistenthashingv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/input_matchers/consistent_hashing/v3"
	"google.golang.org/protobuf/proto"

	"github.com/portico-dev/portico/internal/ir"
)

const (
	// udpProxyFilter is the name of the UDP proxy listener filter.
	udpProxyFilter = "envoy.filters.udp_listener.udp_proxy"
	// udpSplitSeed seeds the hash of source ports that splits sessions
	// by weight. Fixed, so that a client port keeps its backend across
	// configuration versions and proxies.
	udpSplitSeed = 0x706f727469636f // "portico"
)

// udpListener translates a UDP listener.
func (t *translator) udpListener(name string, l *ir.Listener) (*listenerv3.Listener, error) {
	if len(l.FilterChains) != 0 || l.UDP == nil {
		return nil, fmt.Errorf("a UDP listener needs a UDP route and no filter chains")
	}
	targets, err := t.l4Targets(l.UDP.Backends, true)
	if err != nil {
		return nil, fmt.Errorf("UDP route %q: %w", l.UDP.Name, err)
	}
	m, err := udpMatcher(targets)
	if err != nil {
		return nil, fmt.Errorf("UDP route %q: %w", l.UDP.Name, err)
	}
	stat := statName(l.Name)
	if l.UDP.Name != "" {
		stat = statName(l.UDP.Name)
	}
	cfg, err := toAny("UDP proxy", &udpproxyv3.UdpProxyConfig{
		StatPrefix:     stat,
		RouteSpecifier: &udpproxyv3.UdpProxyConfig_Matcher{Matcher: m},
	})
	if err != nil {
		return nil, err
	}
	out := &listenerv3.Listener{
		Name: name,
		ListenerFilters: []*listenerv3.ListenerFilter{{
			Name:       udpProxyFilter,
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: cfg},
		}},
	}
	bindAddresses(out, t.gw.Addresses, l.Port, corev3.SocketAddress_UDP)
	return out, nil
}

// udpMatcher is the route matcher of udp_proxy sending each session to
// one of targets by weight (see the file comment).
func udpMatcher(targets []weighted) (*matcherv3.Matcher, error) {
	first, err := udpRoute(targets[0].name)
	if err != nil {
		return nil, err
	}
	m := &matcherv3.Matcher{OnNoMatch: first}
	if len(targets) == 1 {
		return m, nil
	}
	input, err := typedExtension("envoy.matching.inputs.source_port", &networkinputsv3.SourcePortInput{})
	if err != nil {
		return nil, err
	}
	weights := scaledWeights(targets)
	starts := make([]uint32, len(weights))
	var total uint32
	for i, w := range weights {
		starts[i] = total
		total += w
	}
	list := &matcherv3.Matcher_MatcherList{}
	for i := len(targets) - 1; i >= 1; i-- {
		hashed, err := typedExtension("envoy.matching.matchers.consistent_hashing", &consistenthashingv3.ConsistentHashing{
			Threshold: starts[i],
			Modulo:    total,
			Seed:      udpSplitSeed,
		})
		if err != nil {
			return nil, err
		}
		action, err := udpRoute(targets[i].name)
		if err != nil {
			return nil, err
		}
		list.Matchers = append(list.Matchers, &matcherv3.Matcher_MatcherList_FieldMatcher{
			Predicate: &matcherv3.Matcher_MatcherList_Predicate{
				MatchType: &matcherv3.Matcher_MatcherList_Predicate_SinglePredicate_{
					SinglePredicate: &matcherv3.Matcher_MatcherList_Predicate_SinglePredicate{
						Input:   proto.CloneOf(input),
						Matcher: &matcherv3.Matcher_MatcherList_Predicate_SinglePredicate_CustomMatch{CustomMatch: hashed},
					},
				},
			},
			OnMatch: action,
		})
	}
	m.MatcherType = &matcherv3.Matcher_MatcherList_{MatcherList: list}
	return m, nil
}

// udpRoute is the matcher action routing to cluster.
func udpRoute(cluster string) (*matcherv3.Matcher_OnMatch, error) {
	action, err := typedExtension("route", &udpproxyv3.Route{Cluster: cluster})
	if err != nil {
		return nil, err
	}
	return &matcherv3.Matcher_OnMatch{OnMatch: &matcherv3.Matcher_OnMatch_Action{Action: action}}, nil
}

// typedExtension packs m (validated) as a named extension config of a
// matcher.
func typedExtension(name string, m proto.Message) (*xdscorev3.TypedExtensionConfig, error) {
	a, err := toAny(name, m)
	if err != nil {
		return nil, err
	}
	return &xdscorev3.TypedExtensionConfig{Name: name, TypedConfig: a}, nil
}
