package dataplane

// Load balancers: every Service of type LoadBalancer (without a
// loadBalancerClass) gets an address from the pool for as long as it
// exists. The address is on the eth0 of one Ready Pod the Service selects
// and moves when that Pod is no longer Ready; the Service's
// status.loadBalancer.ingress names it from the first time it reaches a
// Pod, so an address in status is one that answers.

import (
	"context"
	"net/netip"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

type lbAlloc struct {
	key    string // ns/name
	ip     netip.Addr
	holder *podRun // nil: on no Pod
}

// syncLoadBalancers runs with d.mu held, after the Pods' sync.
func (d *DataPlane) syncLoadBalancers(ctx context.Context) {
	svcs, err := d.svcs.List(labels.Everything())
	if err != nil {
		d.opts.Logf("dataplane: listing Services: %v", err)
		return
	}
	seen := map[types.UID]bool{}
	for _, svc := range svcs {
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerClass != nil || svc.DeletionTimestamp != nil {
			continue
		}
		seen[svc.UID] = true
		a := d.lbs[svc.UID]
		if a == nil {
			ip, ok := d.allocate()
			if !ok {
				d.opts.Logf("dataplane: no load-balancer address left in %s for Service %s/%s", d.opts.LoadBalancers, svc.Namespace, svc.Name)
				continue
			}
			a = &lbAlloc{key: svc.Namespace + "/" + svc.Name, ip: ip}
			d.lbs[svc.UID] = a
		}
		d.place(a, d.backends(svc))
		if a.holder != nil {
			d.writeStatus(ctx, svc, a.ip)
		}
	}
	for uid, a := range d.lbs {
		if !seen[uid] {
			d.place(a, nil)
			delete(d.lbs, uid)
		}
	}
}

// allocate is the lowest free address of the pool (its first and last
// addresses excluded).
func (d *DataPlane) allocate() (netip.Addr, bool) {
	used := map[netip.Addr]bool{}
	for _, a := range d.lbs {
		used[a.ip] = true
	}
	p := d.opts.LoadBalancers.Masked()
	for ip := p.Addr().Next(); p.Contains(ip.Next()); ip = ip.Next() {
		if !used[ip] {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// backends are the Ready Pods svc selects, by name.
func (d *DataPlane) backends(svc *corev1.Service) []*podRun {
	if len(svc.Spec.Selector) == 0 {
		return nil
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	var out []*podRun
	for _, r := range d.running {
		if r.netns != nil && r.ready.Load() && r.pod.Namespace == svc.Namespace && sel.Matches(labels.Set(r.pod.Labels)) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pod.Name < out[j].pod.Name })
	return out
}

// place keeps a on its holder if that is still a backend, else moves it
// to the first backend (or to none).
func (d *DataPlane) place(a *lbAlloc, backends []*podRun) {
	if a.holder != nil && slices.Contains(backends, a.holder) {
		return
	}
	if old := a.holder; old != nil {
		a.holder = nil
		if old.netns != nil {
			if err := old.netns.RemoveAddress(a.ip); err != nil {
				d.opts.Logf("dataplane: load balancer %s (%s): %v", a.key, a.ip, err)
			}
		}
	}
	// The host's neighbour entry would still name the old holder's MAC.
	_ = command("ip", "neigh", "flush", "to", a.ip.String(), "dev", d.bridge.Name)
	for _, b := range backends {
		if err := b.netns.AddAddress(a.ip); err != nil {
			d.opts.Logf("dataplane: load balancer %s (%s) on Pod %s: %v", a.key, a.ip, b.key(), err)
			continue
		}
		a.holder = b
		d.opts.Logf("dataplane: load balancer %s: %s → Pod %s (%s)", a.key, a.ip, b.key(), b.pod.Status.PodIP)
		return
	}
}

// writeStatus sets svc's status.loadBalancer.ingress to ip unless it is
// already.
func (d *DataPlane) writeStatus(ctx context.Context, svc *corev1.Service, ip netip.Addr) {
	in := svc.Status.LoadBalancer.Ingress
	if len(in) == 1 && in[0].IP == ip.String() && in[0].Hostname == "" {
		return
	}
	vip := corev1.LoadBalancerIPModeVIP
	upd := svc.DeepCopy()
	upd.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip.String(), IPMode: &vip}}
	if _, err := d.cs.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		d.opts.Logf("dataplane: status of Service %s/%s: %v", svc.Namespace, svc.Name, err)
		d.wake() // the informer brings the current version; retry
	}
}
