package gatewayapi

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/resource"
)

func tlsL(name string, port int32, host string, mode gwv1.TLSModeType, secrets ...string) gwv1.Listener {
	l := gwv1.Listener{Name: gwv1.SectionName(name), Port: gwv1.PortNumber(port), Protocol: gwv1.TLSProtocolType,
		TLS: &gwv1.ListenerTLSConfig{Mode: ptr(mode)}}
	if host != "" {
		l.Hostname = ptr(gwv1.Hostname(host))
	}
	for _, s := range secrets {
		l.TLS.CertificateRefs = append(l.TLS.CertificateRefs, gwv1.SecretObjectReference{Name: gwv1.ObjectName(s)})
	}
	return l
}

func l4L(name string, port int32, proto gwv1.ProtocolType) gwv1.Listener {
	return gwv1.Listener{Name: gwv1.SectionName(name), Port: gwv1.PortNumber(port), Protocol: proto}
}

func l4Backend(ns, name string, port, weight int32) gwv1.BackendRef {
	b := gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: ptr(gwv1.PortNumber(port))}, Weight: ptr(weight)}
	if ns != "" {
		b.Namespace = ptr(gwv1.Namespace(ns))
	}
	return b
}

func tlsRoute(ns, name string, created int, parents []gwv1.ParentReference, hostnames []string, backends ...gwv1.BackendRef) *gwv1.TLSRoute {
	r := &gwv1.TLSRoute{ObjectMeta: meta(ns, name)}
	r.CreationTimestamp = at(created)
	r.Spec.ParentRefs = parents
	for _, h := range hostnames {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gwv1.Hostname(h))
	}
	r.Spec.Rules = []gwv1.TLSRouteRule{{BackendRefs: backends}}
	return r
}

func tcpRoute(ns, name string, created int, parents []gwv1.ParentReference, backends ...gwv1.BackendRef) *gwv1.TCPRoute {
	r := &gwv1.TCPRoute{ObjectMeta: meta(ns, name)}
	r.CreationTimestamp = at(created)
	r.Spec.ParentRefs = parents
	r.Spec.Rules = []gwv1.TCPRouteRule{{BackendRefs: backends}}
	return r
}

func udpRoute(ns, name string, parents []gwv1.ParentReference, backends ...gwv1.BackendRef) *gwv1.UDPRoute {
	r := &gwv1.UDPRoute{ObjectMeta: meta(ns, name)}
	r.Spec.ParentRefs = parents
	r.Spec.Rules = []gwv1.UDPRouteRule{{BackendRefs: backends}}
	return r
}

func udpService(ns, name string, port int32) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "dns", Port: port, Protocol: corev1.ProtocolUDP}}}}
}

// chain returns the filter chain of l named name.
func chain(t *testing.T, l *ir.Listener, name string) *ir.FilterChain {
	t.Helper()
	for _, fc := range l.FilterChains {
		if fc.Name == name {
			return fc
		}
	}
	var names []string
	for _, fc := range l.FilterChains {
		names = append(names, fc.Name)
	}
	t.Fatalf("listener %s has no chain %s (chains %v)", l.Name, name, names)
	return nil
}

