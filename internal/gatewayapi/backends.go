package gatewayapi

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/refs"
	"github.com/portico-dev/portico/internal/resource"
)

// maxWeight is the largest backendRef weight (the CRD maximum); larger
// values are clamped so that sums of weights cannot overflow.
const maxWeight = 1000000

// clusterRef is a Service port as a backendRef of a class of route kinds
// names it.
type clusterRef struct {
	namespace, name string
	port            int32
	class           backendClass
}

// backendClass is how a kind of route uses its backends (its entry's
// upstream, kinds.go): HTTP (the port's appProtocol matters), TCP (bytes
// forwarded as they are) or UDP (the Service's UDP port).
type backendClass uint8

const (
	backendHTTP backendClass = iota
	backendTCP
	backendUDP
)

// clusterDef is one port of one Service that routes refer to.
type clusterDef struct {
	name string
	svc  resource.Key
	port corev1.ServicePort
	// h2 is set when the port's appProtocol asks for HTTP/2 (h2c, gRPC).
	h2 bool
	// udp: the Service's UDP port (named "<ns>/<svc>/<port>/udp").
	udp bool
	// tls is the BackendTLSPolicy applied to the port (nil: none), and
	// evals every policy covering it, whose reads a user of the cached
	// definition records again (backendtls.go).
	tls   *policyEval
	evals []*policyEval
}

// resolveBackend checks a backendRef (or mirror backendRef) of a route and
// returns its cluster; on failure the problem has a ResolvedRefs reason.
func (t *translator) resolveBackend(rs *routeState, ref gwv1.BackendObjectReference) (*clusterDef, *problem) {
	b := refs.BackendOf(rs.ns(), ref)
	ns, name := b.Namespace, b.Name
	if !b.IsService() {
		return nil, &problem{string(gwv1.RouteReasonInvalidKind), fmt.Sprintf("backend %s %s is not supported; only core Services are", b.ID(), groupKind(b.Group, b.Kind))}
	}
	// Read (and recorded) whatever the outcome: creating the Service or a
	// grant changes it.
	svc := t.in.Service(resource.Key{Namespace: ns, Name: name})
	from := objRef{gwv1.GroupName, rs.kind.String(), rs.ns()}
	if !t.allows(from, b.Object) {
		return nil, &problem{string(gwv1.RouteReasonRefNotPermitted),
			fmt.Sprintf("no ReferenceGrant in namespace %s allows a %s of namespace %s to use Service %s", ns, rs.kind, rs.ns(), b.ID())}
	}
	if !b.HasPort {
		return nil, &problem{string(gwv1.RouteReasonBackendNotFound), fmt.Sprintf("backend Service %s has no port; port is required for Services", b.ID())}
	}
	port := b.Port
	class := routeKinds[rs.kind].upstream
	var pols []*gwv1.BackendTLSPolicy
	if class != backendUDP {
		pols = t.in.BackendTLSPolicies(resource.Key{Namespace: ns, Name: name}) // recorded, before the cache
	}
	// The common case, without building strings.
	if def := t.clusterDef(clusterRef{ns, name, port, class}); def != nil {
		for _, e := range def.evals {
			t.touchCAs(e.cas)
		}
		return def, nil
	}
	id := b.ID()
	if svc == nil {
		return nil, &problem{string(gwv1.RouteReasonBackendNotFound), fmt.Sprintf("Service %s does not exist", id)}
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil, &problem{string(gwv1.RouteReasonInvalidKind), fmt.Sprintf("Service %s is of type ExternalName, which is not supported", id)}
	}
	proto := corev1.ProtocolTCP
	if class == backendUDP {
		proto = corev1.ProtocolUDP
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if p.Port == port && (p.Protocol == proto || (p.Protocol == "" && proto == corev1.ProtocolTCP)) {
			sp = p
			break
		}
	}
	if sp == nil {
		return nil, &problem{string(gwv1.RouteReasonBackendNotFound), fmt.Sprintf("Service %s has no %s port %d", id, proto, port)}
	}
	def := &clusterDef{name: id + "/" + strconv.Itoa(int(port)), svc: resource.Key{Namespace: ns, Name: name}, port: *sp}
	if class == backendUDP {
		def.name += "/udp"
		def.udp = true
	}
	if len(pols) > 0 {
		def.tls, def.evals = t.servicePortTLS(def.svc, sp, pols)
	}
	if sp.AppProtocol != nil && class == backendHTTP {
		switch strings.ToLower(*sp.AppProtocol) {
		case "kubernetes.io/h2c", "h2c", "grpc":
			def.h2 = true
		case "https", "kubernetes.io/wss", "tls":
			if def.tls == nil {
				return nil, &problem{string(gwv1.RouteReasonUnsupportedProtocol),
					fmt.Sprintf("Service %s port %d has appProtocol %q, and no BackendTLSPolicy applies to it", id, port, *sp.AppProtocol)}
			}
		}
	}
	return t.keepClusterDef(clusterRef{ns, name, port, class}, def), nil
}

