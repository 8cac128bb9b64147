package bench

// TCPRoute figures: the propagation of a new TCPRoute to the follower's
// ADS client (here) and, through the real Envoy, to the first connection
// that reaches a backend (tcpe2e.go).
//
// The probe Gateway has three TCP listeners besides its HTTP one, each
// with its own role, because a TCP listener serves one route (the oldest
// of those attached, internal/gatewayapi/build_l4.go) and keeps its port
// without one (connections are accepted and closed at once):
//
//   - TCPProbeListener: the ADS probes attach their TCPRoute to it, one at
//     a time; between probes it has no route;
//   - e2eTCPListener: the same for the probes through Envoy;
//   - e2eTCPStableListener: a route that stays, to the Envoy loop's TCP
//     backend, so that the probes through Envoy find that backend's
//     cluster in place, as the HTTP probes through Envoy find theirs (the
//     stable HTTP route's).
//
// "Seen" for the ADS probes (tcpServed): the client holds a listener on
// the probe port whose tcp_proxy filter has a stat prefix naming the
// probe route and every cluster that filter forwards to. The HTTP probe's
// marker (a path in any resource) has no TCP equivalent: a TCPRoute
// carries no string of its own into the listener but its name, which
// Portico puts into the tcp_proxy stat prefix ("tcproute_<ns>_<name>_rule_0";
// a test reads it from the real translator, TestTCPServedByTranslation).
// Requiring the clusters too makes the figure the config Envoy needs to
// forward: the listener's change alone would point at a cluster it may
// not have yet.

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The TCP listeners of the probe Gateway (section names and ports).
const (
	TCPProbeListener     = "tcp-probe"
	TCPProbePort         = 9000
	e2eTCPListener       = "tcp-e2e"
	e2eTCPPort           = 9001
	e2eTCPStableListener = "tcp-stable"
	e2eTCPStablePort     = 9002
)

// Labels (benchLabel) of the TCPRoutes of the ADS probes and of those of
// the Envoy loop.
const (
	tcpProbeLabel = "tcp-probe"
	e2eTCPLabel   = "e2e-tcp"
)

// ProbeGatewayObject is the probe Gateway: Gateway(ProbeGateway) with the
// TCP listeners of the TCPRoute probes, which admit routes from every
// namespace.
func ProbeGatewayObject() *gwv1.Gateway {
	gw := Gateway(ProbeGateway)
	all := gwv1.NamespacesFromAll
	for _, l := range []struct {
		name string
		port int
	}{{TCPProbeListener, TCPProbePort}, {e2eTCPListener, e2eTCPPort}, {e2eTCPStableListener, e2eTCPStablePort}} {
		gw.Spec.Listeners = append(gw.Spec.Listeners, gwv1.Listener{Name: gwv1.SectionName(l.name),
			Port: gwv1.PortNumber(l.port), Protocol: gwv1.TCPProtocolType,
			AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}}})
	}
	return gw
}

// upsertGateway creates gw, or replaces the spec of the existing one (a
// cluster reused with -kubeconfig may have a probe Gateway from before
// its TCP listeners).
func upsertGateway(ctx context.Context, c client.Client, gw *gwv1.Gateway) error {
	var cur gwv1.Gateway
	err := c.Get(ctx, client.ObjectKeyFromObject(gw), &cur)
	if apierrors.IsNotFound(err) {
		return c.Create(ctx, gw)
	}
	if err != nil {
		return err
	}
	cur.Spec = gw.Spec
	return c.Update(ctx, &cur)
}

// TCPRoute is a TCPRoute attached to listener section of the probe
// Gateway, forwarding to port of Service svc in ns.
func TCPRoute(ns, name, label, section, svc string, port int) *gwv1.TCPRoute {
	ref := parentRef(ProbeGateway)
	ref.SectionName = ptr.To(gwv1.SectionName(section))
	return &gwv1.TCPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{benchLabel: label}},
		Spec: gwv1.TCPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{ref}},
			Rules: []gwv1.TCPRouteRule{{BackendRefs: []gwv1.BackendRef{{BackendObjectReference: gwv1.BackendObjectReference{
				Name: gwv1.ObjectName(svc), Port: ptr.To(gwv1.PortNumber(port))}}}}},
		},
	}
}

