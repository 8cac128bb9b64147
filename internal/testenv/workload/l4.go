package workload

import (
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/resource"
)

// The TLS, TCP and UDP part of Rich: Gateway infra/l4 with a TLS
// Passthrough, a TLS Terminate, a TCP and a UDP listener (routes from every
// namespace), TLSRoutes, TCPRoutes and a UDPRoute in the team namespaces,
// and a UDP Service with its EndpointSlice.

// l4Routes is the number of TLSRoutes and of TCPRoutes of Rich.
const l4Routes = 3

func addL4(s *resource.Snapshot) {
	all := gwv1.NamespacesFromAll
	allowed := &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}}
	pass, term := gwv1.TLSModePassthrough, gwv1.TLSModeTerminate
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "l4", Generation: 1, CreationTimestamp: metav1.NewTime(epoch)},
		Spec: gwv1.GatewaySpec{GatewayClassName: "portico", Listeners: []gwv1.Listener{
			{Name: "pass", Port: 443, Protocol: gwv1.TLSProtocolType, Hostname: ptr(gwv1.Hostname("*.l4.example.com")),
				TLS: &gwv1.ListenerTLSConfig{Mode: &pass}, AllowedRoutes: allowed},
			{Name: "term", Port: 443, Protocol: gwv1.TLSProtocolType, Hostname: ptr(gwv1.Hostname("term.example.com")),
				TLS: &gwv1.ListenerTLSConfig{Mode: &term, CertificateRefs: []gwv1.SecretObjectReference{{Name: "tls"}}}, AllowedRoutes: allowed},
			{Name: "tcp", Port: 9000, Protocol: gwv1.TCPProtocolType, AllowedRoutes: allowed},
			{Name: "udp", Port: 5353, Protocol: gwv1.UDPProtocolType, AllowedRoutes: allowed},
		}},
	}
	s.Gateways.Set(key(gw.ObjectMeta), gw)
	for i := 0; i < l4Routes; i++ {
		s.TLSRoutes.Set(resource.Key{Namespace: teamNS(i), Name: fmt.Sprintf("tls%d", i)}, tlsRouteOf(i, i%2 == 0))
		s.TCPRoutes.Set(resource.Key{Namespace: teamNS(i), Name: fmt.Sprintf("tcp%d", i)}, tcpRouteOf(i))
	}
	addUDPService(s, "team0", "dns")
	s.UDPRoutes.Set(resource.Key{Namespace: "team0", Name: "dns"}, udpRouteOf("dns"))
}

func teamNS(i int) string { return fmt.Sprintf("team%d", i%Namespaces) }

func l4Parent(section string) gwv1.ParentReference {
	return gwv1.ParentReference{Namespace: ptr(gwv1.Namespace("infra")), Name: "l4", SectionName: ptr(gwv1.SectionName(section))}
}

func l4BackendRef(name string, port, weight int32) gwv1.BackendRef {
	return gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: ptr(gwv1.PortNumber(port))}, Weight: ptr(weight)}
}

func tlsRouteOf(i int, passthrough bool) *gwv1.TLSRoute {
	host, section := fmt.Sprintf("db%d.l4.example.com", i), "pass"
	if !passthrough {
		host, section = "term.example.com", "term"
	}
	return &gwv1.TLSRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: teamNS(i), Name: fmt.Sprintf("tls%d", i), Generation: 1,
			CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(i) * time.Second))},
		Spec: gwv1.TLSRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{l4Parent(section)}},
			Hostnames:       []gwv1.Hostname{gwv1.Hostname(host)},
			Rules:           []gwv1.TLSRouteRule{{BackendRefs: []gwv1.BackendRef{l4BackendRef("svc1", 8080, 1)}}},
		},
	}
}

func tcpRouteOf(i int) *gwv1.TCPRoute {
	return &gwv1.TCPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: teamNS(i), Name: fmt.Sprintf("tcp%d", i), Generation: 1,
			CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(i) * time.Second))},
		Spec: gwv1.TCPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{l4Parent("tcp")}},
			Rules: []gwv1.TCPRouteRule{{BackendRefs: []gwv1.BackendRef{
				l4BackendRef("svc1", 8080, 3), l4BackendRef("svc2", 8080, 1),
			}}},
		},
	}
}

func udpRouteOf(svc string) *gwv1.UDPRoute {
	return &gwv1.UDPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team0", Name: "dns", Generation: 1, CreationTimestamp: metav1.NewTime(epoch)},
		Spec: gwv1.UDPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{l4Parent("udp")}},
			Rules:           []gwv1.UDPRouteRule{{BackendRefs: []gwv1.BackendRef{l4BackendRef(svc, 53, 1)}}},
		},
	}
}

// addUDPService adds a Service with UDP port 53 and its EndpointSlice.
func addUDPService(s *resource.Snapshot, ns, name string) {
	s.Services.Set(resource.Key{Namespace: ns, Name: name}, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}},
	})
	udp := corev1.ProtocolUDP
	s.EndpointSlices.Set(resource.Key{Namespace: ns, Name: name + "-1"}, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("dns"), Port: ptr(int32(5353)), Protocol: &udp}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.250.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(true)}}},
	})
}