// clusterDef returns the cluster resolved for ref so far, or nil.
func (t *translator) clusterDef(ref clusterRef) *clusterDef {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.clusterByRef[ref]
}

// keepClusterDef keeps def as the cluster of ref, unless another
// goroutine kept one first (compileAhead): the one kept is returned, so
// that every route uses the same definition (they are equal: a definition
// depends on the Service, the port and the policies only).
func (t *translator) keepClusterDef(ref clusterRef, def *clusterDef) *clusterDef {
	t.mu.Lock()
	defer t.mu.Unlock()
	if kept := t.clusterByRef[ref]; kept != nil {
		return kept
	}
	t.clusterByRef[ref] = def
	return def
}

// endpointsOf computes (once per cluster and cache) the ready endpoints of a cluster: addresses of
// IPv4 and IPv6 EndpointSlices of the Service whose endpoints are ready (a
// nil ready counts as ready), with the target port of the slice port named
// like the Service port. They are deduplicated and sorted.
func (t *translator) endpointsOf(def *clusterDef) []ir.Endpoint {
	if e, ok := t.cache.Endpoints(def.name); ok {
		return e
	}
	e := clusterEndpoints(t.in.EndpointSlices(def.svc), def.port.Name, def.udp)
	t.cache.KeepEndpoints(def.name, def.svc, e)
	return e
}

// clusterEndpoints computes the ready endpoints of the port named portName
// of a Service from its EndpointSlices (see endpointsOf): the slice ports
// of protocol UDP for a UDP cluster, of TCP (or unset) otherwise.
func clusterEndpoints(eps []*discoveryv1.EndpointSlice, portName string, udp bool) []ir.Endpoint {
	proto := corev1.ProtocolTCP
	if udp {
		proto = corev1.ProtocolUDP
	}
	// The target port of each slice (0: none), and an upper bound of the
	// endpoints, so that the list is allocated once.
	var targets [8]int32
	bound := 0
	for i, es := range eps {
		t := sliceTarget(es, portName, proto, udp)
		if i < len(targets) {
			targets[i] = t
		}
		if t != 0 {
			for _, ep := range es.Endpoints {
				bound += len(ep.Addresses)
			}
		}
	}
	if bound == 0 {
		return nil
	}
	out := make([]ir.Endpoint, 0, bound)
	for i, es := range eps {
		var target int32
		if i < len(targets) {
			target = targets[i]
		} else {
			target = sliceTarget(es, portName, proto, udp)
		}
		if target == 0 {
			continue
		}
		for _, ep := range es.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				if a == "" {
					continue
				}
				out = append(out, ir.Endpoint{Address: a, Port: uint32(target)})
			}
		}
	}
	if len(out) == 0 {
		return nil // as for no slices
	}
	// Sorted, then deduplicated: equal endpoints are adjacent.
	slices.SortFunc(out, func(a, b ir.Endpoint) int {
		if c := strings.Compare(a.Address, b.Address); c != 0 {
			return c
		}
		return cmp.Compare(a.Port, b.Port)
	})
	return slices.Compact(out)
}

