package gatewayapi

import (
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/resource"
)

// TestResolvedRefsMessageDeduplicated: a missing backend used by several
// rules is reported once (golden case 52).
func TestResolvedRefsMessageDeduplicated(t *testing.T) {
	rule := gwv1.HTTPRouteRule{BackendRefs: []gwv1.HTTPBackendRef{backend("ghost", 80)}}
	other := gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/x")}, BackendRefs: []gwv1.HTTPBackendRef{backend("ghost", 80), backend("gone", 80)}}
	r := httpRoute("infra", "r", []gwv1.ParentReference{parent("gw")}, nil, rule, other)
	res := translate(gateway("infra", "gw", httpL("http", 80, "")), r)
	c := cond(t, routeParent(t, res, resource.KindHTTPRoute, "infra", "r", 0).Conditions, string(gwv1.RouteConditionResolvedRefs))
	want := "Service infra/ghost does not exist; Service infra/gone does not exist"
	if c.Message != want {
		t.Errorf("message = %q, want %q", c.Message, want)
	}
	if got := joinUnique([]string{"a", "b", "a", "c", "b"}); got != "a; b; c" {
		t.Errorf("joinUnique = %q", got)
	}
}

// TestCoreGroupKindInMessages: a kind of the core group is printed without
// a leading "/" (golden case 03).
func TestCoreGroupKindInMessages(t *testing.T) {
	s := resource.New()
	s.GatewayClasses.Set("portico", &gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "portico", Generation: 1},
		Spec: gwv1.GatewayClassSpec{ControllerName: testController,
			ParametersRef: &gwv1.ParametersReference{Group: "", Kind: "ConfigMap", Name: "cfg", Namespace: ptr(gwv1.Namespace("infra"))}},
	})
	res := Translate(s.Build(), Options{ControllerName: testController})
	c := cond(t, status(t, res, resource.KindGatewayClass, "", "portico").GatewayClass.Conditions, string(gwv1.GatewayClassConditionStatusAccepted))
	if !strings.Contains(c.Message, `parametersRef ConfigMap "cfg"`) {
		t.Errorf("message = %q", c.Message)
	}
	if got := groupKind("example.com", "Params"); got != "example.com/Params" {
		t.Errorf("groupKind = %q", got)
	}
}

// TestRouteOfRejectedGateway: attachment does not depend on the Gateway's
// status, so the route is Accepted, and its message says it is not served
// (golden case 22).
func TestRouteOfRejectedGateway(t *testing.T) {
	gw := gateway("infra", "gw", httpL("http", 80, ""))
	gw.Spec.Addresses = []gwv1.GatewaySpecAddress{{Type: ptr(gwv1.AddressType("example.com/Custom")), Value: "10.0.0.1"}}
	r := httpRoute("infra", "r", []gwv1.ParentReference{parent("gw")}, nil, simpleRule())
	res := translate(gw, r, service("infra", "web", 80))
	wantCond(t, status(t, res, resource.KindGateway, "infra", "gw").Gateway.Conditions, string(gwv1.GatewayConditionAccepted), metav1.ConditionFalse, string(gwv1.GatewayReasonUnsupportedAddress))
	c := cond(t, routeParent(t, res, resource.KindHTTPRoute, "infra", "r", 0).Conditions, string(gwv1.RouteConditionAccepted))
	if c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "Gateway infra/gw is not accepted") {
		t.Errorf("Accepted = %s %q", c.Status, c.Message)
	}
	if len(res.Gateways) != 0 {
		t.Error("IR built for a rejected Gateway")
	}

	// A route whose only listener has no usable certificate is not served
	// either.
	gw = gateway("infra", "gw", httpsL("https", 443, "", "missing"), httpL("http", 80, ""))
	r = httpRoute("infra", "r", []gwv1.ParentReference{sectionRef("gw", "https")}, nil, simpleRule())
	res = translate(gw, r, service("infra", "web", 80))
	c = cond(t, routeParent(t, res, resource.KindHTTPRoute, "infra", "r", 0).Conditions, string(gwv1.RouteConditionAccepted))
	if c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "none of its listeners is programmed") {
		t.Errorf("Accepted = %s %q", c.Status, c.Message)
	}
}

// TestNilEndpointSlice: a nil entry in the snapshot is skipped.
func TestNilEndpointSlice(t *testing.T) {
	s := resource.New()
	s.EndpointSlices.Set(resource.Key{Namespace: "infra", Name: "nil"}, (*discoveryv1.EndpointSlice)(nil))
	add(s, gateway("infra", "gw", httpL("http", 80, "")))
	add(s, httpRoute("infra", "r", []gwv1.ParentReference{parent("gw")}, nil, simpleRule()))
	add(s, service("infra", "web", 80))
	add(s, slice("infra", "web", "web-1", 8080, "10.0.0.1"))
	s.GatewayClasses.Set("portico", &gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "portico"}, Spec: gwv1.GatewayClassSpec{ControllerName: testController}})
	res := Translate(s.Build(), Options{ControllerName: testController})
	g := irGateway(t, res, "infra", "gw")
	if len(g.Clusters) != 1 || len(g.Clusters[0].Endpoints) != 1 {
		t.Errorf("clusters = %+v", g.Clusters)
	}
}
