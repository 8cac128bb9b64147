package gatewayapi

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/resource"
)

func simpleRule() gwv1.HTTPRouteRule {
	return gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80)}}
}

func TestRouteAttachment(t *testing.T) {
	kindsHTTPOnly := allowAll(httpL("http-only", 8080, ""))
	kindsHTTPOnly.AllowedRoutes.Kinds = []gwv1.RouteGroupKind{{Kind: "TLSRoute"}}
	gw := gateway("infra", "gw",
		allowAll(httpL("http", 80, "")),
		allowAll(httpL("foo", 81, "foo.example.com")),
		allowAll(httpL("wild", 82, "*.example.com")),
		httpL("same-ns", 83, ""),
		kindsHTTPOnly,
	)
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	selL := httpL("selected", 84, "")
	from := gwv1.NamespacesFromSelector
	selL.AllowedRoutes = &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &from, Selector: sel}}
	gw.Spec.Listeners = append(gw.Spec.Listeners, selL)
	prod := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{"env": "prod"}}}

	ref := func(section string, port int32) gwv1.ParentReference {
		p := gwv1.ParentReference{Name: "gw", Namespace: ptr(gwv1.Namespace("infra"))}
		if section != "" {
			p.SectionName = ptr(gwv1.SectionName(section))
		}
		if port != 0 {
			p.Port = ptr(port)
		}
		return p
	}
	tests := []struct {
		name      string
		ns        string
		ref       gwv1.ParentReference
		hostnames []string
		reason    string
	}{
		{"whole gateway", "apps", ref("", 0), nil, string(gwv1.RouteReasonAccepted)},
		{"by section", "apps", ref("foo", 0), nil, string(gwv1.RouteReasonAccepted)},
		{"by port", "apps", ref("", 82), nil, string(gwv1.RouteReasonAccepted)},
		{"section and port agree", "apps", ref("foo", 81), nil, string(gwv1.RouteReasonAccepted)},
		{"section and port disagree", "apps", ref("foo", 80), nil, string(gwv1.RouteReasonNoMatchingParent)},
		{"unknown section", "apps", ref("nope", 0), nil, string(gwv1.RouteReasonNoMatchingParent)},
		{"unknown port", "apps", ref("", 9999), nil, string(gwv1.RouteReasonNoMatchingParent)},
		{"namespace not allowed", "apps", ref("same-ns", 0), nil, string(gwv1.RouteReasonNotAllowedByListeners)},
		{"namespace allowed: Same", "infra", ref("same-ns", 0), nil, string(gwv1.RouteReasonAccepted)},
		{"kind not allowed", "apps", ref("http-only", 0), nil, string(gwv1.RouteReasonNotAllowedByListeners)},
		{"selector matches", "prod", ref("selected", 0), nil, string(gwv1.RouteReasonAccepted)},
		{"selector does not match", "apps", ref("selected", 0), nil, string(gwv1.RouteReasonNotAllowedByListeners)},
		{"hostname matches exact listener", "apps", ref("foo", 0), []string{"foo.example.com"}, string(gwv1.RouteReasonAccepted)},
		{"wildcard route on exact listener", "apps", ref("foo", 0), []string{"*.example.com"}, string(gwv1.RouteReasonAccepted)},
		{"hostname does not match", "apps", ref("foo", 0), []string{"bar.example.com"}, string(gwv1.RouteReasonNoMatchingListenerHostname)},
		{"apex not under wildcard", "apps", ref("wild", 0), []string{"example.com"}, string(gwv1.RouteReasonNoMatchingListenerHostname)},
		{"invalid hostnames only", "apps", ref("http", 0), []string{"10.0.0.1"}, string(gwv1.RouteReasonNoMatchingListenerHostname)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httpRoute(tc.ns, "r", []gwv1.ParentReference{tc.ref}, tc.hostnames, simpleRule())
			res := translate(gw, prod, r, service(tc.ns, "web", 80))
			p := routeParent(t, res, resource.KindHTTPRoute, tc.ns, "r", 0)
			c := cond(t, p.Conditions, string(gwv1.RouteConditionAccepted))
			if c.Reason != tc.reason {
				t.Errorf("Accepted = %s/%s (%s), want reason %s", c.Status, c.Reason, c.Message, tc.reason)
			}
			if (c.Status == metav1.ConditionTrue) != (tc.reason == string(gwv1.RouteReasonAccepted)) {
				t.Errorf("Accepted status %s does not fit reason %s", c.Status, c.Reason)
			}
			// ResolvedRefs is always present.
			wantCond(t, p.Conditions, string(gwv1.RouteConditionResolvedRefs), metav1.ConditionTrue, string(gwv1.RouteReasonResolvedRefs))
			if string(p.ControllerName) != testController || p.ParentRef.Name != "gw" {
				t.Errorf("parent entry %+v", p)
			}
			if c.ObservedGeneration != 3 {
				t.Errorf("observedGeneration = %d, want 3", c.ObservedGeneration)
			}
		})
	}
}

