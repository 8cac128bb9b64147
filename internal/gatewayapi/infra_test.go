package gatewayapi

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/resource"
)

func infraSnapshot(dep *appsv1.Deployment, svc *corev1.Service, pc *v1alpha1.ProxyConfig) *resource.Snapshot {
	s := resource.New()
	s.GatewayClasses.Set("portico", &gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "portico"},
		Spec:       gwv1.GatewayClassSpec{ControllerName: DefaultControllerName},
	})
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "edge", Generation: 1},
		Spec: gwv1.GatewaySpec{GatewayClassName: "portico", Listeners: []gwv1.Listener{
			{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType},
		}},
	}
	if pc != nil {
		s.ProxyConfigs.Set(resource.Key{Namespace: "ns", Name: pc.Name}, pc)
		gw.Spec.Infrastructure = &gwv1.GatewayInfrastructure{ParametersRef: &gwv1.LocalParametersReference{
			Group: "portico.dev", Kind: "ProxyConfig", Name: pc.Name,
		}}
	}
	s.Gateways.Set(resource.Key{Namespace: "ns", Name: "edge"}, gw)
	if dep != nil {
		s.Deployments.Set(resource.Key{Namespace: "ns", Name: "portico-edge"}, dep)
	}
	if svc != nil {
		s.Services.Set(resource.Key{Namespace: "ns", Name: "portico-edge"}, svc)
	}
	return s.Build()
}

func gatewayStatusOf(t *testing.T, res *Result) *gwv1.GatewayStatus {
	t.Helper()
	for _, s := range res.Statuses {
		if s.Kind == KindGateway {
			return s.Gateway
		}
	}
	t.Fatal("no Gateway status")
	return nil
}

func TestProgrammedFollowsProvisionedProxies(t *testing.T) {
	available := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "portico-edge"},
		Status: appsv1.DeploymentStatus{AvailableReplicas: 1}}
	unavailable := available.DeepCopy()
	unavailable.Status.AvailableReplicas = 0
	lb := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "portico-edge"},
		Spec:   corev1.ServiceSpec{ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}, {Hostname: "lb.example.com"}}}}}
	noLB := lb.DeepCopy()
	noLB.Status = corev1.ServiceStatus{}
	clusterIP := &v1alpha1.ProxyConfig{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cip"},
		Spec: v1alpha1.ProxyConfigSpec{Service: v1alpha1.ProxyService{AddressFromClusterIP: true}}}

	cases := []struct {
		name       string
		snap       *resource.Snapshot
		infra      bool
		programmed metav1.ConditionStatus
		reason     gwv1.GatewayConditionReason
		addresses  []string
	}{
		{"offline: generated config is programmed", infraSnapshot(nil, nil, nil), false, metav1.ConditionTrue, gwv1.GatewayReasonProgrammed, nil},
		{"no deployment yet", infraSnapshot(nil, nil, nil), true, metav1.ConditionFalse, gwv1.GatewayReasonPending, nil},
		{"no available replica", infraSnapshot(unavailable, lb, nil), true, metav1.ConditionFalse, gwv1.GatewayReasonPending, []string{"203.0.113.7", "lb.example.com"}},
		{"no load-balancer address", infraSnapshot(available, noLB, nil), true, metav1.ConditionFalse, gwv1.GatewayReasonAddressNotAssigned, nil},
		{"ready with load-balancer addresses", infraSnapshot(available, lb, nil), true, metav1.ConditionTrue, gwv1.GatewayReasonProgrammed, []string{"203.0.113.7", "lb.example.com"}},
		{"ClusterIP as the address", infraSnapshot(available, noLB, clusterIP), true, metav1.ConditionTrue, gwv1.GatewayReasonProgrammed, []string{"10.96.0.10"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := Translate(tc.snap, Options{ControllerName: DefaultControllerName, Infrastructure: tc.infra})
			st := gatewayStatusOf(t, res)
			c := apimeta.FindStatusCondition(st.Conditions, string(gwv1.GatewayConditionProgrammed))
			if c == nil || c.Status != tc.programmed || c.Reason != string(tc.reason) {
				t.Fatalf("Programmed = %+v, want %s/%s", c, tc.programmed, tc.reason)
			}
			var got []string
			for _, a := range st.Addresses {
				got = append(got, a.Value)
			}
			if len(got) != len(tc.addresses) {
				t.Fatalf("addresses = %v, want %v", got, tc.addresses)
			}
			for i := range got {
				if got[i] != tc.addresses[i] {
					t.Fatalf("addresses = %v, want %v", got, tc.addresses)
				}
			}
			if len(res.Infra) != 1 || res.Infra[0].Gateway.Name != "edge" || len(res.Infra[0].Ports) != 1 || res.Infra[0].Ports[0] != 80 {
				t.Errorf("infra specs = %+v", res.Infra)
			}
		})
	}
}
