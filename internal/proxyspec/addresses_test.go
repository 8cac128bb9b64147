package proxyspec

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestPlanAddresses(t *testing.T) {
	ip := func(v string, rt gwv1.GatewayAddressRoutabilityType) gwv1.GatewaySpecAddress {
		return gwv1.GatewaySpecAddress{Value: v, Routability: rt}
	}
	typed := func(typ gwv1.AddressType, v string) gwv1.GatewaySpecAddress {
		return gwv1.GatewaySpecAddress{Type: &typ, Value: v}
	}
	cases := []struct {
		name    string
		svcType corev1.ServiceType
		addrs   []gwv1.GatewaySpecAddress
		want    AddressPlan // Requests not compared
	}{
		{"none", "", nil, AddressPlan{}},
		{"one static on a LoadBalancer", "", []gwv1.GatewaySpecAddress{ip("10.0.0.1", "")}, AddressPlan{LoadBalancerIP: "10.0.0.1"}},
		{"further statics are external IPs", corev1.ServiceTypeLoadBalancer, []gwv1.GatewaySpecAddress{ip("10.0.0.1", ""), ip("2001:db8::0:1", "")},
			AddressPlan{LoadBalancerIP: "10.0.0.1", ExternalIPs: []string{"2001:db8::1"}}},
		{"statics on a ClusterIP Service are external IPs", corev1.ServiceTypeClusterIP, []gwv1.GatewaySpecAddress{ip("10.0.0.1", "")},
			AddressPlan{ExternalIPs: []string{"10.0.0.1"}}},
		{"empty value asks nothing", "", []gwv1.GatewaySpecAddress{ip("", "")}, AddressPlan{}},
		{"only Cluster: a ClusterIP Service", "", []gwv1.GatewaySpecAddress{ip("", gwv1.GatewayAddressRoutabilityCluster)},
			AddressPlan{ServiceType: corev1.ServiceTypeClusterIP}},
		{"static Cluster is the clusterIP", "", []gwv1.GatewaySpecAddress{ip("10.96.0.5", gwv1.GatewayAddressRoutabilityCluster), ip("", "")},
			AddressPlan{ClusterIP: "10.96.0.5"}},
		{"a second static Cluster is unusable", "", []gwv1.GatewaySpecAddress{ip("10.96.0.5", gwv1.GatewayAddressRoutabilityCluster), ip("10.96.0.6", gwv1.GatewayAddressRoutabilityCluster)},
			AddressPlan{ServiceType: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.5", Unusable: []string{`spec.addresses[1] (IPAddress "10.96.0.6"): a Service has one ClusterIP, already requested (10.96.0.5)`}}},
		{"unknown routability is unsatisfiable", "", []gwv1.GatewaySpecAddress{ip("10.0.0.1", "example.com/Wan")},
			AddressPlan{Unsatisfiable: []string{`spec.addresses[0] (IPAddress "10.0.0.1"): the routability "example.com/Wan" is not supported (only empty, Cluster and testing.x-k8s.io/sentinel)`}}},
		{"hostname asks nothing", "", []gwv1.GatewaySpecAddress{typed(gwv1.HostnameAddressType, "gw.example.com")}, AddressPlan{}},
		{"named address is unsupported", "", []gwv1.GatewaySpecAddress{typed(gwv1.NamedAddressType, "pool"), typed("test/fake-invalid-type", "x")},
			AddressPlan{Unsupported: `spec.addresses[0] (NamedAddress "pool"): the address type "NamedAddress" is not supported (only IPAddress and Hostname)`}},
		{"not an IP", "", []gwv1.GatewaySpecAddress{ip("nope", "")}, AddressPlan{Unusable: []string{`spec.addresses[0] (IPAddress "nope") is not an IP address`}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := PlanAddresses(tc.addrs, tc.svcType)
			if len(got.Requests) != len(tc.addrs) {
				t.Fatalf("requests = %+v", got.Requests)
			}
			got.Requests = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("plan = %+v\nwant   %+v", got, tc.want)
			}
		})
	}
}