func TestAttachedRoutesCount(t *testing.T) {
	gw := gateway("infra", "gw", httpL("a", 80, ""), httpL("b", 81, ""), httpsL("tls", 443, "", "missing"))
	r1 := httpRoute("infra", "r1", []gwv1.ParentReference{parent("gw")}, nil, simpleRule())
	// Two parentRefs selecting the same listener count once.
	r2 := httpRoute("infra", "r2", []gwv1.ParentReference{
		{Name: "gw", SectionName: ptr(gwv1.SectionName("a"))},
		{Name: "gw", Port: ptr(int32(80))},
	}, nil, simpleRule())
	// Not accepted: not counted.
	r3 := httpRoute("infra", "r3", []gwv1.ParentReference{{Name: "gw", SectionName: ptr(gwv1.SectionName("b"))}}, nil,
		gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{regexMatch("(")}})
	res := translate(gw, r1, r2, r3, service("infra", "web", 80))
	for name, want := range map[string]int32{"a": 2, "b": 1, "tls": 1} {
		if got := listenerStatus(t, res, "infra", "gw", name).AttachedRoutes; got != want {
			t.Errorf("listener %s attachedRoutes = %d, want %d", name, got, want)
		}
	}
	// The invalid listener counts its route but produces no configuration.
	if irHasListener(irGateway(t, res, "infra", "gw"), "https-443") {
		t.Error("invalid listener in IR")
	}
}

func TestRouteParentsNotOurs(t *testing.T) {
	theirs := gateway("infra", "theirs", httpL("http", 80, ""))
	theirs.Spec.GatewayClassName = "other"
	svcParent := gwv1.ParentReference{Group: ptr(gwv1.Group("")), Kind: ptr(gwv1.Kind("Service")), Name: "web"}
	none := httpRoute("infra", "none", []gwv1.ParentReference{parent("theirs"), parent("missing"), svcParent}, nil, simpleRule())
	mixed := httpRoute("infra", "mixed", []gwv1.ParentReference{parent("missing"), parent("gw")}, nil, simpleRule())
	stale := httpRoute("infra", "stale", []gwv1.ParentReference{parent("missing")}, nil, simpleRule())
	stale.Status.Parents = []gwv1.RouteParentStatus{
		{ParentRef: parent("missing"), ControllerName: testController},
		{ParentRef: parent("missing"), ControllerName: "example.com/other"},
	}
	res := translate(theirs, gateway("infra", "gw", httpL("http", 80, "")), none, mixed, stale, service("infra", "web", 80))
	if hasStatus(res, resource.KindHTTPRoute, "infra", "none") {
		t.Error("a route with no parent of ours got a status")
	}
	st := status(t, res, resource.KindHTTPRoute, "infra", "mixed").Route
	if len(st.Parents) != 1 || st.Parents[0].ParentRef.Name != "gw" {
		t.Errorf("parents = %+v, want only gw", st.Parents)
	}
	// Our stale entries are the status writer's to remove: the translator
	// does not read them.
	if hasStatus(res, resource.KindHTTPRoute, "infra", "stale") {
		t.Error("a route whose status holds stale entries of ours got a status")
	}
}

