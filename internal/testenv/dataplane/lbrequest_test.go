package dataplane

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Requested load-balancer addresses: granted from the pool, refused with
// a reason outside it or when taken, and never handed to another Service.
func TestRequestedLoadBalancerIPs(t *testing.T) {
	d := &DataPlane{opts: Options{LoadBalancers: DefaultLoadBalancers}, lbs: map[types.UID]*lbAlloc{}}
	t0 := metav1.NewTime(time.Unix(1000, 0))
	svc := func(uid, name, lbIP string, created metav1.Time) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Namespace: "ns", Name: name, CreationTimestamp: created},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerIP: lbIP}}
	}
	older := svc("a", "a", "10.245.0.254", t0)
	newer := svc("b", "b", "10.245.0.254", metav1.NewTime(t0.Add(time.Second)))
	outside := svc("c", "c", d.UnusableAddress().String(), t0)
	edge := svc("e", "e", "10.245.0.255", t0)
	none := svc("n", "n", "", t0)
	req := requestedIPs([]*corev1.Service{newer, outside, older, edge, none})

	if got := d.UsableAddress(); got != netip.MustParseAddr("10.245.0.254") {
		t.Errorf("UsableAddress = %s", got)
	}
	if ip, r := d.requested(older, req); r != nil || ip != netip.MustParseAddr("10.245.0.254") {
		t.Errorf("oldest request: %s, %+v", ip, r)
	}
	if _, r := d.requested(newer, req); r == nil || r.reason != "already_allocated" {
		t.Errorf("newer request of the same address: %+v", r)
	}
	for _, s := range []*corev1.Service{outside, edge} {
		if _, r := d.requested(s, req); r == nil || r.reason != "no_pool" {
			t.Errorf("%s outside the assignable pool: %+v", s.Spec.LoadBalancerIP, r)
		}
	}
	if ip, r := d.requested(none, req); r != nil || ip.IsValid() {
		t.Errorf("no request: %s, %+v", ip, r)
	}
	// A dynamically assigned address is not granted to a later request.
	d.lbs["x"] = &lbAlloc{key: "ns/x", ip: netip.MustParseAddr("10.245.0.1")}
	taken := svc("t", "t", "10.245.0.1", t0)
	if _, r := d.requested(taken, requestedIPs([]*corev1.Service{taken})); r == nil || r.reason != "already_allocated" {
		t.Errorf("request of an assigned address: %+v", r)
	}
	// Dynamic allocation skips what is assigned and what is requested.
	if ip, ok := d.allocate(map[netip.Addr]types.UID{netip.MustParseAddr("10.245.0.2"): "a"}); !ok || ip != netip.MustParseAddr("10.245.0.3") {
		t.Errorf("allocate = %s, %v; want 10.245.0.3", ip, ok)
	}
}
