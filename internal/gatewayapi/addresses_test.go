package gatewayapi

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/proxyspec"
	"github.com/portico-dev/portico/internal/resource"
)

// addrSnapshot is infraSnapshot's Gateway with spec.addresses, an
// available Deployment and svc.
func addrSnapshot(svc *corev1.Service, addrs ...gwv1.GatewaySpecAddress) *resource.Snapshot {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "portico-edge", OwnerReferences: ownedBy("edge", "uid-edge")},
		Status: appsv1.DeploymentStatus{AvailableReplicas: 1}}
	b := resource.New()
	b.GatewayClasses.Set("portico", &gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "portico"},
		Spec:       gwv1.GatewayClassSpec{ControllerName: DefaultControllerName},
	})
	b.Gateways.Set(resource.Key{Namespace: "ns", Name: "edge"}, &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "edge", Generation: 1, UID: "uid-edge"},
		Spec: gwv1.GatewaySpec{GatewayClassName: "portico", Addresses: addrs, Listeners: []gwv1.Listener{
			{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType},
		}},
	})
	b.Deployments.Set(resource.Key{Namespace: "ns", Name: "portico-edge"}, dep)
	if svc != nil {
		b.Services.Set(resource.Key{Namespace: "ns", Name: "portico-edge"}, svc)
	}
	return b.Build()
}

func ipAddr(v string, rt gwv1.GatewayAddressRoutabilityType) gwv1.GatewaySpecAddress {
	return gwv1.GatewaySpecAddress{Type: ptr(gwv1.IPAddressType), Value: v, Routability: rt}
}

func proxyService(mut func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "portico-edge", OwnerReferences: ownedBy("edge", "uid-edge")},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}}}
	mut(svc)
	return svc
}

func ingress(ips ...string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
	}
}

