package gatewayapi

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/testenv/workload"
)

// btlsPolicy is a BackendTLSPolicy of ns created at second created,
// targeting Service svc (its port section, or the whole Service for ""),
// trusting the ConfigMap "ca".
func btlsPolicy(ns, name string, created int, svc, section string) *gwv1.BackendTLSPolicy {
	p := &gwv1.BackendTLSPolicy{ObjectMeta: meta(ns, name)}
	p.CreationTimestamp = at(created)
	t := gwv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{Kind: "Service", Name: gwv1.ObjectName(svc)}}
	if section != "" {
		t.SectionName = ptr(gwv1.SectionName(section))
	}
	p.Spec.TargetRefs = []gwv1.LocalPolicyTargetReferenceWithSectionName{t}
	p.Spec.Validation = gwv1.BackendTLSPolicyValidation{
		CACertificateRefs: []gwv1.LocalObjectReference{{Kind: "ConfigMap", Name: "ca"}},
		Hostname:          "backend.example.com",
	}
	return p
}

// twoPorts is Service svc with ports "a" (443) and "b" (8443).
func twoPorts(ns, name string) *corev1.Service {
	svc := service(ns, name)
	svc.Spec.Ports = []corev1.ServicePort{{Name: "a", Port: 443, Protocol: corev1.ProtocolTCP}, {Name: "b", Port: 8443, Protocol: corev1.ProtocolTCP}}
	return svc
}

func caMap(ns string) *corev1.ConfigMap {
	return configMap(ns, "ca", map[string]string{caDataKey: workload.TestCertPEM})
}