// sliceTarget is the target port of the port named portName of
// protocol proto (UDP when udp) in an IPv4 or IPv6 EndpointSlice, 0 when
// it has none (or the slice is of another address type).
func sliceTarget(es *discoveryv1.EndpointSlice, portName string, proto corev1.Protocol, udp bool) int32 {
	if es == nil || (es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6) {
		return 0
	}
	for _, p := range es.Ports {
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		if name != portName || p.Port == nil || (p.Protocol != nil && *p.Protocol != proto) || (p.Protocol == nil && udp) {
			continue
		}
		if t := *p.Port; t >= 1 && t <= 65535 {
			return t
		}
		return 0
	}
	return 0
}

// backendSet accumulates the backendRefs of one rule.
type backendSet struct {
	backends []*ir.WeightedBackend // valid, weight > 0, one per cluster
	invalid  uint32                // total weight of unresolved refs
	clusters []*clusterDef
	// store holds the backends' values (reserve).
	store []ir.WeightedBackend
}

// smallBackends are the lists of a rule with few backendRefs, allocated
// together (reserve); one more pointer for forward's invalid share.
type smallBackends struct {
	store    [2]ir.WeightedBackend
	backends [3]*ir.WeightedBackend
	clusters [2]*clusterDef
}

// reserve makes room for n backendRefs, so that adding them allocates
// nothing more.
func (b *backendSet) reserve(n int) {
	if n <= len(smallBackends{}.store) {
		if n > 0 {
			s := &smallBackends{}
			b.store, b.backends, b.clusters = s.store[:0], s.backends[:0], s.clusters[:0]
		}
		return
	}
	b.store = make([]ir.WeightedBackend, 0, n)
	b.backends = make([]*ir.WeightedBackend, 0, n+1)
	b.clusters = make([]*clusterDef, 0, n)
}

// add adds a backendRef: its cluster (nil: invalid), weight and own
// header filters. Refs of one cluster merge when neither has filters.
func (b *backendSet) add(def *clusterDef, weight *int32, headers *ir.BackendFilters) {
	w := backendWeight(weight)
	if def == nil {
		b.invalid += w
		return
	}
	if w == 0 {
		return
	}
	if headers == nil {
		for _, wb := range b.backends {
			if wb.Cluster == def.name && wb.Filters == nil {
				wb.Weight += w
				return
			}
		}
	}
	var wb *ir.WeightedBackend
	if len(b.store) < cap(b.store) {
		b.store = append(b.store, ir.WeightedBackend{Cluster: def.name, Weight: w, Filters: headers})
		wb = &b.store[len(b.store)-1]
	} else {
		wb = &ir.WeightedBackend{Cluster: def.name, Weight: w, Filters: headers}
	}
	b.backends = append(b.backends, wb)
	if !slices.Contains(b.clusters, def) {
		b.clusters = append(b.clusters, def)
	}
}

// backendWeight is a backendRef weight: 1 when unset, negative values are
// 0 and values above the CRD maximum are clamped.
func backendWeight(w *int32) uint32 {
	switch {
	case w == nil:
		return 1
	case *w < 0:
		return 0
	case *w > maxWeight:
		return maxWeight
	}
	return uint32(*w)
}

// action returns the forwarding action of the rule, or nil when no request
// can reach a valid backend (no backendRefs, all invalid, or all weights
// zero): such a rule answers 500.
func (b *backendSet) forward() *ir.Forward {
	if len(b.backends) == 0 {
		return nil
	}
	f := &ir.Forward{Backends: b.backends}
	if b.invalid > 0 {
		f.Backends = append(f.Backends, &ir.WeightedBackend{Weight: b.invalid, Invalid: true})
	}
	return f
}