func TestTLSPassthroughBySNI(t *testing.T) {
	gw := gateway("infra", "gw", tlsL("tls", 443, "*.example.com", gwv1.TLSModePassthrough))
	a := tlsRoute("infra", "a", 0, []gwv1.ParentReference{parent("gw")}, []string{"a.example.com"}, l4Backend("", "db-a", 5432, 1))
	b := tlsRoute("infra", "b", 0, []gwv1.ParentReference{parent("gw")}, []string{"*.com"}, l4Backend("", "db-b", 5432, 1))
	res := translate(gw, a, b, service("infra", "db-a", 5432), service("infra", "db-b", 5432))

	ls := listenerStatus(t, res, "infra", "gw", "tls")
	if ls.AttachedRoutes != 2 || len(ls.SupportedKinds) != 1 || ls.SupportedKinds[0].Kind != "TLSRoute" {
		t.Errorf("listener: attachedRoutes %d, supportedKinds %+v; want 2, [TLSRoute]", ls.AttachedRoutes, ls.SupportedKinds)
	}
	for _, r := range []string{"a", "b"} {
		p := routeParent(t, res, resource.KindTLSRoute, "infra", r, 0)
		wantCond(t, p.Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
		wantCond(t, p.Conditions, string(gwv1.RouteConditionResolvedRefs), metav1.ConditionTrue, string(gwv1.RouteReasonResolvedRefs))
	}
	l := irListener(t, irGateway(t, res, "infra", "gw"), "https-443")
	if l.Protocol != ir.ProtocolHTTPS || len(l.FilterChains) != 2 {
		t.Fatalf("listener %+v, want HTTPS with 2 chains", l)
	}
	ca := chain(t, l, "https-443/passthrough/a.example.com")
	if len(ca.ServerNames) != 1 || ca.ServerNames[0] != "a.example.com" || len(ca.CertificateSecrets) != 0 || ca.RouteConfig != nil ||
		ca.TCP == nil || len(ca.TCP.Backends) != 1 || ca.TCP.Backends[0].Cluster != "infra/db-a/5432" {
		t.Errorf("chain a = %+v (TCP %+v)", ca, ca.TCP)
	}
	// "*.com" narrowed to the listener's "*.example.com".
	cb := chain(t, l, "https-443/passthrough/*.example.com")
	if cb.ServerNames[0] != "*.example.com" || cb.TCP.Backends[0].Cluster != "infra/db-b/5432" || cb.TCP.Name != "tlsroute/infra/b/rule/0" {
		t.Errorf("chain b = %+v (TCP %+v)", cb, cb.TCP)
	}
	for _, c := range irGateway(t, res, "infra", "gw").Clusters {
		if c.Protocol != ir.UpstreamTCP {
			t.Errorf("cluster %s protocol %s, want TCP", c.Name, c.Protocol)
		}
	}
}

func TestTLSTerminateAndMixedPort(t *testing.T) {
	gw := gateway("infra", "gw",
		tlsL("term", 8883, "tls.example.com", gwv1.TLSModeTerminate, "cert"),
		tlsL("pass", 8883, "abc.example.com", gwv1.TLSModePassthrough),
		httpsL("web", 8883, "www.example.com", "cert"))
	term := tlsRoute("infra", "term", 0, []gwv1.ParentReference{parent("gw")}, []string{"tls.example.com"}, l4Backend("", "plain", 3000, 1))
	pass := tlsRoute("infra", "pass", 0, []gwv1.ParentReference{parent("gw")}, []string{"abc.example.com"}, l4Backend("", "tlsd", 8443, 1))
	web := httpRoute("infra", "web", []gwv1.ParentReference{parent("gw")}, nil, simpleRule())
	res := translate(gw, term, pass, web, tlsSecret("infra", "cert"), service("infra", "plain", 3000), service("infra", "tlsd", 8443), service("infra", "web", 80))
	for _, name := range []string{"term", "pass", "web"} {
		ls := listenerStatus(t, res, "infra", "gw", name)
		wantCond(t, ls.Conditions, string(gwv1.ListenerConditionAccepted), metav1.ConditionTrue, string(gwv1.ListenerReasonAccepted))
		wantCond(t, ls.Conditions, string(gwv1.ListenerConditionProgrammed), metav1.ConditionTrue, string(gwv1.ListenerReasonProgrammed))
		if ls.AttachedRoutes != 1 {
			t.Errorf("listener %s attachedRoutes %d, want 1 (the hostnames decide)", name, ls.AttachedRoutes)
		}
	}
	l := irListener(t, irGateway(t, res, "infra", "gw"), "https-8883")
	tc := chain(t, l, "https-8883/terminate/tls.example.com")
	if len(tc.CertificateSecrets) != 1 || tc.CertificateSecrets[0] != "infra/cert" || tc.TCP == nil || tc.TCP.Backends[0].Cluster != "infra/plain/3000" {
		t.Errorf("terminate chain %+v", tc)
	}
	pc := chain(t, l, "https-8883/passthrough/abc.example.com")
	if len(pc.CertificateSecrets) != 0 || pc.TCP == nil {
		t.Errorf("passthrough chain %+v", pc)
	}
	hc := chain(t, l, "https-8883/www.example.com")
	if hc.RouteConfig == nil || hc.TCP != nil || len(hc.CertificateSecrets) != 1 {
		t.Errorf("HTTPS chain %+v", hc)
	}
}

func TestTCPRouteWeightsAndInvalidBackends(t *testing.T) {
	gw := gateway("infra", "gw", l4L("tcp", 9300, gwv1.TCPProtocolType))
	r := tcpRoute("infra", "r", 0, []gwv1.ParentReference{parent("gw")},
		l4Backend("", "v1", 3000, 70), l4Backend("", "v2", 3000, 30), l4Backend("", "v3", 3000, 0), l4Backend("", "missing", 3000, 5))
	res := translate(gw, r, service("infra", "v1", 3000), service("infra", "v2", 3000), service("infra", "v3", 3000))
	p := routeParent(t, res, resource.KindTCPRoute, "infra", "r", 0)
	wantCond(t, p.Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
	wantCond(t, p.Conditions, string(gwv1.RouteConditionResolvedRefs), metav1.ConditionFalse, string(gwv1.RouteReasonBackendNotFound))
	l := irListener(t, irGateway(t, res, "infra", "gw"), "tcp-9300")
	if l.Protocol != ir.ProtocolTCP || len(l.FilterChains) != 1 || l.FilterChains[0].TCP == nil {
		t.Fatalf("listener %+v", l)
	}
	want := []ir.WeightedBackend{{Cluster: "infra/v1/3000", Weight: 70}, {Cluster: "infra/v2/3000", Weight: 30}, {Cluster: "infra/v3/3000", Weight: 0}, {Weight: 5, Invalid: true}}
	if got := l.FilterChains[0].TCP.Backends; len(got) != len(want) {
		t.Fatalf("backends %+v, want %+v", got, want)
	} else {
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("backend %d = %+v, want %+v", i, got[i], want[i])
			}
		}
	}
}

