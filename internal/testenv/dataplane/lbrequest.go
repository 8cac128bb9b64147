package dataplane

// Requested load-balancer addresses: a Service of type LoadBalancer whose
// spec.loadBalancerIP names an address gets that address when it is in
// the pool (first and last excluded) and no other Service holds or
// requests it (the oldest request wins); otherwise it gets no address, its
// load-balancer ingress is emptied, and its status.conditions say why
// with ConditionIPAMRequestSatisfied=False — the condition Cilium's LB
// IPAM writes, reason no_pool or already_allocated, so that a controller
// can tell an unusable address from one not assigned yet. The condition
// turns True once the Service has its address. Addresses of the pool that
// a Service requests are never handed out to others.

import (
	"context"
	"fmt"
	"net/netip"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ConditionIPAMRequestSatisfied is the Service condition that reports
// whether a requested load-balancer address could be assigned.
const ConditionIPAMRequestSatisfied = "cilium.io/IPAMRequestSatisfied"

// UsableAddress and UnusableAddress are addresses for tests of static
// Gateway addresses: the pool's last assignable address, which the data
// plane assigns only on request, and one of TEST-NET-1 (RFC 5737), which
// it never assigns.
func (d *DataPlane) UsableAddress() netip.Addr {
	p := d.opts.LoadBalancers.Masked()
	last := p.Addr()
	for ip := p.Addr(); p.Contains(ip); ip = ip.Next() {
		last = ip
	}
	return last.Prev()
}

// UnusableAddress: see UsableAddress.
func (d *DataPlane) UnusableAddress() netip.Addr { return netip.MustParseAddr("192.0.2.250") }

// requestedIPs maps each address that LoadBalancer Services request to
// the oldest such Service.
func requestedIPs(svcs []*corev1.Service) map[netip.Addr]types.UID {
	sorted := append([]*corev1.Service(nil), svcs...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	out := map[netip.Addr]types.UID{}
	for _, svc := range sorted {
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerClass != nil || svc.DeletionTimestamp != nil {
			continue
		}
		if ip, err := netip.ParseAddr(svc.Spec.LoadBalancerIP); err == nil {
			if _, ok := out[ip]; !ok {
				out[ip] = svc.UID
			}
		}
	}
	return out
}

// refusal is why a requested address is not assigned.
type refusal struct{ reason, message string }

// requested is the address svc requests (invalid when none), or why it
// cannot have it.
func (d *DataPlane) requested(svc *corev1.Service, requested map[netip.Addr]types.UID) (netip.Addr, *refusal) {
	if svc.Spec.LoadBalancerIP == "" {
		return netip.Addr{}, nil
	}
	ip, err := netip.ParseAddr(svc.Spec.LoadBalancerIP)
	p := d.opts.LoadBalancers.Masked()
	switch {
	case err != nil:
		return netip.Addr{}, &refusal{"invalid", fmt.Sprintf("spec.loadBalancerIP %q is not an IP address", svc.Spec.LoadBalancerIP)}
	case !p.Contains(ip) || ip == p.Addr() || !p.Contains(ip.Next()):
		return netip.Addr{}, &refusal{"no_pool", fmt.Sprintf("%s is not in the load-balancer pool %s", ip, p)}
	case requested[ip] != svc.UID:
		return netip.Addr{}, &refusal{"already_allocated", fmt.Sprintf("%s is requested by another Service", ip)}
	}
	for uid, a := range d.lbs {
		if uid != svc.UID && a.ip == ip {
			return netip.Addr{}, &refusal{"already_allocated", fmt.Sprintf("%s is assigned to Service %s", ip, a.key)}
		}
	}
	return ip, nil
}

// refuse empties svc's load-balancer ingress and sets its
// ConditionIPAMRequestSatisfied to False with r, unless they are already.
func (d *DataPlane) refuse(ctx context.Context, svc *corev1.Service, r *refusal) {
	c := meta.FindStatusCondition(svc.Status.Conditions, ConditionIPAMRequestSatisfied)
	if len(svc.Status.LoadBalancer.Ingress) == 0 && c != nil && c.Status == metav1.ConditionFalse && c.Reason == r.reason && c.Message == r.message {
		return
	}
	upd := svc.DeepCopy()
	upd.Status.LoadBalancer.Ingress = nil
	meta.SetStatusCondition(&upd.Status.Conditions, metav1.Condition{
		Type: ConditionIPAMRequestSatisfied, Status: metav1.ConditionFalse, Reason: r.reason, Message: r.message, ObservedGeneration: svc.Generation,
	})
	d.opts.Logf("dataplane: Service %s/%s: requested address refused: %s", svc.Namespace, svc.Name, r.message)
	if _, err := d.cs.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		d.opts.Logf("dataplane: status of Service %s/%s: %v", svc.Namespace, svc.Name, err)
		d.wake()
	}
}
