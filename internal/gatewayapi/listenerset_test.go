package gatewayapi

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/resource"
)

func listenerSet(ns, name string, created int, gwNS, gw string, ls ...gwv1.Listener) *gwv1.ListenerSet {
	s := &gwv1.ListenerSet{ObjectMeta: meta(ns, name)}
	s.CreationTimestamp = at(created)
	s.Spec.ParentRef = gwv1.ParentGatewayReference{Name: gwv1.ObjectName(gw)}
	if gwNS != ns {
		s.Spec.ParentRef.Namespace = ptr(gwv1.Namespace(gwNS))
	}
	for _, l := range ls {
		s.Spec.Listeners = append(s.Spec.Listeners, gwv1.ListenerEntry{
			Name: l.Name, Hostname: l.Hostname, Port: l.Port, Protocol: l.Protocol, TLS: l.TLS, AllowedRoutes: l.AllowedRoutes, Filters: l.Filters,
		})
	}
	return s
}

func allowListeners(gw *gwv1.Gateway, from gwv1.FromNamespaces, sel *metav1.LabelSelector) *gwv1.Gateway {
	gw.Spec.AllowedListeners = &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: &from, Selector: sel}}
	return gw
}

func entryStatus(t *testing.T, res *Result, ns, name, listener string) gwv1.ListenerEntryStatus {
	t.Helper()
	for _, l := range status(t, res, resource.KindListenerSet, ns, name).ListenerSet.Listeners {
		if string(l.Name) == listener {
			return l
		}
	}
	t.Fatalf("no listener %s in ListenerSet %s/%s", listener, ns, name)
	return gwv1.ListenerEntryStatus{}
}

func TestListenerSetAllowed(t *testing.T) {
	labeled := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps", Labels: map[string]string{"team": "a"}}}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	byName := &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "apps"}}
	tests := []struct {
		name    string
		gw      *gwv1.Gateway
		lsNS    string
		allowed bool
	}{
		{"default is None", gateway("infra", "gw", httpL("http", 80, "")), "infra", false},
		{"None", allowListeners(gateway("infra", "gw", httpL("http", 80, "")), gwv1.NamespacesFromNone, nil), "infra", false},
		{"Same, same namespace", allowListeners(gateway("infra", "gw", httpL("http", 80, "")), gwv1.NamespacesFromSame, nil), "infra", true},
		{"Same, other namespace", allowListeners(gateway("infra", "gw", httpL("http", 80, "")), gwv1.NamespacesFromSame, nil), "apps", false},
		{"All", allowListeners(gateway("infra", "gw", httpL("http", 80, "")), gwv1.NamespacesFromAll, nil), "apps", true},
		{"Selector matches", allowListeners(gateway("infra", "gw", httpL("http", 80, "")), gwv1.NamespacesFromSelector, sel), "apps", true},
		{"Selector on metadata.name", allowListeners(gateway("infra", "gw", httpL("http", 80, "")), gwv1.NamespacesFromSelector, byName), "apps", true},
		{"Selector, namespace absent from snapshot", allowListeners(gateway("infra", "gw", httpL("http", 80, "")), gwv1.NamespacesFromSelector, sel), "ghost", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ls := listenerSet(tc.lsNS, "ls", 1, "infra", "gw", httpL("extra", 8080, ""))
			res := translate(tc.gw, ls, labeled)
			st := status(t, res, resource.KindListenerSet, tc.lsNS, "ls").ListenerSet
			gw := status(t, res, resource.KindGateway, "infra", "gw").Gateway
			if tc.allowed {
				wantCond(t, st.Conditions, string(gwv1.ListenerSetConditionAccepted), metav1.ConditionTrue, string(gwv1.ListenerSetReasonAccepted))
				wantCond(t, st.Conditions, string(gwv1.ListenerSetConditionProgrammed), metav1.ConditionTrue, string(gwv1.ListenerSetReasonProgrammed))
				if *gw.AttachedListenerSets != 1 {
					t.Errorf("attachedListenerSets = %d, want 1", *gw.AttachedListenerSets)
				}
				irListener(t, irGateway(t, res, "infra", "gw"), "http-8080")
			} else {
				wantCond(t, st.Conditions, string(gwv1.ListenerSetConditionAccepted), metav1.ConditionFalse, string(gwv1.ListenerSetReasonNotAllowed))
				wantCond(t, st.Conditions, string(gwv1.ListenerSetConditionProgrammed), metav1.ConditionFalse, string(gwv1.ListenerSetReasonNotAllowed))
				if *gw.AttachedListenerSets != 0 || len(irGateway(t, res, "infra", "gw").Listeners) != 1 {
					t.Errorf("a ListenerSet that is not allowed was attached")
				}
			}
			if len(gw.Listeners) != 1 {
				t.Errorf("Gateway status lists %d listeners, want only its own", len(gw.Listeners))
			}
		})
	}
}

