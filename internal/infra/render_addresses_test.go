package infra

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/proxyspec"
)

// spec.addresses become fields of the Service (proxyspec.PlanAddresses).
func TestRenderServiceAddresses(t *testing.T) {
	ip := func(v string, rt gwv1.GatewayAddressRoutabilityType) gwv1.GatewaySpecAddress {
		return gwv1.GatewaySpecAddress{Value: v, Routability: rt}
	}
	cases := []struct {
		name      string
		svcType   corev1.ServiceType
		addrs     []gwv1.GatewaySpecAddress
		wantType  corev1.ServiceType
		lbIP      string
		external  []string
		clusterIP string
	}{
		{"no addresses", "", nil, corev1.ServiceTypeLoadBalancer, "", nil, ""},
		{"empty value", "", []gwv1.GatewaySpecAddress{ip("", "")}, corev1.ServiceTypeLoadBalancer, "", nil, ""},
		{"static", "", []gwv1.GatewaySpecAddress{ip("10.245.0.254", "")}, corev1.ServiceTypeLoadBalancer, "10.245.0.254", nil, ""},
		{"two statics", "", []gwv1.GatewaySpecAddress{ip("10.245.0.254", ""), ip("198.51.100.1", "")}, corev1.ServiceTypeLoadBalancer, "10.245.0.254", []string{"198.51.100.1"}, ""},
		{"static on ClusterIP", corev1.ServiceTypeClusterIP, []gwv1.GatewaySpecAddress{ip("198.51.100.1", "")}, corev1.ServiceTypeClusterIP, "", []string{"198.51.100.1"}, ""},
		{"Cluster only", "", []gwv1.GatewaySpecAddress{ip("10.96.0.5", gwv1.GatewayAddressRoutabilityCluster)}, corev1.ServiceTypeClusterIP, "", nil, "10.96.0.5"},
		{"Cluster and default", "", []gwv1.GatewaySpecAddress{ip("", gwv1.GatewayAddressRoutabilityCluster), ip("", "")}, corev1.ServiceTypeLoadBalancer, "", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gw := testGateway()
			gw.Spec.Addresses = tc.addrs
			objs, err := RenderSpec(proxyspec.Spec{Gateway: gw, Proxy: v1alpha1.ProxyConfigSpec{Service: v1alpha1.ProxyService{Type: tc.svcType}}, Ports: []int32{80}}, params)
			if err != nil {
				t.Fatal(err)
			}
			s := objs.Service.Spec
			str := func(p *string) string {
				if p == nil {
					return ""
				}
				return *p
			}
			if *s.Type != tc.wantType || str(s.LoadBalancerIP) != tc.lbIP || !slices.Equal(s.ExternalIPs, tc.external) || str(s.ClusterIP) != tc.clusterIP {
				t.Fatalf("Service spec: type %s, loadBalancerIP %q, externalIPs %v, clusterIP %q; want %s, %q, %v, %q",
					*s.Type, str(s.LoadBalancerIP), s.ExternalIPs, str(s.ClusterIP), tc.wantType, tc.lbIP, tc.external, tc.clusterIP)
			}
		})
	}
}
