package gatewayapi

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
)

func extAuthFilter(proto gwv1.HTTPRouteExternalAuthProtocol, ns, svc string, port int32) gwv1.ListenerFilter {
	ref := gwv1.BackendObjectReference{Name: gwv1.ObjectName(svc), Port: ptr(gwv1.PortNumber(port))}
	if ns != "" {
		ref.Namespace = ptr(gwv1.Namespace(ns))
	}
	return gwv1.ListenerFilter{Type: gwv1.ListenerFilterExternalAuth, ExternalAuth: &gwv1.HTTPExternalAuthFilter{ExternalAuthProtocol: proto, BackendRef: ref}}
}

func withFilters(l gwv1.Listener, fs ...gwv1.ListenerFilter) gwv1.Listener {
	l.Filters = &gwv1.ListenerFilters{Requests: fs}
	return l
}

func hasListener(g *ir.Gateway, name string) bool {
	for _, l := range g.Listeners {
		if l.Name == name {
			return true
		}
	}
	return false
}

// TestListenerFilters: ExternalAuth filters become the chain's ExtAuth in
// order, with their clusters (HTTP/2 for gRPC); the spec's conditions for
// what cannot be served (listener_filters.go).
func TestListenerFilters(t *testing.T) {
	httpAuth := extAuthFilter(gwv1.HTTPRouteExternalAuthHTTPProtocol, "", "authz-http", 80)
	httpAuth.ExternalAuth.HTTPAuthConfig = &gwv1.HTTPAuthConfig{Path: "/check", AllowedRequestHeaders: []string{"X-B", "x-a", "X-A"}}
	httpAuth.ExternalAuth.ForwardBody = &gwv1.ForwardBodyConfig{MaxSize: 1024}
	grpcAuth := extAuthFilter(gwv1.HTTPRouteExternalAuthGRPCProtocol, "", "authz-grpc", 9000)
	svcs := []any{service("infra", "authz-http", 80), service("infra", "authz-grpc", 9000), service("infra", "web", 80), tlsSecret("infra", "cert")}

	t.Run("ExternalAuth, in order", func(t *testing.T) {
		gw := gateway("infra", "gw",
			withFilters(httpL("http", 80, ""), grpcAuth, httpAuth),
			withFilters(httpsL("https", 443, "", "cert"), httpAuth))
		res := translate(append(svcs, gw)...)
		for _, name := range []string{"http", "https"} {
			ls := listenerStatus(t, res, "infra", "gw", name)
			wantCond(t, ls.Conditions, string(gwv1.ListenerConditionAccepted), metav1.ConditionTrue, string(gwv1.ListenerReasonAccepted))
			wantCond(t, ls.Conditions, string(gwv1.ListenerConditionProgrammed), metav1.ConditionTrue, string(gwv1.ListenerReasonProgrammed))
		}
		g := irGateway(t, res, "infra", "gw")
		auth := irListener(t, g, "http-80").FilterChains[0].ExtAuth
		if len(auth) != 2 || !auth[0].GRPC || auth[0].Cluster != "infra/authz-grpc/9000" || auth[1].GRPC || auth[1].Cluster != "infra/authz-http/80" {
			t.Fatalf("http-80 ExtAuth = %+v, want the gRPC filter then the HTTP one", auth)
		}
		if a := auth[1]; a.Name != "gateway/infra/gw/http/filter/1" || a.PathPrefix != "/check" || a.MaxRequestBytes != 1024 ||
			!equalStrings(a.AllowedRequestHeaders, []string{"x-a", "x-b"}) {
			t.Errorf("HTTP filter = %+v", a)
		}
		if auth := irListener(t, g, "https-443").FilterChains[0].ExtAuth; len(auth) != 1 || auth[0].Cluster != "infra/authz-http/80" {
			t.Errorf("https-443 ExtAuth = %+v", auth)
		}
		protos := map[string]ir.UpstreamProtocol{}
		for _, c := range g.Clusters {
			protos[c.Name] = c.Protocol
		}
		if protos["infra/authz-grpc/9000"] != ir.UpstreamHTTP2 || protos["infra/authz-http/80"] != ir.UpstreamHTTP1 {
			t.Errorf("clusters = %v, want the gRPC server's on HTTP/2, the HTTP one's on HTTP/1.1", protos)
		}
	})

	t.Run("ExtensionRef is not supported", func(t *testing.T) {
		ext := gwv1.ListenerFilter{Type: gwv1.ListenerFilterExtensionRef, ExtensionRef: &gwv1.LocalObjectReference{Group: "example.com", Kind: "Body", Name: "b"}}
		gw := gateway("infra", "gw", httpL("plain", 8080, ""), withFilters(httpL("http", 80, ""), httpAuth, ext))
		res := translate(append(svcs, gw)...)
		ls := listenerStatus(t, res, "infra", "gw", "http")
		wantCond(t, ls.Conditions, string(gwv1.ListenerConditionAccepted), metav1.ConditionFalse, string(gwv1.ListenerReasonUnsupportedValue))
		wantCond(t, ls.Conditions, string(gwv1.ListenerConditionProgrammed), metav1.ConditionFalse, string(gwv1.ListenerReasonInvalid))
		if hasListener(irGateway(t, res, "infra", "gw"), "http-80") {
			t.Error("a listener with an unsupported filter is served")
		}
	})

	t.Run("unresolved backend: fail closed", func(t *testing.T) {
		gw := gateway("infra", "gw", httpL("plain", 8080, ""),
			withFilters(httpL("missing", 80, ""), extAuthFilter(gwv1.HTTPRouteExternalAuthHTTPProtocol, "", "nope", 80)),
			withFilters(httpL("other-ns", 81, ""), extAuthFilter(gwv1.HTTPRouteExternalAuthHTTPProtocol, "auth", "authz", 80)))
		res := translate(append(svcs, gw, service("auth", "authz", 80))...)
		for name, reason := range map[string]string{"missing": "BackendNotFound", "other-ns": string(gwv1.ListenerReasonRefNotPermitted)} {
			ls := listenerStatus(t, res, "infra", "gw", name)
			wantCond(t, ls.Conditions, string(gwv1.ListenerConditionAccepted), metav1.ConditionTrue, string(gwv1.ListenerReasonAccepted))
			wantCond(t, ls.Conditions, string(gwv1.ListenerConditionResolvedRefs), metav1.ConditionFalse, reason)
			wantCond(t, ls.Conditions, string(gwv1.ListenerConditionProgrammed), metav1.ConditionFalse, string(gwv1.ListenerReasonInvalid))
		}
		g := irGateway(t, res, "infra", "gw")
		if hasListener(g, "http-80") || hasListener(g, "http-81") {
			t.Error("a listener whose authorization backend is unresolved is served")
		}
		// A ReferenceGrant to the Gateway makes it resolve.
		res = translate(append(svcs, gw, service("auth", "authz", 80), refGrant("auth", "g", "Gateway", "infra", "Service", nil))...)
		if !hasListener(irGateway(t, res, "infra", "gw"), "http-81") {
			t.Error("a granted cross-namespace authorization backend is not served")
		}
	})

	t.Run("HTTP listeners of one port with other filters", func(t *testing.T) {
		gw := gateway("infra", "gw",
			withFilters(httpL("a", 80, "a.example.com"), httpAuth),
			httpL("b", 80, "b.example.com"),
			withFilters(httpL("c", 8080, "c.example.com"), httpAuth),
			withFilters(httpL("d", 8080, "d.example.com"), httpAuth),
			withFilters(gwv1.Listener{Name: "tcp", Port: 9000, Protocol: gwv1.TCPProtocolType}, httpAuth))
		res := translate(append(svcs, gw)...)
		want := map[string]string{"a": string(gwv1.ListenerReasonUnsupportedValue), "b": "", "c": "", "d": "", "tcp": string(gwv1.ListenerReasonUnsupportedValue)}
		for name, reason := range want {
			ls := listenerStatus(t, res, "infra", "gw", name)
			if reason == "" {
				wantCond(t, ls.Conditions, string(gwv1.ListenerConditionAccepted), metav1.ConditionTrue, string(gwv1.ListenerReasonAccepted))
			} else {
				wantCond(t, ls.Conditions, string(gwv1.ListenerConditionAccepted), metav1.ConditionFalse, reason)
			}
		}
		g := irGateway(t, res, "infra", "gw")
		if a := irListener(t, g, "http-80").FilterChains[0].ExtAuth; len(a) != 0 {
			t.Errorf("port 80 serves b, without filters; got %+v", a)
		}
		if a := irListener(t, g, "http-8080").FilterChains[0].ExtAuth; len(a) != 1 {
			t.Errorf("port 8080: ExtAuth %+v, want the shared filter", a)
		}
	})

	t.Run("ListenerSet entries", func(t *testing.T) {
		gw := allowListeners(gateway("infra", "gw", httpL("http", 80, "")), gwv1.NamespacesFromSame, nil)
		ls := listenerSet("infra", "ls", 1, "infra", "gw", withFilters(httpL("extra", 8081, ""), grpcAuth))
		res := translate(append(svcs, gw, ls)...)
		e := entryStatus(t, res, "infra", "ls", "extra")
		wantCond(t, e.Conditions, string(gwv1.ListenerEntryConditionProgrammed), metav1.ConditionTrue, string(gwv1.ListenerEntryReasonProgrammed))
		a := irListener(t, irGateway(t, res, "infra", "gw"), "http-8081").FilterChains[0].ExtAuth
		if len(a) != 1 || a[0].Name != "listenerset/infra/ls/extra/filter/0" || !a[0].GRPC {
			t.Errorf("ExtAuth = %+v", a)
		}
	})
}