func TestRouteToListenerSet(t *testing.T) {
	gw := allowListeners(gateway("infra", "gw", httpL("gw-http", 80, "")), gwv1.NamespacesFromSelector,
		&metav1.LabelSelector{MatchLabels: map[string]string{"listeners": "yes"}})
	apps := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps", Labels: map[string]string{"listeners": "yes"}}}
	ls := listenerSet("apps", "ls", 0, "infra", "gw", httpL("web", 8080, ""), httpL("other", 8081, ""))
	notAllowed := listenerSet("ghost", "ls", 0, "infra", "gw", httpL("web", 9000, ""))
	lsRef := func(ns, section string) gwv1.ParentReference {
		p := gwv1.ParentReference{Kind: ptr(gwv1.Kind("ListenerSet")), Name: "ls", Namespace: ptr(gwv1.Namespace(ns))}
		if section != "" {
			p.SectionName = ptr(gwv1.SectionName(section))
		}
		return p
	}
	// Routes in the ListenerSet's namespace are allowed ("Same" is the
	// ListenerSet's namespace).
	r := httpRoute("apps", "r", []gwv1.ParentReference{lsRef("apps", "web"), lsRef("apps", "gw-http"), lsRef("ghost", ""),
		{Name: "gw", Namespace: ptr(gwv1.Namespace("infra")), SectionName: ptr(gwv1.SectionName("web"))}}, nil, simpleRule())
	res := translate(gw, apps, ls, notAllowed, r, service("apps", "web", 80))
	wantCond(t, routeParent(t, res, resource.KindHTTPRoute, "apps", "r", 0).Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
	// A Gateway listener is not a section of the ListenerSet, nor the
	// reverse.
	wantCond(t, routeParent(t, res, resource.KindHTTPRoute, "apps", "r", 1).Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionFalse, string(gwv1.RouteReasonNoMatchingParent))
	wantCond(t, routeParent(t, res, resource.KindHTTPRoute, "apps", "r", 2).Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionFalse, string(gwv1.RouteReasonNoMatchingParent))
	wantCond(t, routeParent(t, res, resource.KindHTTPRoute, "apps", "r", 3).Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionFalse, string(gwv1.RouteReasonNoMatchingParent))
	if got := entryStatus(t, res, "apps", "ls", "web").AttachedRoutes; got != 1 {
		t.Errorf("attachedRoutes of ls/web = %d, want 1", got)
	}
	if got := entryStatus(t, res, "apps", "ls", "other").AttachedRoutes; got != 0 {
		t.Errorf("attachedRoutes of ls/other = %d, want 0", got)
	}
	g := irGateway(t, res, "infra", "gw")
	if v := vhost(t, irListener(t, g, "http-8080"), "*"); len(v.Routes) != 1 {
		t.Errorf("routes on the ListenerSet listener: %v", routeNames(v))
	}
	// A route in the Gateway's namespace is not allowed on the ListenerSet
	// listener (allowedRoutes defaults to the ListenerSet's namespace).
	r2 := httpRoute("infra", "r2", []gwv1.ParentReference{lsRef("apps", "")}, nil, simpleRule())
	res = translate(gw, apps, ls, r2, service("infra", "web", 80))
	wantCond(t, routeParent(t, res, resource.KindHTTPRoute, "infra", "r2", 0).Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionFalse, string(gwv1.RouteReasonNotAllowedByListeners))
}

func grpcRoute(ns, name string, created int, parents []gwv1.ParentReference, hostnames []string, rules ...gwv1.GRPCRouteRule) *gwv1.GRPCRoute {
	r := &gwv1.GRPCRoute{ObjectMeta: meta(ns, name)}
	r.CreationTimestamp = at(created)
	r.Spec.ParentRefs = parents
	for _, h := range hostnames {
		r.Spec.Hostnames = append(r.Spec.Hostnames, gwv1.Hostname(h))
	}
	r.Spec.Rules = rules
	return r
}

func TestHTTPAndGRPCRouteHostnameCollision(t *testing.T) {
	gw := gateway("infra", "gw", httpL("http", 80, ""))
	older := httpRoute("infra", "web", []gwv1.ParentReference{parent("gw")}, []string{"api.example.com"}, simpleRule())
	older.CreationTimestamp = at(1)
	grpcSame := grpcRoute("infra", "grpc-same", 2, []gwv1.ParentReference{parent("gw")}, []string{"*.example.com"},
		gwv1.GRPCRouteRule{BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: backend("web", 80).BackendRef}}})
	grpcOther := grpcRoute("infra", "grpc-other", 0, []gwv1.ParentReference{parent("gw")}, []string{"grpc.example.org"},
		gwv1.GRPCRouteRule{BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: backend("web", 80).BackendRef}}})
	res := translate(gw, older, grpcSame, grpcOther, service("infra", "web", 80))
	wantCond(t, routeParent(t, res, resource.KindHTTPRoute, "infra", "web", 0).Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
	wantCond(t, routeParent(t, res, resource.KindGRPCRoute, "infra", "grpc-same", 0).Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionFalse, string(gwv1.RouteReasonNotAllowedByListeners))
	wantCond(t, routeParent(t, res, resource.KindGRPCRoute, "infra", "grpc-other", 0).Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
	if got := listenerStatus(t, res, "infra", "gw", "http").AttachedRoutes; got != 2 {
		t.Errorf("attachedRoutes = %d, want 2", got)
	}
	l := irListener(t, irGateway(t, res, "infra", "gw"), "http-80")
	if len(l.FilterChains[0].RouteConfig.VirtualHosts) != 2 {
		t.Errorf("virtual hosts: %+v", l.FilterChains[0].RouteConfig.VirtualHosts)
	}
	for _, r := range vhost(t, l, "grpc.example.org").Routes {
		if r.Name[:9] != "grpcroute" {
			t.Errorf("unexpected route %s", r.Name)
		}
	}
}