// changeL4 makes one random change of a TLSRoute, TCPRoute or UDPRoute.
func changeL4(c *resource.Snapshot, rng *rand.Rand) string {
	switch rng.IntN(3) {
	case 0:
		i := rng.IntN(l4Routes + 1)
		k := resource.Key{Namespace: teamNS(i), Name: fmt.Sprintf("tls%d", i)}
		r := tlsRouteOf(i, rng.IntN(2) == 0)
		switch rng.IntN(5) {
		case 0:
			c.TLSRoutes.Delete(k)
			return "tls route deleted " + k.String()
		case 1:
			r.Spec.Hostnames = []gwv1.Hostname{[]gwv1.Hostname{"*.l4.example.com", "other.example.org", "db0.l4.example.com"}[rng.IntN(3)]}
		case 2:
			r.Spec.Rules[0].BackendRefs[0].Name = gwv1.ObjectName([]string{"svc2", "nope"}[rng.IntN(2)])
		case 3:
			r.CreationTimestamp = metav1.NewTime(epoch.Add(-time.Duration(rng.IntN(100)) * time.Second))
		}
		c.TLSRoutes.Set(k, r)
		return "tls route " + k.String()
	case 1:
		i := rng.IntN(l4Routes + 1)
		k := resource.Key{Namespace: teamNS(i), Name: fmt.Sprintf("tcp%d", i)}
		r := tcpRouteOf(i)
		switch rng.IntN(5) {
		case 0:
			c.TCPRoutes.Delete(k)
			return "tcp route deleted " + k.String()
		case 1:
			*r.Spec.Rules[0].BackendRefs[1].Weight = int32(rng.IntN(4))
		case 2:
			r.Spec.Rules[0].BackendRefs[0].Namespace = ptr(gwv1.Namespace(teamNS(rng.IntN(Namespaces))))
		case 3:
			r.Spec.ParentRefs = []gwv1.ParentReference{l4Parent([]string{"pass", "udp", "nope"}[rng.IntN(3)])}
		}
		c.TCPRoutes.Set(k, r)
		return "tcp route " + k.String()
	default:
		k := resource.Key{Namespace: "team0", Name: "dns"}
		if rng.IntN(3) == 0 {
			c.UDPRoutes.Delete(k)
			return "udp route deleted"
		}
		c.UDPRoutes.Set(k, udpRouteOf([]string{"dns", "svc1"}[rng.IntN(2)]))
		return "udp route"
	}
}

// TCPListenersPerGateway is the number of TCP listeners of each TCP
// Gateway of WithTCPRoutes.
const TCPListenersPerGateway = 50

// WithTCPRoutes returns s (built by Snapshot) with n TCPRoutes: Gateways
// infra/tcp0, tcp1, ... each with TCPListenersPerGateway TCP listeners
// (ports 10000 and up), and TCPRoute i on listener i of them forwarding to
// the Service of HTTPRoute i (two backends weighted 3:1 every fifth).
func WithTCPRoutes(s *resource.Snapshot, n int) *resource.Snapshot {
	c := Copy(s)
	gws := (n + TCPListenersPerGateway - 1) / TCPListenersPerGateway
	for g := 0; g < gws; g++ {
		gw := &gwv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: fmt.Sprintf("tcp%d", g), Generation: 1, CreationTimestamp: metav1.NewTime(epoch)},
			Spec:       gwv1.GatewaySpec{GatewayClassName: "portico"},
		}
		all := gwv1.NamespacesFromAll
		for l := 0; l < TCPListenersPerGateway && g*TCPListenersPerGateway+l < n; l++ {
			gw.Spec.Listeners = append(gw.Spec.Listeners, gwv1.Listener{Name: gwv1.SectionName(fmt.Sprintf("tcp%d", l)),
				Port: gwv1.PortNumber(10000 + l), Protocol: gwv1.TCPProtocolType,
				AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}}})
		}
		c.Gateways.Set(key(gw.ObjectMeta), gw)
	}
	for i := 0; i < n; i++ {
		ns := fmt.Sprintf("team%d", i%Namespaces)
		svc := fmt.Sprintf("svc%d", i/RoutesPerService)
		addService(c, ns, svc)
		backends := []gwv1.BackendRef{l4BackendRef(svc, 8080, 3)}
		if i%5 == 0 {
			other := fmt.Sprintf("svc%d", i/RoutesPerService+1)
			addService(c, ns, other)
			backends = append(backends, l4BackendRef(other, 8080, 1))
		}
		r := &gwv1.TCPRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("tcproute%d", i), Generation: 1,
				CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(i) * time.Second))},
			Spec: gwv1.TCPRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{
					Namespace: ptr(gwv1.Namespace("infra")), Name: gwv1.ObjectName(fmt.Sprintf("tcp%d", i/TCPListenersPerGateway)),
					SectionName: ptr(gwv1.SectionName(fmt.Sprintf("tcp%d", i%TCPListenersPerGateway))),
				}}},
				Rules: []gwv1.TCPRouteRule{{BackendRefs: backends}},
			},
		}
		c.TCPRoutes.Set(key(r.ObjectMeta), r)
	}
	return c.Build()
}