func btlsWorld(extra ...any) []any {
	return append([]any{
		gateway("ns", "gw", httpL("http", 80, "")),
		twoPorts("ns", "svc"),
		caMap("ns"),
		httpRoute("ns", "r", []gwv1.ParentReference{parent("gw")}, nil,
			gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/a")}, BackendRefs: []gwv1.HTTPBackendRef{backend("svc", 443)}},
			gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/b")}, BackendRefs: []gwv1.HTTPBackendRef{backend("svc", 8443)}}),
	}, extra...)
}

func cluster(t *testing.T, g *ir.Gateway, name string) *ir.Cluster {
	t.Helper()
	for _, c := range g.Clusters {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no cluster %s in %s", name, g.Key())
	return nil
}

// policyCond returns the condition typ of the ancestor gw of a policy.
func policyCond(t *testing.T, res *Result, name, typ string) metav1.Condition {
	t.Helper()
	s := status(t, res, resource.KindBackendTLSPolicy, "ns", name)
	for _, a := range s.Policy.Ancestors {
		if a.AncestorRef.Name == "gw" && string(a.ControllerName) == testController {
			return cond(t, a.Conditions, typ)
		}
	}
	t.Fatalf("policy %s has no ancestor gw: %+v", name, s.Policy)
	return metav1.Condition{}
}

func TestBackendTLSPolicyApplies(t *testing.T) {
	res := translate(btlsWorld(btlsPolicy("ns", "p", 0, "svc", ""))...)
	g := irGateway(t, res, "ns", "gw")
	for _, name := range []string{"ns/svc/443", "ns/svc/8443"} {
		c := cluster(t, g, name)
		if c.TLS == nil || c.TLS.Blocked != "" || c.TLS.SNI != "backend.example.com" || !strings.Contains(string(c.TLS.CACertificates), "BEGIN CERTIFICATE") ||
			len(c.TLS.SubjectAltNames) != 1 || c.TLS.SubjectAltNames[0] != (ir.SubjectAltName{Type: ir.SANDNS, Value: "backend.example.com"}) {
			t.Errorf("%s: TLS %+v", name, c.TLS)
		}
	}
	wantCond(t, []metav1.Condition{policyCond(t, res, "p", "Accepted")}, "Accepted", metav1.ConditionTrue, "Accepted")
	wantCond(t, []metav1.Condition{policyCond(t, res, "p", "ResolvedRefs")}, "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs")
	if c := policyCond(t, res, "p", "Accepted"); c.ObservedGeneration != 3 {
		t.Errorf("observedGeneration %d", c.ObservedGeneration)
	}
	// Without a policy: plaintext, and the policy's status is gone.
	plain := translate(btlsWorld()...)
	if c := cluster(t, irGateway(t, plain, "ns", "gw"), "ns/svc/443"); c.TLS != nil {
		t.Errorf("TLS without a policy: %+v", c.TLS)
	}
	if hasStatus(plain, resource.KindBackendTLSPolicy, "ns", "p") {
		t.Error("status of a policy that does not exist")
	}
}

// A sectionName policy takes its port from a whole-Service one (which is
// not conflicted: it keeps the other port); within each group the oldest
// wins and the others are Conflicted.
func TestBackendTLSPolicyPrecedence(t *testing.T) {
	whole := btlsPolicy("ns", "whole", 5, "svc", "")
	whole.Spec.Validation.Hostname = "whole.example.com"
	wholeYounger := btlsPolicy("ns", "whole-younger", 6, "svc", "")
	a := btlsPolicy("ns", "section-a", 9, "svc", "a")
	a.Spec.Validation.Hostname = "a.example.com"
	aTied := btlsPolicy("ns", "section-a2", 9, "svc", "a") // same age: name decides
	res := translate(btlsWorld(whole, wholeYounger, a, aTied)...)
	g := irGateway(t, res, "ns", "gw")
	if sni := cluster(t, g, "ns/svc/443").TLS.SNI; sni != "a.example.com" {
		t.Errorf("port a: SNI %q, want the sectionName policy's", sni)
	}
	if sni := cluster(t, g, "ns/svc/8443").TLS.SNI; sni != "whole.example.com" {
		t.Errorf("port b: SNI %q, want the oldest whole-Service policy's", sni)
	}
	for name, want := range map[string]string{"whole": "Accepted", "section-a": "Accepted", "whole-younger": "Conflicted", "section-a2": "Conflicted"} {
		c := policyCond(t, res, name, "Accepted")
		if c.Reason != want || (c.Status == metav1.ConditionTrue) != (want == "Accepted") {
			t.Errorf("%s: Accepted %s %s, want %s", name, c.Status, c.Reason, want)
		}
	}
}

// An unusable policy fails closed: its cluster has no endpoints, and says
// why; the policy's conditions follow the spec.
func TestBackendTLSPolicyFailsClosed(t *testing.T) {
	missing := btlsPolicy("ns", "missing", 0, "svc", "a")
	missing.Spec.Validation.CACertificateRefs[0].Name = "nope"
	kind := btlsPolicy("ns", "kind", 0, "svc", "b")
	kind.Spec.Validation.CACertificateRefs[0] = gwv1.LocalObjectReference{Group: "invalid.io", Kind: "InvalidKind", Name: "x"}
	res := translate(btlsWorld(missing, kind, slice("ns", "svc", "s1", 443, "10.0.0.1"))...)
	g := irGateway(t, res, "ns", "gw")
	for _, name := range []string{"ns/svc/443", "ns/svc/8443"} {
		c := cluster(t, g, name)
		if c.TLS == nil || c.TLS.Blocked == "" || len(c.Endpoints) != 0 {
			t.Errorf("%s: not blocked: TLS %+v, %d endpoints", name, c.TLS, len(c.Endpoints))
		}
	}
	for name, reason := range map[string]string{"missing": "InvalidCACertificateRef", "kind": "InvalidKind"} {
		wantCond(t, []metav1.Condition{policyCond(t, res, name, "Accepted")}, "Accepted", metav1.ConditionFalse, "NoValidCACertificate")
		wantCond(t, []metav1.Condition{policyCond(t, res, name, "ResolvedRefs")}, "ResolvedRefs", metav1.ConditionFalse, reason)
	}
	// The route is not to blame.
	rp := routeParent(t, res, resource.KindHTTPRoute, "ns", "r", 0)
	wantCond(t, rp.Conditions, "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs")

	// The endpoint path keeps a blocked cluster empty.
	patched := PatchEndpoints(snapshot(btlsWorld(missing, kind, slice("ns", "svc", "s1", 443, "10.0.0.2"))...), g,
		[]resource.Key{{Namespace: "ns", Name: "svc"}}, newOneTranslation())
	for _, c := range patched.Clusters {
		if len(c.Endpoints) != 0 {
			t.Errorf("%s: endpoints patched into a blocked cluster", c.Name)
		}
	}
}

func TestBackendTLSPolicyValidation(t *testing.T) {
	system := btlsPolicy("ns", "system", 0, "svc", "a")
	system.Spec.Validation.CACertificateRefs = nil
	system.Spec.Validation.WellKnownCACertificates = ptr(gwv1.WellKnownCACertificatesSystem)
	system.Spec.Validation.SubjectAltNames = []gwv1.SubjectAltName{
		{Type: gwv1.URISubjectAltNameType, URI: "spiffe://example/ns/x"}, {Type: gwv1.HostnameSubjectAltNameType, Hostname: "Other.example.com"}}
	options := btlsPolicy("ns", "options", 0, "svc", "b")
	options.Spec.Options = map[gwv1.AnnotationKey]gwv1.AnnotationValue{"example.com/min-version": "1.3"}
	res := translate(btlsWorld(system, options)...)
	g := irGateway(t, res, "ns", "gw")
	c := cluster(t, g, "ns/svc/443")
	want := []ir.SubjectAltName{{Type: ir.SANURI, Value: "spiffe://example/ns/x"}, {Type: ir.SANDNS, Value: "other.example.com"}}
	if c.TLS == nil || c.TLS.SystemCAFile != SystemCABundle || len(c.TLS.CACertificates) != 0 || len(c.TLS.SubjectAltNames) != 2 ||
		c.TLS.SubjectAltNames[0] != want[0] || c.TLS.SubjectAltNames[1] != want[1] {
		t.Errorf("system CAs and SANs: %+v", c.TLS)
	}
	if c := cluster(t, g, "ns/svc/8443"); c.TLS == nil || c.TLS.Blocked == "" {
		t.Errorf("a policy with options is applied: %+v", c.TLS)
	}
	wantCond(t, []metav1.Condition{policyCond(t, res, "options", "Accepted")}, "Accepted", metav1.ConditionFalse, "Invalid")
	if m := policyCond(t, res, "options", "Accepted").Message; !strings.Contains(m, "example.com/min-version") {
		t.Errorf("message %q does not name the option", m)
	}

	other := btlsPolicy("ns", "other", 0, "svc", "a")
	other.Spec.Validation.CACertificateRefs = nil
	other.Spec.Validation.WellKnownCACertificates = ptr(gwv1.WellKnownCACertificatesType("example.com/cas"))
	res = translate(btlsWorld(other)...)
	wantCond(t, []metav1.Condition{policyCond(t, res, "other", "Accepted")}, "Accepted", metav1.ConditionFalse, "Invalid")
}

// appProtocol https asks for TLS: without a policy the backend is refused
// (UnsupportedProtocol), with one it is served.
func TestBackendTLSAppProtocol(t *testing.T) {
	world := func(extra ...any) []any {
		svc := twoPorts("ns", "svc")
		svc.Spec.Ports[0].AppProtocol = ptr("HTTPS")
		w := btlsWorld(extra...)
		w[1] = svc
		return w
	}
	rp := routeParent(t, translate(world()...), resource.KindHTTPRoute, "ns", "r", 0)
	wantCond(t, rp.Conditions, "ResolvedRefs", metav1.ConditionFalse, "UnsupportedProtocol")
	res := translate(world(btlsPolicy("ns", "p", 0, "svc", "a"))...)
	rp = routeParent(t, res, resource.KindHTTPRoute, "ns", "r", 0)
	wantCond(t, rp.Conditions, "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs")
}

func TestGatewayBackendClientCertificate(t *testing.T) {
	withCert := func(ref gwv1.SecretObjectReference) *gwv1.Gateway {
		g := gateway("ns", "gw", httpL("http", 80, ""))
		g.Spec.TLS = &gwv1.GatewayTLSConfig{Backend: &gwv1.GatewayBackendTLS{ClientCertificateRef: &ref}}
		return g
	}
	world := func(g *gwv1.Gateway, extra ...any) []any {
		w := btlsWorld(append([]any{btlsPolicy("ns", "p", 0, "svc", "a"), tlsSecret("ns", "client"), tlsSecret("other", "client")}, extra...)...)
		w[0] = g
		return w
	}
	res := translate(world(withCert(gwv1.SecretObjectReference{Name: "client"}))...)
	gs := status(t, res, resource.KindGateway, "ns", "gw").Gateway
	wantCond(t, gs.Conditions, "ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs")
	wantCond(t, gs.Conditions, "Accepted", metav1.ConditionTrue, "Accepted")
	g := irGateway(t, res, "ns", "gw")
	if c := cluster(t, g, "ns/svc/443"); c.TLS.ClientCertificate != "ns/client" {
		t.Errorf("client certificate %q", c.TLS.ClientCertificate)
	}
	if c := cluster(t, g, "ns/svc/8443"); c.TLS != nil {
		t.Errorf("plaintext cluster got TLS %+v", c.TLS)
	}
	if len(g.Secrets) != 1 || g.Secrets[0].Name != "ns/client" {
		t.Errorf("secrets %+v", g.Secrets)
	}

	malformed := tlsSecret("ns", "bad")
	malformed.Data[corev1.TLSCertKey] = []byte("garbage")
	for _, tc := range []struct {
		name   string
		ref    gwv1.SecretObjectReference
		reason string
	}{
		{"missing", gwv1.SecretObjectReference{Name: "nope"}, "InvalidClientCertificateRef"},
		{"group", gwv1.SecretObjectReference{Group: ptr(gwv1.Group("wrong.example.com")), Kind: ptr(gwv1.Kind("Secret")), Name: "client"}, "InvalidClientCertificateRef"},
		{"kind", gwv1.SecretObjectReference{Kind: ptr(gwv1.Kind("WrongKind")), Name: "client"}, "InvalidClientCertificateRef"},
		{"malformed", gwv1.SecretObjectReference{Name: "bad"}, "InvalidClientCertificateRef"},
		{"no grant", gwv1.SecretObjectReference{Name: "client", Namespace: ptr(gwv1.Namespace("other"))}, "RefNotPermitted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := translate(world(withCert(tc.ref), malformed)...)
			gs := status(t, res, resource.KindGateway, "ns", "gw").Gateway
			wantCond(t, gs.Conditions, "ResolvedRefs", metav1.ConditionFalse, tc.reason)
			wantCond(t, gs.Conditions, "Accepted", metav1.ConditionTrue, "Accepted")
			g := irGateway(t, res, "ns", "gw")
			if c := cluster(t, g, "ns/svc/443"); c.TLS.ClientCertificate != "" || len(g.Secrets) != 0 {
				t.Errorf("an unusable client certificate is used: %+v, %+v", c.TLS, g.Secrets)
			}
		})
	}
}

// TLS-terminating TLSRoutes reach their backends with the policy's TLS.
func TestBackendTLSPolicyTLSRoute(t *testing.T) {
	l := gwv1.Listener{Name: "tls", Port: 8443, Protocol: gwv1.TLSProtocolType, Hostname: ptr(gwv1.Hostname("tls.example.com")),
		TLS: &gwv1.ListenerTLSConfig{Mode: ptr(gwv1.TLSModeTerminate), CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}}
	r := &gwv1.TLSRoute{ObjectMeta: meta("ns", "tr")}
	r.Spec.ParentRefs = []gwv1.ParentReference{parent("gw")}
	r.Spec.Hostnames = []gwv1.Hostname{"tls.example.com"}
	r.Spec.Rules = []gwv1.TLSRouteRule{{BackendRefs: []gwv1.BackendRef{{BackendObjectReference: gwv1.BackendObjectReference{Name: "svc", Port: ptr(gwv1.PortNumber(443))}}}}}
	res := translate(gateway("ns", "gw", l), tlsSecret("ns", "cert"), twoPorts("ns", "svc"), caMap("ns"), r, btlsPolicy("ns", "p", 0, "svc", "a"))
	c := cluster(t, irGateway(t, res, "ns", "gw"), "ns/svc/443")
	if c.Protocol != ir.UpstreamTCP || c.TLS == nil || c.TLS.Blocked != "" || c.TLS.SNI != "backend.example.com" {
		t.Errorf("cluster %+v TLS %+v", c, c.TLS)
	}
	wantCond(t, []metav1.Condition{policyCond(t, res, "p", "Accepted")}, "Accepted", metav1.ConditionTrue, "Accepted")
}
