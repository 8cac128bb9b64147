package gatewayapi

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "edge", Generation: 1, UID: "uid-edge"},
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
		if s.Kind == resource.KindGateway {
			return s.Gateway
		}
	}
	t.Fatal("no Gateway status")
	return nil
}

// ownedBy is the controller owner reference Portico gives provisioned
// objects.
func ownedBy(name, uid string) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway", Name: name, UID: types.UID(uid), Controller: ptr(true)}}
}

func TestProgrammedFollowsProvisionedProxies(t *testing.T) {
	available := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "portico-edge", OwnerReferences: ownedBy("edge", "uid-edge")},
		Status: appsv1.DeploymentStatus{AvailableReplicas: 1}}
	unavailable := available.DeepCopy()
	unavailable.Status.AvailableReplicas = 0
	lb := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "portico-edge", OwnerReferences: ownedBy("edge", "uid-edge")},
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

// Objects of the Gateway's provisioned name that are not the Gateway's:
// Programmed=False, reason Invalid, naming the holder, and none of the
// holder's addresses. Objects of a predecessor of the same name (another
// UID) are the Gateway's.
func TestProgrammedFalseWhenProvisionedNameIsTaken(t *testing.T) {
	dep := func(owners []metav1.OwnerReference) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "portico-edge", OwnerReferences: owners},
			Status: appsv1.DeploymentStatus{AvailableReplicas: 1}}
	}
	svc := func(owners []metav1.OwnerReference) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "portico-edge", OwnerReferences: owners},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "203.0.113.7"}}}}}
	}
	other := ownedBy("edge-other-long-name", "uid-other")
	foreignController := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "uid-rs", Controller: ptr(true)}}
	cases := []struct {
		name     string
		snap     *resource.Snapshot
		reason   gwv1.GatewayConditionReason
		contains string
	}{
		{"deployment of another Gateway", infraSnapshot(dep(other), svc(ownedBy("edge", "uid-edge")), nil), gwv1.GatewayReasonInvalid, "belongs to Gateway ns/edge-other-long-name"},
		{"service of another Gateway", infraSnapshot(dep(ownedBy("edge", "uid-edge")), svc(other), nil), gwv1.GatewayReasonInvalid, "Service ns/portico-edge belongs to Gateway ns/edge-other-long-name"},
		{"service without controller", infraSnapshot(nil, svc(nil), nil), gwv1.GatewayReasonInvalid, "has no controller owner reference"},
		{"deployment of another controller", infraSnapshot(dep(foreignController), nil, nil), gwv1.GatewayReasonInvalid, "controlled by ReplicaSet ns/rs"},
		{"objects of a deleted Gateway of the same name", infraSnapshot(dep(ownedBy("edge", "uid-old")), svc(ownedBy("edge", "uid-old")), nil), gwv1.GatewayReasonProgrammed, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := Translate(tc.snap, Options{ControllerName: DefaultControllerName, Infrastructure: true})
			st := gatewayStatusOf(t, res)
			c := apimeta.FindStatusCondition(st.Conditions, string(gwv1.GatewayConditionProgrammed))
			if c == nil || c.Reason != string(tc.reason) || !strings.Contains(c.Message, tc.contains) {
				t.Fatalf("Programmed = %+v, want reason %s with %q", c, tc.reason, tc.contains)
			}
			if tc.reason == gwv1.GatewayReasonInvalid {
				if c.Status != metav1.ConditionFalse || len(st.Addresses) != 0 {
					t.Errorf("Programmed %s with addresses %v, want False and none", c.Status, st.Addresses)
				}
				if a := apimeta.FindStatusCondition(st.Conditions, string(gwv1.GatewayConditionAccepted)); a == nil || a.Status != metav1.ConditionTrue {
					t.Errorf("Accepted = %+v, want True", a)
				}
			}
		})
	}
}

// A Gateway name too long for a label value gets Programmed=False Invalid
// instead of provisioning that fails forever.
func TestProgrammedFalseForGatewayNameTooLongForLabels(t *testing.T) {
	s := resource.New()
	s.GatewayClasses.Set("portico", &gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "portico"},
		Spec:       gwv1.GatewayClassSpec{ControllerName: DefaultControllerName},
	})
	name := strings.Repeat("g", 64)
	s.Gateways.Set(resource.Key{Namespace: "ns", Name: name}, &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Generation: 1},
		Spec: gwv1.GatewaySpec{GatewayClassName: "portico", Listeners: []gwv1.Listener{
			{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType},
		}},
	})
	res := Translate(s.Build(), Options{ControllerName: DefaultControllerName, Infrastructure: true})
	c := apimeta.FindStatusCondition(gatewayStatusOf(t, res).Conditions, string(gwv1.GatewayConditionProgrammed))
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.GatewayReasonInvalid) || !strings.Contains(c.Message, "63 characters") {
		t.Fatalf("Programmed = %+v, want False/Invalid about the name length", c)
	}
}
