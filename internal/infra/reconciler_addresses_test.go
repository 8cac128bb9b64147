package infra

import (
	"context"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/proxyspec"
)

// Against a real API server: spec.addresses on the applied Service. A
// Cluster-only Gateway gets a ClusterIP Service; a static Cluster address
// in the ServiceCIDR is its clusterIP; one the API server refuses
// (outside the ServiceCIDR, or a change of an existing Service's) leaves
// the Service applied with the ClusterIP it has or is given, the
// translator then reporting the request unsatisfied; a static address of
// default routability is spec.loadBalancerIP, removed with the request.
func TestReconcilerServiceAddresses(t *testing.T) {
	a := startAPIReconciler(t)
	ctx := context.Background()
	if err := a.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "addr"}}); err != nil {
		t.Fatal(err)
	}
	service := func(gw *gwv1.Gateway) *corev1.Service {
		t.Helper()
		var s corev1.Service
		if err := a.c.Get(ctx, types.NamespacedName{Namespace: gw.Namespace, Name: proxyspec.Name(gw.Name)}, &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	publish := func(gw *gwv1.Gateway, addrs ...gwv1.GatewaySpecAddress) *corev1.Service {
		t.Helper()
		gw = gw.DeepCopy() // the reconciler keeps what it was given
		gw.Spec.Addresses = addrs
		a.publishAndWait(t, proxyspec.Spec{Gateway: gw, Ports: []int32{80}}, false)
		return service(gw)
	}
	cluster := func(v string) gwv1.GatewaySpecAddress {
		return gwv1.GatewaySpecAddress{Value: v, Routability: gwv1.GatewayAddressRoutabilityCluster}
	}

	gw := gatewayIn("addr", "internal")
	svc := publish(gw, cluster(""))
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.ClusterIP == "" {
		t.Fatalf("Cluster-only Gateway: Service type %s, clusterIP %q", svc.Spec.Type, svc.Spec.ClusterIP)
	}
	given, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		t.Fatal(err)
	}
	// A free address of the ServiceCIDR that holds the one the API server
	// gave (allocation is random: given's neighbours may be outside it),
	// requested on a new Gateway.
	static := freeServiceIP(t, ctx, a.c, given)
	gw2 := gatewayIn("addr", "pinned")
	if svc := publish(gw2, cluster(static.String())); svc.Spec.ClusterIP != static.String() {
		t.Fatalf("static Cluster address %s: clusterIP %q", static, svc.Spec.ClusterIP)
	}
	// A change cannot be applied: the Service keeps its ClusterIP.
	if svc := publish(gw2, cluster(static.Next().String())); svc.Spec.ClusterIP != static.String() {
		t.Fatalf("changed static Cluster address: clusterIP %q, want the kept %s", svc.Spec.ClusterIP, static)
	}
	// Outside the ServiceCIDR: the Service is applied with another.
	gw3 := gatewayIn("addr", "outside")
	if svc := publish(gw3, cluster("192.0.2.5"), gwv1.GatewaySpecAddress{}); svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == "192.0.2.5" ||
		svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Fatalf("Cluster address outside the ServiceCIDR: type %s, clusterIP %q", svc.Spec.Type, svc.Spec.ClusterIP)
	}

	gw4 := gatewayIn("addr", "lb")
	if svc := publish(gw4, gwv1.GatewaySpecAddress{Value: "203.0.113.9"}); svc.Spec.LoadBalancerIP != "203.0.113.9" {
		t.Fatalf("static address: loadBalancerIP %q", svc.Spec.LoadBalancerIP)
	}
	if svc := publish(gw4); svc.Spec.LoadBalancerIP != "" || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		t.Fatalf("request removed: loadBalancerIP %q, type %s", svc.Spec.LoadBalancerIP, svc.Spec.Type)
	}
}

// freeServiceIP returns an address of the ServiceCIDR holding given that
// no Service has: the first from the range's start (past its network
// address and the kubernetes Service's) that is not taken.
func freeServiceIP(t *testing.T, ctx context.Context, c client.Client, given netip.Addr) netip.Addr {
	t.Helper()
	var cidrs networkingv1.ServiceCIDRList
	if err := c.List(ctx, &cidrs); err != nil {
		t.Fatal(err)
	}
	var prefix netip.Prefix
	for _, sc := range cidrs.Items {
		for _, s := range sc.Spec.CIDRs {
			if p, err := netip.ParsePrefix(s); err == nil && p.Contains(given) {
				prefix = p
			}
		}
	}
	if !prefix.IsValid() {
		t.Fatalf("no ServiceCIDR holds %s: %+v", given, cidrs.Items)
	}
	var svcs corev1.ServiceList
	if err := c.List(ctx, &svcs); err != nil {
		t.Fatal(err)
	}
	taken := map[netip.Addr]bool{given: true}
	for _, s := range svcs.Items {
		for _, ip := range s.Spec.ClusterIPs {
			if a, err := netip.ParseAddr(ip); err == nil {
				taken[a] = true
			}
		}
	}
	for a := prefix.Addr().Next().Next(); prefix.Contains(a); a = a.Next() {
		if !taken[a] && prefix.Contains(a.Next()) { // a.Next(): the change below stays in the range too
			return a
		}
	}
	t.Fatalf("no free address in %s", prefix)
	return netip.Addr{}
}
