package gatewayapi

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/resource"
)

func TestListenerConflicts(t *testing.T) {
	type want struct {
		accepted bool
		conflict string // "" for NoConflicts
	}
	tests := []struct {
		name      string
		listeners []gwv1.Listener
		want      map[string]want
		gwReason  string
		gwOK      bool
	}{
		{
			name:      "distinct hostnames share a port",
			listeners: []gwv1.Listener{httpL("a", 80, "a.example.com"), httpL("b", 80, "b.example.com"), httpL("any", 80, "")},
			want:      map[string]want{"a": {true, ""}, "b": {true, ""}, "any": {true, ""}},
			gwReason:  string(gwv1.GatewayReasonAccepted), gwOK: true,
		},
		{
			name:      "two protocols on one port: all conflict",
			listeners: []gwv1.Listener{httpL("http", 8443, ""), httpsL("https", 8443, "", "cert"), httpL("other", 80, "")},
			want: map[string]want{
				"http":  {false, string(gwv1.ListenerReasonProtocolConflict)},
				"https": {false, string(gwv1.ListenerReasonProtocolConflict)},
				"other": {true, ""},
			},
			gwReason: string(gwv1.GatewayReasonListenersNotValid), gwOK: true,
		},
		{
			name:      "same port, protocol and hostname: both conflict",
			listeners: []gwv1.Listener{httpL("a", 80, "x.example.com"), httpL("b", 80, "x.example.com")},
			want: map[string]want{
				"a": {false, string(gwv1.ListenerReasonHostnameConflict)},
				"b": {false, string(gwv1.ListenerReasonHostnameConflict)},
			},
			gwReason: string(gwv1.GatewayReasonListenersNotValid), gwOK: false,
		},
		{
			name:      "unsupported protocol takes no part in conflicts",
			listeners: []gwv1.Listener{{Name: "sctp", Port: 80, Protocol: "example.com/sctp"}, httpL("http", 80, "")},
			want:      map[string]want{"sctp": {false, ""}, "http": {true, ""}},
			gwReason:  string(gwv1.GatewayReasonListenersNotValid), gwOK: true,
		},
		{
			name:      "TCP and HTTP on one port conflict",
			listeners: []gwv1.Listener{{Name: "tcp", Port: 80, Protocol: gwv1.TCPProtocolType}, httpL("http", 80, "")},
			want:      map[string]want{"tcp": {false, string(gwv1.ListenerReasonProtocolConflict)}, "http": {false, string(gwv1.ListenerReasonProtocolConflict)}},
			gwReason:  string(gwv1.GatewayReasonListenersNotValid), gwOK: false,
		},
		{
			name: "TCP and UDP share a port number",
			listeners: []gwv1.Listener{{Name: "tcp", Port: 53, Protocol: gwv1.TCPProtocolType},
				{Name: "udp", Port: 53, Protocol: gwv1.UDPProtocolType}},
			want:     map[string]want{"tcp": {true, ""}, "udp": {true, ""}},
			gwReason: string(gwv1.GatewayReasonAccepted), gwOK: true,
		},
		{
			name: "two TCP listeners on one port conflict",
			listeners: []gwv1.Listener{{Name: "a", Port: 9000, Protocol: gwv1.TCPProtocolType},
				{Name: "b", Port: 9000, Protocol: gwv1.TCPProtocolType}},
			want:     map[string]want{"a": {false, string(gwv1.ListenerReasonHostnameConflict)}, "b": {false, string(gwv1.ListenerReasonHostnameConflict)}},
			gwReason: string(gwv1.GatewayReasonListenersNotValid), gwOK: false,
		},
		{
			name: "HTTPS and TLS listeners share a port by SNI",
			listeners: []gwv1.Listener{httpsL("https", 443, "www.example.com", "cert"),
				{Name: "pass", Port: 443, Protocol: gwv1.TLSProtocolType, Hostname: ptr(gwv1.Hostname("db.example.com")),
					TLS: &gwv1.ListenerTLSConfig{Mode: ptr(gwv1.TLSModePassthrough)}}},
			want:     map[string]want{"https": {true, ""}, "pass": {true, ""}},
			gwReason: string(gwv1.GatewayReasonAccepted), gwOK: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := translate(gateway("infra", "gw", tc.listeners...), tlsSecret("infra", "cert"))
			for name, w := range tc.want {
				ls := listenerStatus(t, res, "infra", "gw", name)
				if got := cond(t, ls.Conditions, string(gwv1.ListenerConditionAccepted)).Status == metav1.ConditionTrue; got != w.accepted {
					t.Errorf("listener %s Accepted = %v, want %v", name, got, w.accepted)
				}
				c := cond(t, ls.Conditions, string(gwv1.ListenerConditionConflicted))
				if w.conflict == "" {
					if c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.ListenerReasonNoConflicts) {
						t.Errorf("listener %s Conflicted = %s/%s, want False/NoConflicts", name, c.Status, c.Reason)
					}
				} else {
					wantCond(t, ls.Conditions, string(gwv1.ListenerConditionConflicted), metav1.ConditionTrue, w.conflict)
					// The conformance suite expects the conflict reason on
					// Accepted and Programmed too.
					wantCond(t, ls.Conditions, string(gwv1.ListenerConditionAccepted), metav1.ConditionFalse, w.conflict)
					wantCond(t, ls.Conditions, string(gwv1.ListenerConditionProgrammed), metav1.ConditionFalse, w.conflict)
				}
			}
			gw := status(t, res, resource.KindGateway, "infra", "gw").Gateway
			st := metav1.ConditionFalse
			if tc.gwOK {
				st = metav1.ConditionTrue
			}
			wantCond(t, gw.Conditions, string(gwv1.GatewayConditionAccepted), st, tc.gwReason)
			if got := len(res.Gateways) == 1; got != tc.gwOK {
				t.Errorf("IR built = %v, want %v", got, tc.gwOK)
			}
		})
	}
}

