package statustree

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/refs"
	"github.com/portico-dev/portico/internal/resource"
)

// backends returns the distinct backendRefs of a route, in spec order,
// each with whether it resolves (see the package documentation).
// resolvedRefs is the route's ResolvedRefs condition for the parentRef,
// nil when unknown.
func (b *builder) backends(kind resource.Kind, obj resource.Object, routeNS string, resolvedRefs *metav1.Condition) []Backend {
	var said []string // the parts of a ResolvedRefs=False message
	if resolvedRefs != nil && resolvedRefs.Status == metav1.ConditionFalse {
		said = strings.Split(resolvedRefs.Message, "; ")
	}
	var out []Backend
	seen := map[refs.Backend]bool{}
	for rb := range resource.KindOf(kind).Route.Backends(obj) {
		if seen[rb] {
			continue
		}
		seen[rb] = true
		out = append(out, b.backend(kind, routeNS, rb, said, resolvedRefs))
	}
	return out
}

func (b *builder) backend(kind resource.Kind, routeNS string, rb refs.Backend, said []string, resolvedRefs *metav1.Condition) Backend {
	out := Backend{Group: rb.Group, Kind: rb.Kind, Namespace: rb.Namespace, Name: rb.Name}
	if rb.HasPort {
		out.Port = rb.Port
	}
	state, reason, msg, ready := b.check(kind, routeNS, rb)
	if state == BackendResolved {
		// The objects show no problem; the controller may know of one.
		var parts []string
		for _, p := range said {
			if mentions(p, rb.ID()) {
				parts = append(parts, p)
			}
		}
		if len(parts) > 0 {
			return Backend{Group: out.Group, Kind: out.Kind, Namespace: out.Namespace, Name: out.Name, Port: out.Port,
				State: BackendUnresolved, Reason: resolvedRefs.Reason, Message: strings.Join(parts, "; ")}
		}
	}
	out.State, out.Reason, out.Message, out.ReadyEndpoints = state, reason, msg, ready
	return out
}

// check resolves a backendRef against the objects, as the translator
// does for what the objects alone decide.
func (b *builder) check(kind resource.Kind, routeNS string, rb refs.Backend) (state, reason, msg string, ready *int) {
	id := rb.ID()
	if !rb.IsService() {
		gk := rb.Kind
		if rb.Group != "" {
			gk = rb.Group + "/" + rb.Kind
		}
		return BackendUnresolved, "InvalidKind", fmt.Sprintf("backend %s %s is not supported; only core Services are", id, gk), nil
	}
	if b.opts.Unreadable[rb.Namespace] {
		return BackendUnknown, "", fmt.Sprintf("the Services of namespace %s could not be read", rb.Namespace), nil
	}
	if rb.Namespace != routeNS && !b.granted(kind, routeNS, rb) {
		return BackendUnresolved, "RefNotPermitted",
			fmt.Sprintf("no ReferenceGrant in namespace %s allows a %s of namespace %s to use Service %s", rb.Namespace, kind, routeNS, id), nil
	}
	if !rb.HasPort {
		return BackendUnresolved, "BackendNotFound", fmt.Sprintf("backend Service %s has no port; port is required for Services", id), nil
	}
	key := resource.Key{Namespace: rb.Namespace, Name: rb.Name}
	svc, ok := b.snap.Services.Get(key)
	if !ok || svc == nil {
		return BackendUnresolved, "BackendNotFound", fmt.Sprintf("Service %s does not exist", id), nil
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return BackendUnresolved, "InvalidKind", fmt.Sprintf("Service %s is of type ExternalName, which is not supported", id), nil
	}
	proto := corev1.ProtocolTCP
	if kind == resource.KindUDPRoute {
		proto = corev1.ProtocolUDP
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if p.Port == rb.Port && (p.Protocol == proto || (p.Protocol == "" && proto == corev1.ProtocolTCP)) {
			sp = p
			break
		}
	}
	if sp == nil {
		return BackendUnresolved, "BackendNotFound", fmt.Sprintf("Service %s has no %s port %d", id, proto, rb.Port), nil
	}
	n := readyEndpoints(b.snap.EndpointSlicesFor(key), sp.Name, proto)
	return BackendResolved, "", "", &n
}

// granted reports whether a ReferenceGrant of the backend's namespace lets
// routes of kind in routeNS use the Service.
func (b *builder) granted(kind resource.Kind, routeNS string, rb refs.Backend) bool {
	for _, g := range b.snap.ReferenceGrants.All() {
		if g == nil || g.Namespace != rb.Namespace {
			continue
		}
		from := false
		for _, f := range g.Spec.From {
			from = from || (string(f.Group) == refs.GroupGateway && string(f.Kind) == kind.String() && string(f.Namespace) == routeNS)
		}
		if !from {
			continue
		}
		for _, t := range g.Spec.To {
			if string(t.Group) == refs.GroupCore && string(t.Kind) == refs.KindService && (t.Name == nil || *t.Name == "" || string(*t.Name) == rb.Name) {
				return true
			}
		}
	}
	return false
}

// readyEndpoints counts the distinct ready addresses of the Service port
// named portName in its EndpointSlices (IPv4 and IPv6; a nil ready counts
// as ready).
func readyEndpoints(slices []*discoveryv1.EndpointSlice, portName string, proto corev1.Protocol) int {
	seen := map[string]bool{}
	for _, es := range slices {
		if es == nil || (es.AddressType != discoveryv1.AddressTypeIPv4 && es.AddressType != discoveryv1.AddressTypeIPv6) {
			continue
		}
		var target int32
		for _, p := range es.Ports {
			name, pp := "", corev1.ProtocolTCP
			if p.Name != nil {
				name = *p.Name
			}
			if p.Protocol != nil {
				pp = *p.Protocol
			}
			if name == portName && pp == proto && p.Port != nil {
				target = *p.Port
				break
			}
		}
		if target == 0 {
			continue
		}
		for _, ep := range es.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				if a != "" {
					seen[fmt.Sprintf("%s:%d", a, target)] = true
				}
			}
		}
	}
	return len(seen)
}

// mentions reports whether text names the object id ("ns/name") as a
// whole word: "team/app" is not in "team/app2".
func mentions(text, id string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], id)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(id)
		before := start == 0 || !nameChar(text[start-1])
		after := end == len(text) || !nameChar(text[end])
		if before && after {
			return true
		}
		i = start + 1
	}
}

func nameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '/'
}