func TestListenerSetParentNotOurs(t *testing.T) {
	theirs := gateway("infra", "theirs", httpL("http", 80, ""))
	theirs.Spec.GatewayClassName = "other"
	res := translate(theirs,
		listenerSet("infra", "to-theirs", 0, "infra", "theirs", httpL("x", 81, "")),
		listenerSet("infra", "to-missing", 0, "infra", "missing", httpL("x", 81, "")))
	if hasStatus(res, resource.KindListenerSet, "infra", "to-theirs") || hasStatus(res, resource.KindListenerSet, "infra", "to-missing") {
		t.Errorf("ListenerSets of unknown or foreign parents got a status")
	}
}

// TestListenerSetMergeOrder checks the precedence of GEP-1713: the Gateway's
// listeners first, then ListenerSets by creation time, then namespace/name.
func TestListenerSetMergeOrder(t *testing.T) {
	gw := allowListeners(gateway("infra", "gw", httpL("gw-80", 80, "taken.example.com")), gwv1.NamespacesFromAll, nil)
	// "b" is older than "a": it wins the shared hostname on 8080.
	a := listenerSet("team", "a", 20, "infra", "gw", httpL("web", 8080, "shared.example.com"), httpL("only", 9090, ""))
	b := listenerSet("team", "b", 10, "infra", "gw", httpL("web", 8080, "shared.example.com"))
	// Same creation time as "a": alphabetical order puts "a" first.
	c := listenerSet("team", "c", 20, "infra", "gw", httpL("web", 9090, ""))
	// Loses to the Gateway on hostname and on protocol.
	d := listenerSet("team", "d", 0, "infra", "gw", httpL("dup", 80, "taken.example.com"))
	e := listenerSet("team", "e", 0, "infra", "gw", httpsL("tls", 80, "", "cert"))
	res := translate(gw, a, b, c, d, e, tlsSecret("team", "cert"))

	wantConflict := func(set, name, reason string) {
		t.Helper()
		ls := entryStatus(t, res, "team", set, name)
		wantCond(t, ls.Conditions, string(gwv1.ListenerEntryConditionConflicted), metav1.ConditionTrue, reason)
		// As ListenerSetHostnameConflict and ListenerSetProtocolConflict
		// of the conformance suite expect.
		wantCond(t, ls.Conditions, string(gwv1.ListenerEntryConditionAccepted), metav1.ConditionFalse, reason)
		wantCond(t, ls.Conditions, string(gwv1.ListenerEntryConditionProgrammed), metav1.ConditionFalse, reason)
	}
	wantOK := func(set, name string) {
		t.Helper()
		ls := entryStatus(t, res, "team", set, name)
		wantCond(t, ls.Conditions, string(gwv1.ListenerEntryConditionConflicted), metav1.ConditionFalse, string(gwv1.ListenerReasonNoConflicts))
		wantCond(t, ls.Conditions, string(gwv1.ListenerEntryConditionAccepted), metav1.ConditionTrue, string(gwv1.ListenerEntryReasonAccepted))
	}
	wantOK("b", "web")
	wantConflict("a", "web", string(gwv1.ListenerEntryReasonHostnameConflict))
	wantOK("a", "only")
	wantConflict("c", "web", string(gwv1.ListenerEntryReasonHostnameConflict))
	wantConflict("d", "dup", string(gwv1.ListenerEntryReasonHostnameConflict))
	wantConflict("e", "tls", string(gwv1.ListenerEntryReasonProtocolConflict))

	// The Gateway's own listener is never affected.
	gl := listenerStatus(t, res, "infra", "gw", "gw-80")
	wantCond(t, gl.Conditions, string(gwv1.ListenerConditionConflicted), metav1.ConditionFalse, string(gwv1.ListenerReasonNoConflicts))

	// ListenerSets with some accepted listeners are accepted (with reason
	// ListenersNotValid when some are not); those with none are
	// ListenersNotValid and not counted.
	for set, ok := range map[string]bool{"a": true, "b": true, "c": false, "d": false, "e": false} {
		st := status(t, res, resource.KindListenerSet, "team", set).ListenerSet
		if ok {
			reason := string(gwv1.ListenerSetReasonAccepted)
			if set == "a" {
				reason = string(gwv1.ListenerSetReasonListenersNotValid)
			}
			wantCond(t, st.Conditions, string(gwv1.ListenerSetConditionAccepted), metav1.ConditionTrue, reason)
			wantCond(t, st.Conditions, string(gwv1.ListenerSetConditionProgrammed), metav1.ConditionTrue, string(gwv1.ListenerSetReasonProgrammed))
		} else {
			wantCond(t, st.Conditions, string(gwv1.ListenerSetConditionAccepted), metav1.ConditionFalse, string(gwv1.ListenerSetReasonListenersNotValid))
			wantCond(t, st.Conditions, string(gwv1.ListenerSetConditionProgrammed), metav1.ConditionFalse, string(gwv1.ListenerSetReasonListenersNotValid))
		}
	}
	gst := status(t, res, resource.KindGateway, "infra", "gw").Gateway
	if *gst.AttachedListenerSets != 2 {
		t.Errorf("attachedListenerSets = %d, want 2", *gst.AttachedListenerSets)
	}
	wantCond(t, gst.Conditions, string(gwv1.GatewayConditionAccepted), metav1.ConditionTrue, string(gwv1.GatewayReasonAccepted))
	var ports []uint32
	for _, l := range irGateway(t, res, "infra", "gw").Listeners {
		ports = append(ports, l.Port)
	}
	if len(ports) != 3 || ports[0] != 80 || ports[1] != 8080 || ports[2] != 9090 {
		t.Errorf("IR ports = %v, want [80 8080 9090]", ports)
	}
}