// Each request is matched with what the Service has; the conditions name
// the reason the specification gives.
func TestGatewayAddressesOnTheService(t *testing.T) {
	refused := func(s *corev1.Service) {
		s.Spec.LoadBalancerIP = "192.0.2.250"
		s.Status.Conditions = []metav1.Condition{{Type: ServiceConditionIPAMRequestSatisfied, Status: metav1.ConditionFalse, Reason: "no_pool", Message: "192.0.2.250 is not in the pool"}}
	}
	cases := []struct {
		name       string
		svc        *corev1.Service
		addrs      []gwv1.GatewaySpecAddress
		programmed string // reason
		assigned   string // AddressesAssigned reason, "" when absent
		want       []string
	}{
		{"static address assigned", proxyService(ingress("10.245.0.254")), []gwv1.GatewaySpecAddress{ipAddr("10.245.0.254", "")},
			"Programmed", "AddressesAssigned", []string{"IPAddress 10.245.0.254 "}},
		{"static address refused by the IPAM", proxyService(refused), []gwv1.GatewaySpecAddress{ipAddr("192.0.2.250", "")},
			"AddressNotUsable", "NotAssigned", nil},
		{"another address assigned than requested", proxyService(func(s *corev1.Service) { s.Spec.LoadBalancerIP = "10.245.0.254"; ingress("10.245.0.1")(s) }),
			[]gwv1.GatewaySpecAddress{ipAddr("10.245.0.254", "")}, "AddressNotUsable", "NotAssigned", nil},
		{"static address not assigned yet", proxyService(func(*corev1.Service) {}), []gwv1.GatewaySpecAddress{ipAddr("10.245.0.254", "")},
			"AddressNotAssigned", "NotAssigned", nil},
		{"empty value takes the assigned address", proxyService(ingress("10.245.0.1")), []gwv1.GatewaySpecAddress{ipAddr("", "")},
			"Programmed", "AddressesAssigned", []string{"IPAddress 10.245.0.1 "}},
		{"empty value, nothing assigned yet", proxyService(func(*corev1.Service) {}), []gwv1.GatewaySpecAddress{ipAddr("", "")},
			"AddressNotAssigned", "NotAssigned", nil},
		{"an external IP beside the load-balancer IP", proxyService(func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"198.51.100.1"}; ingress("10.245.0.254")(s) }),
			[]gwv1.GatewaySpecAddress{ipAddr("10.245.0.254", ""), ipAddr("198.51.100.1", "")}, "Programmed", "AddressesAssigned",
			[]string{"IPAddress 10.245.0.254 ", "IPAddress 198.51.100.1 "}},
		{"Cluster is the ClusterIP", proxyService(func(*corev1.Service) {}), []gwv1.GatewaySpecAddress{ipAddr("", gwv1.GatewayAddressRoutabilityCluster)},
			"Programmed", "AddressesAssigned", []string{"IPAddress 10.96.0.10 Cluster"}},
		{"default and Cluster", proxyService(ingress("10.245.0.1")), []gwv1.GatewaySpecAddress{ipAddr("", ""), ipAddr("", gwv1.GatewayAddressRoutabilityCluster)},
			"Programmed", "AddressesAssigned", []string{"IPAddress 10.245.0.1 ", "IPAddress 10.96.0.10 Cluster"}},
		{"static Cluster value not the ClusterIP", proxyService(ingress("10.245.0.1")),
			[]gwv1.GatewaySpecAddress{ipAddr("", ""), ipAddr("10.96.0.99", gwv1.GatewayAddressRoutabilityCluster)},
			"Programmed", "PartiallyAssigned", []string{"IPAddress 10.245.0.1 "}},
		{"sentinel reported as requested", proxyService(ingress("10.245.0.1")), []gwv1.GatewaySpecAddress{ipAddr("", proxyspec.RoutabilitySentinel)},
			"Programmed", "AddressesAssigned", []string{"IPAddress 10.245.0.1 testing.x-k8s.io/sentinel"}},
		{"unknown routability is never substituted", proxyService(ingress("10.245.0.1")), []gwv1.GatewaySpecAddress{ipAddr("", "example.com/CorpWan")},
			"AddressNotAssigned", "NotAssigned", nil},
		{"hostname the load balancer reports", proxyService(func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "lb.example.com"}}
		}), []gwv1.GatewaySpecAddress{{Type: ptr(gwv1.HostnameAddressType)}}, "Programmed", "AddressesAssigned", []string{"Hostname lb.example.com "}},
		{"hostname value a Service cannot request", proxyService(ingress("10.245.0.1")),
			[]gwv1.GatewaySpecAddress{{Type: ptr(gwv1.HostnameAddressType), Value: "gw.example.com"}}, "AddressNotUsable", "NotAssigned", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := Translate(addrSnapshot(tc.svc, tc.addrs...), Options{ControllerName: DefaultControllerName, Infrastructure: true})
			st := gatewayStatusOf(t, res)
			acc := apimeta.FindStatusCondition(st.Conditions, string(gwv1.GatewayConditionAccepted))
			if acc == nil || acc.Status != metav1.ConditionTrue {
				t.Fatalf("Accepted = %+v", acc)
			}
			c := apimeta.FindStatusCondition(st.Conditions, string(gwv1.GatewayConditionProgrammed))
			if c == nil || c.Reason != tc.programmed || (c.Status == metav1.ConditionTrue) != (tc.programmed == "Programmed") {
				t.Fatalf("Programmed = %+v, want reason %s", c, tc.programmed)
			}
			a := apimeta.FindStatusCondition(st.Conditions, string(gwv1.GatewayConditionAddressesAssigned))
			if a == nil || a.Reason != tc.assigned || (a.Status == metav1.ConditionTrue) != (tc.assigned == "AddressesAssigned") {
				t.Fatalf("AddressesAssigned = %+v, want reason %s", a, tc.assigned)
			}
			var got []string
			for _, a := range st.Addresses {
				if a.Type == nil || a.Routability == nil {
					t.Fatalf("address %+v lacks its type or routability", a)
				}
				got = append(got, string(*a.Type)+" "+a.Value+" "+string(*a.Routability))
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("addresses = %q, want %q", got, tc.want)
			}
		})
	}
}

// An unsupported type makes the Gateway not accepted, naming the entry.
func TestGatewayAddressUnsupportedType(t *testing.T) {
	res := Translate(addrSnapshot(proxyService(ingress("10.245.0.1")), gwv1.GatewaySpecAddress{Type: ptr(gwv1.NamedAddressType), Value: "pool"}),
		Options{ControllerName: DefaultControllerName, Infrastructure: true})
	st := gatewayStatusOf(t, res)
	c := apimeta.FindStatusCondition(st.Conditions, string(gwv1.GatewayConditionAccepted))
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.GatewayReasonUnsupportedAddress) || !strings.Contains(c.Message, "spec.addresses[0]") {
		t.Fatalf("Accepted = %+v", c)
	}
	if len(st.Addresses) != 0 {
		t.Fatalf("addresses %v for a Gateway not accepted", st.Addresses)
	}
}