// Several TCPRoutes on one listener: all are Accepted and counted, the
// oldest is served.
func TestTCPRoutesShareAListener(t *testing.T) {
	gw := gateway("infra", "gw", l4L("tcp", 9310, gwv1.TCPProtocolType))
	older := tcpRoute("infra", "z-older", 0, []gwv1.ParentReference{parent("gw")}, l4Backend("", "one", 3000, 1))
	newer := tcpRoute("infra", "a-newer", 5, []gwv1.ParentReference{parent("gw")}, l4Backend("", "two", 3000, 1))
	res := translate(gw, older, newer, service("infra", "one", 3000), service("infra", "two", 3000))
	for _, r := range []string{"z-older", "a-newer"} {
		wantCond(t, routeParent(t, res, resource.KindTCPRoute, "infra", r, 0).Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
	}
	if ls := listenerStatus(t, res, "infra", "gw", "tcp"); ls.AttachedRoutes != 2 {
		t.Errorf("attachedRoutes %d, want 2", ls.AttachedRoutes)
	}
	l := irListener(t, irGateway(t, res, "infra", "gw"), "tcp-9310")
	if got := l.FilterChains[0].TCP.Backends[0].Cluster; got != "infra/one/3000" {
		t.Errorf("served %s, want the older route's infra/one/3000", got)
	}
}

// A newer TLSRoute whose own hostname is more specific takes the SNI name
// from an older wildcard route (hostname precedence before age).
func TestTLSRouteHostnamePrecedence(t *testing.T) {
	gw := gateway("infra", "gw", tlsL("tls", 443, "abc.example.com", gwv1.TLSModePassthrough))
	older := tlsRoute("infra", "older", 0, []gwv1.ParentReference{parent("gw")}, []string{"*.example.com"}, l4Backend("", "one", 443, 1))
	newer := tlsRoute("infra", "newer", 5, []gwv1.ParentReference{parent("gw")}, []string{"abc.example.com"}, l4Backend("", "two", 443, 1))
	res := translate(gw, older, newer, service("infra", "one", 443), service("infra", "two", 443))
	l := irListener(t, irGateway(t, res, "infra", "gw"), "https-443")
	if c := chain(t, l, "https-443/passthrough/abc.example.com"); c.TCP.Backends[0].Cluster != "infra/two/443" {
		t.Errorf("abc.example.com served by %s, want the exact route's infra/two/443", c.TCP.Backends[0].Cluster)
	}
}

func TestUDPRoute(t *testing.T) {
	gw := gateway("infra", "gw", l4L("dns", 53, gwv1.UDPProtocolType), l4L("dns-tcp", 53, gwv1.TCPProtocolType))
	u := udpRoute("infra", "u", []gwv1.ParentReference{{Name: "gw", SectionName: ptr(gwv1.SectionName("dns"))}}, l4Backend("", "coredns", 53, 1))
	// A Service with only a TCP port 53 is no UDP backend.
	bad := udpRoute("infra", "bad", []gwv1.ParentReference{{Name: "gw", SectionName: ptr(gwv1.SectionName("dns"))}}, l4Backend("", "web", 53, 1))
	bad.CreationTimestamp = at(5) // newer: u is served
	res := translate(gw, u, bad, udpService("infra", "coredns", 53), service("infra", "web", 53))
	wantCond(t, routeParent(t, res, resource.KindUDPRoute, "infra", "u", 0).Conditions, string(gwv1.RouteConditionResolvedRefs), metav1.ConditionTrue, string(gwv1.RouteReasonResolvedRefs))
	wantCond(t, routeParent(t, res, resource.KindUDPRoute, "infra", "bad", 0).Conditions, string(gwv1.RouteConditionResolvedRefs), metav1.ConditionFalse, string(gwv1.RouteReasonBackendNotFound))
	g := irGateway(t, res, "infra", "gw")
	l := irListener(t, g, "udp-53")
	if l.Protocol != ir.ProtocolUDP || len(l.FilterChains) != 0 || l.UDP == nil || l.UDP.Backends[0].Cluster != "infra/coredns/53/udp" {
		t.Fatalf("listener %+v (UDP %+v)", l, l.UDP)
	}
	if tl := irListener(t, g, "tcp-53"); tl.FilterChains[0].TCP == nil || len(tl.FilterChains[0].TCP.Backends) != 0 {
		t.Errorf("TCP listener without routes: %+v, want a chain closing connections", tl.FilterChains[0])
	}
	if len(g.Clusters) != 1 || g.Clusters[0].Protocol != ir.UpstreamUDP {
		t.Errorf("clusters %+v, want one UDP cluster", g.Clusters)
	}
	var spec *[]int32
	for i := range res.Infra {
		if res.Infra[i].Gateway.Name == "gw" {
			spec = &res.Infra[i].UDPPorts
			if p := res.Infra[i].Ports; len(p) != 1 || p[0] != 53 {
				t.Errorf("TCP ports %v, want [53]", p)
			}
		}
	}
	if spec == nil || len(*spec) != 1 || (*spec)[0] != 53 {
		t.Errorf("UDP ports %v, want [53]", spec)
	}
}

// Routes on listeners of another protocol are NotAllowedByListeners; a TLS
// listener admits TLSRoutes only.
func TestL4KindsPerProtocol(t *testing.T) {
	tlsOnly := tlsL("tls", 443, "", gwv1.TLSModePassthrough)
	tlsOnly.AllowedRoutes = &gwv1.AllowedRoutes{Kinds: []gwv1.RouteGroupKind{{Kind: "TCPRoute"}, {Kind: "TLSRoute"}}}
	gw := gateway("infra", "gw", httpL("http", 80, ""), tlsOnly, l4L("tcp", 9000, gwv1.TCPProtocolType))
	onHTTP := tlsRoute("infra", "on-http", 0, []gwv1.ParentReference{{Name: "gw", SectionName: ptr(gwv1.SectionName("http"))}}, []string{"a.example.com"}, l4Backend("", "s", 1, 1))
	tcpOnTLS := tcpRoute("infra", "tcp-on-tls", 0, []gwv1.ParentReference{{Name: "gw", SectionName: ptr(gwv1.SectionName("tls"))}}, l4Backend("", "s", 1, 1))
	httpOnTCP := httpRoute("infra", "http-on-tcp", []gwv1.ParentReference{{Name: "gw", SectionName: ptr(gwv1.SectionName("tcp"))}}, nil, simpleRule())
	res := translate(gw, onHTTP, tcpOnTLS, httpOnTCP, service("infra", "s", 1), service("infra", "web", 80))
	wantCond(t, routeParent(t, res, resource.KindTLSRoute, "infra", "on-http", 0).Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionFalse, string(gwv1.RouteReasonNotAllowedByListeners))
	wantCond(t, routeParent(t, res, resource.KindTCPRoute, "infra", "tcp-on-tls", 0).Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionFalse, string(gwv1.RouteReasonNotAllowedByListeners))
	wantCond(t, routeParent(t, res, resource.KindHTTPRoute, "infra", "http-on-tcp", 0).Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionFalse, string(gwv1.RouteReasonNotAllowedByListeners))
	ls := listenerStatus(t, res, "infra", "gw", "tls")
	wantCond(t, ls.Conditions, string(gwv1.ListenerConditionResolvedRefs), metav1.ConditionFalse, string(gwv1.ListenerReasonInvalidRouteKinds))
	if len(ls.SupportedKinds) != 1 || ls.SupportedKinds[0].Kind != "TLSRoute" {
		t.Errorf("supportedKinds %+v, want [TLSRoute]", ls.SupportedKinds)
	}
	if k := listenerStatus(t, res, "infra", "gw", "tcp").SupportedKinds; len(k) != 1 || k[0].Kind != "TCPRoute" {
		t.Errorf("TCP supportedKinds %+v, want [TCPRoute]", k)
	}
}

func TestTLSRouteHostnameMismatchAndGrants(t *testing.T) {
	gw := gateway("infra", "gw", tlsL("tls", 443, "www.example.com", gwv1.TLSModePassthrough))
	miss := tlsRoute("infra", "miss", 0, []gwv1.ParentReference{parent("gw")}, []string{"www.nomatch.com", "*.nomatch.com"}, l4Backend("", "s", 443, 1))
	cross := tlsRoute("infra", "cross", 0, []gwv1.ParentReference{parent("gw")}, []string{"www.example.com"}, l4Backend("apps", "s", 443, 1))
	res := translate(gw, miss, cross, service("apps", "s", 443))
	wantCond(t, routeParent(t, res, resource.KindTLSRoute, "infra", "miss", 0).Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionFalse, string(gwv1.RouteReasonNoMatchingListenerHostname))
	p := routeParent(t, res, resource.KindTLSRoute, "infra", "cross", 0)
	wantCond(t, p.Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
	wantCond(t, p.Conditions, string(gwv1.RouteConditionResolvedRefs), metav1.ConditionFalse, string(gwv1.RouteReasonRefNotPermitted))

	granted := translate(gw, cross, service("apps", "s", 443), refGrant("apps", "g", "TLSRoute", "infra", "Service", nil))
	wantCond(t, routeParent(t, granted, resource.KindTLSRoute, "infra", "cross", 0).Conditions, string(gwv1.RouteConditionResolvedRefs), metav1.ConditionTrue, string(gwv1.RouteReasonResolvedRefs))
	l := irListener(t, irGateway(t, granted, "infra", "gw"), "https-443")
	if c := chain(t, l, "https-443/passthrough/www.example.com"); c.TCP.Backends[0].Cluster != "apps/s/443" {
		t.Errorf("chain %+v", c.TCP)
	}
}

// A TCPRoute may use a TLS listener of mode Terminate (TLSRoute API: "could
// choose to use a TCPRoute with a TLS listener"): it is among the default
// supportedKinds there and may be listed; a Passthrough listener supports
// TLSRoutes only, and listing TCPRoute on it is InvalidRouteKinds.
func TestTCPRouteKindsOnTLSListeners(t *testing.T) {
	term := tlsL("term", 8443, "", gwv1.TLSModeTerminate, "cert")
	pass := tlsL("pass", 9443, "", gwv1.TLSModePassthrough)
	listed := tlsL("listed", 10443, "", gwv1.TLSModePassthrough)
	listed.AllowedRoutes = &gwv1.AllowedRoutes{Kinds: []gwv1.RouteGroupKind{{Kind: "TLSRoute"}, {Kind: "TCPRoute"}}}
	res := translate(gateway("infra", "gw", term, pass, listed), tlsSecret("infra", "cert"))
	kinds := func(ls gwv1.ListenerStatus) []string {
		var out []string
		for _, k := range ls.SupportedKinds {
			out = append(out, string(k.Kind))
		}
		return out
	}
	if got := kinds(listenerStatus(t, res, "infra", "gw", "term")); len(got) != 2 || got[0] != "TLSRoute" || got[1] != "TCPRoute" {
		t.Errorf("Terminate supportedKinds %v, want TLSRoute, TCPRoute", got)
	}
	if got := kinds(listenerStatus(t, res, "infra", "gw", "pass")); len(got) != 1 || got[0] != "TLSRoute" {
		t.Errorf("Passthrough supportedKinds %v, want TLSRoute", got)
	}
	ls := listenerStatus(t, res, "infra", "gw", "listed")
	wantCond(t, ls.Conditions, string(gwv1.ListenerConditionResolvedRefs), metav1.ConditionFalse, string(gwv1.ListenerReasonInvalidRouteKinds))
	if got := kinds(ls); len(got) != 1 || got[0] != "TLSRoute" {
		t.Errorf("Passthrough listing TCPRoute: supportedKinds %v, want TLSRoute", got)
	}
}