func TestListenerSetParentNotAccepted(t *testing.T) {
	gw := allowListeners(gateway("infra", "gw", gwv1.Listener{Name: "sctp", Port: 53, Protocol: "example.com/sctp"}), gwv1.NamespacesFromSame, nil)
	res := translate(gw, listenerSet("infra", "ls", 0, "infra", "gw", httpL("http", 80, "")))
	st := status(t, res, resource.KindListenerSet, "infra", "ls").ListenerSet
	wantCond(t, st.Conditions, string(gwv1.ListenerSetConditionAccepted), metav1.ConditionFalse, string(gwv1.ListenerSetReasonParentNotAccepted))
	// Programmed uses the reason the ListenerSet specification lists for it.
	wantCond(t, st.Conditions, string(gwv1.ListenerSetConditionProgrammed), metav1.ConditionFalse, "ParentNotProgrammed")
	if len(res.Gateways) != 0 {
		t.Error("IR built for a Gateway that is not accepted")
	}
}

func TestListenerSetCertificateGrants(t *testing.T) {
	gw := allowListeners(gateway("infra", "gw", httpL("http", 80, "")), gwv1.NamespacesFromAll, nil)
	l := httpsL("https", 443, "", "")
	l.TLS.CertificateRefs = []gwv1.SecretObjectReference{{Namespace: ptr(gwv1.Namespace("certs")), Name: "cert"}}
	ls := listenerSet("team", "ls", 0, "infra", "gw", l, httpL("plain", 8080, ""))

	// A grant to the parent Gateway is not inherited by the ListenerSet.
	res := translate(gw, ls, tlsSecret("certs", "cert"), refGrant("certs", "to-gw", "Gateway", "infra", "Secret", nil))
	e := entryStatus(t, res, "team", "ls", "https")
	wantCond(t, e.Conditions, string(gwv1.ListenerEntryConditionResolvedRefs), metav1.ConditionFalse, string(gwv1.ListenerEntryReasonRefNotPermitted))
	wantCond(t, e.Conditions, string(gwv1.ListenerEntryConditionAccepted), metav1.ConditionTrue, string(gwv1.ListenerEntryReasonAccepted))
	wantCond(t, e.Conditions, string(gwv1.ListenerEntryConditionProgrammed), metav1.ConditionFalse, string(gwv1.ListenerEntryReasonInvalid))
	wantCond(t, status(t, res, resource.KindListenerSet, "team", "ls").ListenerSet.Conditions, string(gwv1.ListenerSetConditionAccepted), metav1.ConditionTrue, string(gwv1.ListenerSetReasonListenersNotValid))

	// Without its plain listener the ListenerSet has nothing to serve: not
	// accepted, as ListenerSetReferenceGrant of the conformance suite expects.
	only := listenerSet("team", "only", 0, "infra", "gw", l)
	res = translate(gw, only, tlsSecret("certs", "cert"))
	st := status(t, res, resource.KindListenerSet, "team", "only").ListenerSet
	wantCond(t, st.Conditions, string(gwv1.ListenerSetConditionAccepted), metav1.ConditionFalse, string(gwv1.ListenerSetReasonListenersNotValid))
	wantCond(t, st.Conditions, string(gwv1.ListenerSetConditionProgrammed), metav1.ConditionFalse, string(gwv1.ListenerSetReasonListenersNotValid))

	res = translate(gw, ls, tlsSecret("certs", "cert"), refGrant("certs", "to-ls", "ListenerSet", "team", "Secret", nil))
	e = entryStatus(t, res, "team", "ls", "https")
	wantCond(t, e.Conditions, string(gwv1.ListenerEntryConditionResolvedRefs), metav1.ConditionTrue, string(gwv1.ListenerEntryReasonResolvedRefs))
	wantCond(t, e.Conditions, string(gwv1.ListenerEntryConditionProgrammed), metav1.ConditionTrue, string(gwv1.ListenerEntryReasonProgrammed))
	g := irGateway(t, res, "infra", "gw")
	if len(g.Secrets) != 1 || g.Secrets[0].Name != "certs/cert" {
		t.Errorf("secrets = %v", g.Secrets)
	}
}