func TestUnsupportedProtocolListener(t *testing.T) {
	res := translate(gateway("infra", "gw", gwv1.Listener{Name: "sctp", Port: 443, Protocol: "example.com/sctp"}))
	ls := listenerStatus(t, res, "infra", "gw", "sctp")
	wantCond(t, ls.Conditions, string(gwv1.ListenerConditionAccepted), metav1.ConditionFalse, string(gwv1.ListenerReasonUnsupportedProtocol))
	if len(ls.SupportedKinds) != 0 || ls.SupportedKinds == nil {
		t.Errorf("supportedKinds = %#v, want empty non-nil", ls.SupportedKinds)
	}
	gw := status(t, res, resource.KindGateway, "infra", "gw").Gateway
	wantCond(t, gw.Conditions, string(gwv1.GatewayConditionAccepted), metav1.ConditionFalse, string(gwv1.GatewayReasonListenersNotValid))
	wantCond(t, gw.Conditions, string(gwv1.GatewayConditionProgrammed), metav1.ConditionFalse, string(gwv1.GatewayReasonInvalid))
	if len(res.Gateways) != 0 {
		t.Errorf("IR built for a Gateway that is not accepted")
	}
}

func TestListenerRouteKinds(t *testing.T) {
	tests := []struct {
		name      string
		kinds     []gwv1.RouteGroupKind
		wantKinds []string
		resolved  bool
	}{
		{"default", nil, []string{"HTTPRoute", "GRPCRoute"}, true},
		{"HTTPRoute only", []gwv1.RouteGroupKind{{Kind: "HTTPRoute"}}, []string{"HTTPRoute"}, true},
		{"duplicates collapse", []gwv1.RouteGroupKind{{Kind: "GRPCRoute"}, {Kind: "GRPCRoute"}}, []string{"GRPCRoute"}, true},
		{"only invalid", []gwv1.RouteGroupKind{{Kind: "TCPRoute"}}, nil, false},
		{"valid and invalid", []gwv1.RouteGroupKind{{Kind: "UDPRoute"}, {Kind: "HTTPRoute"}}, []string{"HTTPRoute"}, false},
		{"wrong group", []gwv1.RouteGroupKind{{Group: ptr(gwv1.Group("example.com")), Kind: "HTTPRoute"}}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := httpL("http", 80, "")
			if tc.kinds != nil {
				l.AllowedRoutes = &gwv1.AllowedRoutes{Kinds: tc.kinds}
			}
			res := translate(gateway("infra", "gw", l))
			ls := listenerStatus(t, res, "infra", "gw", "http")
			var got []string
			for _, k := range ls.SupportedKinds {
				if k.Group == nil || *k.Group != gwv1.GroupName {
					t.Errorf("supported kind %s has group %v", k.Kind, k.Group)
				}
				got = append(got, string(k.Kind))
			}
			if !equalStrings(got, tc.wantKinds) {
				t.Errorf("supportedKinds = %v, want %v", got, tc.wantKinds)
			}
			if tc.resolved {
				wantCond(t, ls.Conditions, string(gwv1.ListenerConditionResolvedRefs), metav1.ConditionTrue, string(gwv1.ListenerReasonResolvedRefs))
			} else {
				wantCond(t, ls.Conditions, string(gwv1.ListenerConditionResolvedRefs), metav1.ConditionFalse, string(gwv1.ListenerReasonInvalidRouteKinds))
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestListenerCertificates(t *testing.T) {
	opaque := tlsSecret("infra", "opaque")
	opaque.Type = corev1.SecretTypeOpaque
	broken := tlsSecret("infra", "broken")
	broken.Data[corev1.TLSPrivateKeyKey] = []byte("not a key")
	stringData := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "strdata"},
		Type:       corev1.SecretTypeTLS,
		StringData: map[string]string{corev1.TLSCertKey: string(tlsSecret("", "").Data[corev1.TLSCertKey]), corev1.TLSPrivateKeyKey: string(tlsSecret("", "").Data[corev1.TLSPrivateKeyKey])},
	}
	cfgMap := httpsL("https", 443, "")
	cfgMap.TLS.CertificateRefs = []gwv1.SecretObjectReference{{Kind: ptr(gwv1.Kind("ConfigMap")), Name: "cert"}}
	otherNS := httpsL("https", 443, "")
	otherNS.TLS.CertificateRefs = []gwv1.SecretObjectReference{{Namespace: ptr(gwv1.Namespace("certs")), Name: "cert"}}
	missingOtherNS := httpsL("https", 443, "")
	missingOtherNS.TLS.CertificateRefs = []gwv1.SecretObjectReference{{Namespace: ptr(gwv1.Namespace("certs")), Name: "nope"}}
	passthrough := httpsL("https", 443, "", "cert")
	passthrough.TLS.Mode = ptr(gwv1.TLSModePassthrough)

	tests := []struct {
		name     string
		listener gwv1.Listener
		extra    []any
		reason   string // ResolvedRefs reason when False, "" when True
		accepted string // Accepted reason
	}{
		{"valid", httpsL("https", 443, "", "cert"), nil, "", string(gwv1.ListenerReasonAccepted)},
		{"stringData", httpsL("https", 443, "", "strdata"), []any{stringData}, "", string(gwv1.ListenerReasonAccepted)},
		{"missing", httpsL("https", 443, "", "nope"), nil, string(gwv1.ListenerReasonInvalidCertificateRef), string(gwv1.ListenerReasonAccepted)},
		{"not kubernetes.io/tls", httpsL("https", 443, "", "opaque"), []any{opaque}, string(gwv1.ListenerReasonInvalidCertificateRef), string(gwv1.ListenerReasonAccepted)},
		{"malformed", httpsL("https", 443, "", "broken"), []any{broken}, string(gwv1.ListenerReasonInvalidCertificateRef), string(gwv1.ListenerReasonAccepted)},
		{"no certificateRefs", httpsL("https", 443, ""), nil, string(gwv1.ListenerReasonInvalidCertificateRef), string(gwv1.ListenerReasonAccepted)},
		{"not a Secret", cfgMap, nil, string(gwv1.ListenerReasonInvalidCertificateRef), string(gwv1.ListenerReasonAccepted)},
		{"other namespace without grant", otherNS, []any{tlsSecret("certs", "cert")}, string(gwv1.ListenerReasonRefNotPermitted), string(gwv1.ListenerReasonAccepted)},
		{"other namespace, missing, without grant", missingOtherNS, nil, string(gwv1.ListenerReasonRefNotPermitted), string(gwv1.ListenerReasonAccepted)},
		{"other namespace with grant", otherNS, []any{tlsSecret("certs", "cert"), refGrant("certs", "g", "Gateway", "infra", "Secret", nil)}, "", string(gwv1.ListenerReasonAccepted)},
		{"grant for another name", otherNS, []any{tlsSecret("certs", "cert"), refGrant("certs", "g", "Gateway", "infra", "Secret", ptr("other"))}, string(gwv1.ListenerReasonRefNotPermitted), string(gwv1.ListenerReasonAccepted)},
		{"grant from another kind", otherNS, []any{tlsSecret("certs", "cert"), refGrant("certs", "g", "HTTPRoute", "infra", "Secret", nil)}, string(gwv1.ListenerReasonRefNotPermitted), string(gwv1.ListenerReasonAccepted)},
		{"passthrough", passthrough, nil, "", string(gwv1.ListenerReasonUnsupportedValue)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := append([]any{gateway("infra", "gw", tc.listener, httpL("http", 80, "")), tlsSecret("infra", "cert")}, tc.extra...)
			res := translate(objs...)
			ls := listenerStatus(t, res, "infra", "gw", "https")
			if tc.reason == "" {
				wantCond(t, ls.Conditions, string(gwv1.ListenerConditionResolvedRefs), metav1.ConditionTrue, string(gwv1.ListenerReasonResolvedRefs))
			} else {
				wantCond(t, ls.Conditions, string(gwv1.ListenerConditionResolvedRefs), metav1.ConditionFalse, tc.reason)
			}
			acc := cond(t, ls.Conditions, string(gwv1.ListenerConditionAccepted))
			if acc.Reason != tc.accepted {
				t.Errorf("Accepted reason = %s (%s), want %s", acc.Reason, acc.Message, tc.accepted)
			}
			prog := cond(t, ls.Conditions, string(gwv1.ListenerConditionProgrammed))
			g := irGateway(t, res, "infra", "gw")
			hasHTTPS := false
			for _, l := range g.Listeners {
				hasHTTPS = hasHTTPS || l.Name == "https-443"
			}
			// Certificate problems leave the listener Accepted but not
			// Programmed (reason Invalid).
			ok := tc.accepted == string(gwv1.ListenerReasonAccepted) && tc.reason == ""
			if !ok && prog.Reason != string(gwv1.ListenerReasonInvalid) {
				t.Errorf("Programmed reason = %s, want Invalid", prog.Reason)
			}
			if hasHTTPS != ok || (prog.Status == metav1.ConditionTrue) != ok {
				t.Errorf("https-443 in IR = %v, Programmed = %s; want %v", hasHTTPS, prog.Status, ok)
			}
			if hasHTTPS {
				fc := irListener(t, g, "https-443").FilterChains[0]
				if len(fc.CertificateSecrets) != 1 || len(g.Secrets) != 1 || g.Secrets[0].Name != fc.CertificateSecrets[0] || len(g.Secrets[0].Cert) == 0 {
					t.Errorf("certificates not wired: chain %v, secrets %v", fc.CertificateSecrets, len(g.Secrets))
				}
			}
		})
	}
}

func TestOverlappingTLSConfig(t *testing.T) {
	res := translate(gateway("infra", "gw",
		httpsL("foo", 443, "foo.example.com", "cert"),
		httpsL("bar", 443, "bar.bar.example.com", "cert"),
		httpsL("wild", 443, "*.example.com", "cert"),
		httpsL("apex", 443, "example.com", "cert"),
		httpsL("any", 443, "", "cert"),
		httpsL("other-port", 9443, "foo.example.com", "cert"),
	), tlsSecret("infra", "cert"))
	for name, want := range map[string]bool{"foo": true, "bar": true, "wild": true, "apex": false, "any": false, "other-port": false} {
		ls := listenerStatus(t, res, "infra", "gw", name)
		if got := hasCond(ls.Conditions, string(gwv1.ListenerConditionOverlappingTLSConfig)); got != want {
			t.Errorf("%s OverlappingTLSConfig set = %v, want %v", name, got, want)
		}
		if want {
			wantCond(t, ls.Conditions, string(gwv1.ListenerConditionOverlappingTLSConfig), metav1.ConditionTrue, string(gwv1.ListenerReasonOverlappingHostnames))
		}
		wantCond(t, ls.Conditions, string(gwv1.ListenerConditionAccepted), metav1.ConditionTrue, string(gwv1.ListenerReasonAccepted))
	}
	// One chain per hostname, the hostname-less one without SNI.
	l := irListener(t, irGateway(t, res, "infra", "gw"), "https-443")
	var names []string
	for _, fc := range l.FilterChains {
		names = append(names, fc.Name)
		if (fc.Name == "https-443/*") != (len(fc.ServerNames) == 0) {
			t.Errorf("chain %s has server names %v", fc.Name, fc.ServerNames)
		}
	}
	want := []string{"https-443/*", "https-443/*.example.com", "https-443/bar.bar.example.com", "https-443/example.com", "https-443/foo.example.com"}
	if !equalStrings(names, want) {
		t.Errorf("chains = %v, want %v", names, want)
	}
}

func TestGatewayLevelProblems(t *testing.T) {
	withAddr := gateway("infra", "addr", httpL("http", 80, ""))
	withAddr.Spec.Addresses = []gwv1.GatewaySpecAddress{{Type: ptr(gwv1.AddressType("example.com/Custom")), Value: "10.0.0.1"}}
	withParams := gateway("infra", "params", httpL("http", 80, ""))
	withParams.Spec.Infrastructure = &gwv1.GatewayInfrastructure{ParametersRef: &gwv1.LocalParametersReference{Kind: "ConfigMap", Name: "x"}}
	res := translate(withAddr, withParams)
	wantCond(t, status(t, res, resource.KindGateway, "infra", "addr").Gateway.Conditions, string(gwv1.GatewayConditionAccepted), metav1.ConditionFalse, string(gwv1.GatewayReasonUnsupportedAddress))
	wantCond(t, status(t, res, resource.KindGateway, "infra", "params").Gateway.Conditions, string(gwv1.GatewayConditionAccepted), metav1.ConditionFalse, string(gwv1.GatewayReasonInvalidParameters))
	if len(res.Gateways) != 0 {
		t.Errorf("IR built for rejected Gateways")
	}
	// Listeners are still reported, valid but not programmed.
	ls := listenerStatus(t, res, "infra", "addr", "http")
	wantCond(t, ls.Conditions, string(gwv1.ListenerConditionAccepted), metav1.ConditionTrue, string(gwv1.ListenerReasonAccepted))
	wantCond(t, ls.Conditions, string(gwv1.ListenerConditionProgrammed), metav1.ConditionFalse, string(gwv1.ListenerReasonInvalid))
}

func TestGatewayClasses(t *testing.T) {
	other := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: gwv1.GatewayClassSpec{ControllerName: "example.com/other"}}
	params := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "params", Generation: 7}, Spec: gwv1.GatewayClassSpec{
		ControllerName: testController, ParametersRef: &gwv1.ParametersReference{Kind: "ConfigMap", Name: "cfg"}}}
	gwOther := gateway("infra", "theirs", httpL("http", 80, ""))
	gwOther.Spec.GatewayClassName = "other"
	gwParams := gateway("infra", "params", httpL("http", 80, ""))
	gwParams.Spec.GatewayClassName = "params"
	res := translate(other, params, gwOther, gwParams)

	if hasStatus(res, resource.KindGatewayClass, "", "other") || hasStatus(res, resource.KindGateway, "infra", "theirs") {
		t.Errorf("objects of another controller got a status")
	}
	st := status(t, res, resource.KindGatewayClass, "", "portico").GatewayClass
	wantCond(t, st.Conditions, string(gwv1.GatewayClassConditionStatusAccepted), metav1.ConditionTrue, string(gwv1.GatewayClassReasonAccepted))
	if len(st.SupportedFeatures) == 0 {
		t.Fatal("no supported features")
	}
	for i := 1; i < len(st.SupportedFeatures); i++ {
		if st.SupportedFeatures[i-1].Name >= st.SupportedFeatures[i].Name {
			t.Errorf("supportedFeatures not sorted: %v", st.SupportedFeatures)
		}
	}
	ps := status(t, res, resource.KindGatewayClass, "", "params")
	wantCond(t, ps.GatewayClass.Conditions, string(gwv1.GatewayClassConditionStatusAccepted), metav1.ConditionFalse, string(gwv1.GatewayClassReasonInvalidParameters))
	if c := cond(t, ps.GatewayClass.Conditions, string(gwv1.GatewayClassConditionStatusAccepted)); c.ObservedGeneration != 7 || ps.Generation != 7 {
		t.Errorf("observedGeneration = %d, generation %d, want 7", c.ObservedGeneration, ps.Generation)
	}
	wantCond(t, status(t, res, resource.KindGateway, "infra", "params").Gateway.Conditions, string(gwv1.GatewayConditionAccepted), metav1.ConditionFalse, string(gwv1.GatewayReasonInvalid))
}

