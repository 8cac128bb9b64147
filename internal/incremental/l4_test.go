package incremental

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/testenv/workload"
)

// An endpoint change behind a TCPRoute or a UDPRoute takes the endpoint
// path, as behind an HTTPRoute: only the cluster's endpoints are computed
// again.
func TestL4EndpointChangeTakesTheEndpointPath(t *testing.T) {
	ptr := func(s string) *string { return &s }
	port := func(p int32) *int32 { return &p }
	udp := corev1.ProtocolUDP
	s := resource.New()
	s.GatewayClasses.Set("portico", &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "portico"}, Spec: gwv1.GatewayClassSpec{ControllerName: workload.ControllerName}})
	s.Gateways.Set(resource.Key{Namespace: "ns", Name: "gw"}, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw"},
		Spec: gwv1.GatewaySpec{GatewayClassName: "portico", Listeners: []gwv1.Listener{
			{Name: "tcp", Port: 9000, Protocol: gwv1.TCPProtocolType}, {Name: "udp", Port: 53, Protocol: gwv1.UDPProtocolType}}}})
	backend := func(name string, p int32) []gwv1.BackendRef {
		pn := gwv1.PortNumber(p)
		return []gwv1.BackendRef{{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: &pn}}}
	}
	s.TCPRoutes.Set(resource.Key{Namespace: "ns", Name: "db"}, &gwv1.TCPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
		Spec: gwv1.TCPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
			Rules: []gwv1.TCPRouteRule{{BackendRefs: backend("db", 5432)}}}})
	s.UDPRoutes.Set(resource.Key{Namespace: "ns", Name: "dns"}, &gwv1.UDPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dns"},
		Spec: gwv1.UDPRouteSpec{CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
			Rules: []gwv1.UDPRouteRule{{BackendRefs: backend("dns", 53)}}}})
	s.Services.Set(resource.Key{Namespace: "ns", Name: "db"}, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "pg", Port: 5432}}}})
	s.Services.Set(resource.Key{Namespace: "ns", Name: "dns"}, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "dns"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: udp}}}})
	slice := func(svc, portName string, p int32, proto *corev1.Protocol, addr string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: svc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			AddressType: discoveryv1.AddressTypeIPv4, Ports: []discoveryv1.EndpointPort{{Name: ptr(portName), Port: port(p), Protocol: proto}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{addr}}}}
	}
	s.EndpointSlices.Set(resource.Key{Namespace: "ns", Name: "db-1"}, slice("db", "pg", 5432, nil, "10.0.0.1"))
	s.EndpointSlices.Set(resource.Key{Namespace: "ns", Name: "dns-1"}, slice("dns", "dns", 5353, &udp, "10.0.0.2"))
	snap := s.Build()

	opts := gatewayapi.Options{ControllerName: workload.ControllerName}
	x := New()
	if _, st := x.Translate(snap, opts); st.Mode != ModeFull {
		t.Fatalf("first translation %s", st.Mode)
	}
	for _, c := range []struct {
		svc, portName, cluster, addr string
		port                         int32
		proto                        *corev1.Protocol
	}{
		{"db", "pg", "ns/db/5432", "10.0.0.9", 5432, nil},
		{"dns", "dns", "ns/dns/53/udp", "10.0.0.8", 5353, &udp},
	} {
		e := snap.Edit()
		if err := e.Set(resource.KindEndpointSlice, resource.Key{Namespace: "ns", Name: c.svc + "-1"}, slice(c.svc, c.portName, c.port, c.proto, c.addr)); err != nil {
			t.Fatal(err)
		}
		snap = e.Snapshot()
		res, st := x.Translate(snap, opts)
		if st.Mode != ModeEndpoints || st.Gateways != 1 {
			t.Errorf("%s: mode %s, %d Gateways; want endpoints, 1", c.svc, st.Mode, st.Gateways)
		}
		found := false
		for _, cl := range res.Gateways[0].Clusters {
			if cl.Name == c.cluster {
				found = len(cl.Endpoints) == 1 && cl.Endpoints[0].Address == c.addr && cl.Endpoints[0].Port == uint32(c.port)
			}
		}
		if !found {
			t.Errorf("%s: cluster %s does not have endpoint %s:%d: %+v", c.svc, c.cluster, c.addr, c.port, res.Gateways[0].Clusters)
		}
		if want := gatewayapi.Translate(snap, opts); !sameResult(res, want) {
			t.Errorf("%s: differs from a full translation: %s", c.svc, resultDiff(res, want))
		}
	}
}