// deleteTCPRoutes deletes the TCPRoutes labelled label in every route
// namespace: a probe route left by a failed delete (or an earlier run on
// a reused cluster) would be older than the next probes' and keep their
// listener.
func deleteTCPRoutes(ctx context.Context, c client.Client, label string) error {
	for k := range RouteNS {
		err := c.DeleteAllOf(ctx, &gwv1.TCPRoute{}, client.InNamespace(RouteNamespace(k)), client.MatchingLabels{benchLabel: label})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// tcpServed reports whether state (an ADS client's resources by type and
// name) serves a TCP route named by marker on port: a listener on port
// has a tcp_proxy filter whose stat prefix contains marker, and every
// cluster that filter forwards to (its cluster, or each of its weighted
// clusters) is held. Listeners whose encoding lacks marker are not
// decoded.
func tcpServed(state map[string]map[string]*discoveryv3.Resource, port uint32, marker string) bool {
	clusters := state[resourcev3.ClusterType]
	for _, r := range state[resourcev3.ListenerType] {
		if r.Resource == nil || !bytes.Contains(r.Resource.Value, []byte(marker)) {
			continue
		}
		l := &listenerv3.Listener{}
		if r.Resource.UnmarshalTo(l) != nil || l.GetAddress().GetSocketAddress().GetPortValue() != port {
			continue
		}
		chains := l.FilterChains
		if l.DefaultFilterChain != nil {
			chains = append(chains[:len(chains):len(chains)], l.DefaultFilterChain)
		}
		for _, fc := range chains {
			for _, f := range fc.GetFilters() {
				tp := &tcpproxyv3.TcpProxy{}
				if f.GetTypedConfig() == nil || f.GetTypedConfig().UnmarshalTo(tp) != nil || !strings.Contains(tp.StatPrefix, marker) {
					continue
				}
				if names := tcpProxyClusters(tp); len(names) > 0 && allHeld(clusters, names) {
					return true
				}
			}
		}
	}
	return false
}

// tcpProxyClusters are the clusters tcp_proxy forwards to.
func tcpProxyClusters(tp *tcpproxyv3.TcpProxy) []string {
	if c := tp.GetCluster(); c != "" {
		return []string{c}
	}
	var out []string
	for _, w := range tp.GetWeightedClusters().GetClusters() {
		out = append(out, w.Name)
	}
	return out
}

func allHeld(held map[string]*discoveryv3.Resource, names []string) bool {
	for _, n := range names {
		if held[n] == nil {
			return false
		}
	}
	return true
}

// ProbeTCPRouteOnce runs TCPRoute probe k of stage n against the proxy a:
// a TCPRoute on TCPProbeListener to the "live" Service of its namespace
// (the backend of the HTTP probes) is created; Create is the time until a
// holds the listener and clusters that serve it (tcpServed); the route is
// then deleted, and Delete is the time until they no longer do.
func ProbeTCPRouteOnce(ctx context.Context, c client.Client, a *ADS, n, k int) (RouteProbe, error) {
	var p RouteProbe
	// The name ends in a letter: "-7-z" is no substring of "-70-z".
	name := fmt.Sprintf("tcp-probe-%d-%d-z", n, k)
	route := TCPRoute(RouteNamespace(k), name, tcpProbeLabel, TCPProbeListener, "live", 8080)
	cond := a.Cond(func(st map[string]map[string]*discoveryv3.Resource) bool {
		return tcpServed(st, TCPProbePort, name)
	}, resourcev3.ListenerType, resourcev3.ClusterType)
	defer a.RemoveCond(cond)
	if a.Holds(cond) {
		return p, fmt.Errorf("TCPRoute %s served before its create", name)
	}
	t0 := time.Now()
	if err := c.Create(ctx, route); err != nil {
		return p, fmt.Errorf("creating probe TCPRoute: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	seen, err := a.WaitCond(wctx, cond, true)
	cancel()
	if err != nil {
		_ = c.Delete(context.Background(), route)
		return p, fmt.Errorf("TCPRoute %s: %w", name, err)
	}
	p.Create = seen.Sub(t0)
	t1 := time.Now()
	if err := c.Delete(ctx, route); err != nil {
		return p, fmt.Errorf("deleting probe TCPRoute: %w", err)
	}
	wctx, cancel = context.WithTimeout(ctx, ProbeTimeout)
	gone, err := a.WaitCond(wctx, cond, false)
	cancel()
	if err != nil {
		return p, fmt.Errorf("TCPRoute %s still served after its delete: %w", name, err)
	}
	p.Delete = gone.Sub(t1)
	return p, nil
}

// tcpRouteProbes runs up to cfg.Probes TCPRoute probes, numbered from
// offset, after deleting probe routes left over.
func (s *suite) tcpRouteProbes(ctx context.Context, a *ADS, n, offset int) *ProbeStats {
	if err := deleteTCPRoutes(ctx, s.cl.Client, tcpProbeLabel); err != nil {
		return &ProbeStats{Failures: 1, FirstError: "deleting leftover probe TCPRoutes: " + err.Error()}
	}
	return s.createDeleteProbes(ctx, func(k int) (RouteProbe, error) {
		return ProbeTCPRouteOnce(ctx, s.cl.Client, a, n, offset+k)
	}, nil, nil)
}