// A listener on a port the provisioned proxies use themselves (admin,
// readiness, shutdown manager, metrics) could not be bound: it is refused
// with PortUnavailable when Portico provisions the proxies, and the other
// listeners are served; without provisioning the proxies' bootstrap is
// their operator's and the port is allowed.
func TestListenerOnProxyPort(t *testing.T) {
	gw := gateway("infra", "gw", httpL("ok", 8080, ""),
		httpL("admin", 19001, "a.example.com"), httpL("ready", 19002, "b.example.com"),
		httpL("agent", 19003, "c.example.com"), httpL("metrics", 19090, "d.example.com"))
	res := Translate(snapshot(gw), Options{ControllerName: testController, Infrastructure: true})
	for _, name := range []string{"admin", "ready", "agent", "metrics"} {
		ls := listenerStatus(t, res, "infra", "gw", name)
		wantCond(t, ls.Conditions, string(gwv1.ListenerConditionAccepted), metav1.ConditionFalse, string(gwv1.ListenerReasonPortUnavailable))
	}
	wantCond(t, listenerStatus(t, res, "infra", "gw", "ok").Conditions, string(gwv1.ListenerConditionAccepted), metav1.ConditionTrue, string(gwv1.ListenerReasonAccepted))
	if len(res.Gateways) != 1 {
		t.Fatalf("IR of %d Gateways, want the Gateway with its valid listener", len(res.Gateways))
	}
	for _, l := range res.Gateways[0].Listeners {
		if l.Port != 8080 {
			t.Errorf("listener on port %d served", l.Port)
		}
	}

	res = translate(gw)
	wantCond(t, listenerStatus(t, res, "infra", "gw", "ready").Conditions, string(gwv1.ListenerConditionAccepted), metav1.ConditionTrue, string(gwv1.ListenerReasonAccepted))
}
