package dataplane

// Load balancers: every Service of type LoadBalancer (without a
// loadBalancerClass) gets an address from the pool for as long as it
// exists. The address is on the host's side of the bridge, and each TCP
// port of the Service is a forwarder there (testenv.ForwardWithin) that
// sends each new connection to the next of the Service's Ready Pods, at
// the port the Service's targetPort names — what kube-proxy and a cloud
// load balancer do together. A connection stays with its Pod until one
// side closes it, so a Pod that stops being Ready (or starts terminating)
// gets no new connections and keeps the ones it has, as conntrack keeps
// established flows. Each UDP port is a forwarder of datagrams by client
// session at the same address and port number (udp.go). The Service's
// status.loadBalancer.ingress names the address from the first time it
// has a Ready Pod behind it and a port forwarded, so an address in status
// is one that answers. A Service can request an address of the pool with
// spec.loadBalancerIP (lbrequest.go).

import (
	"context"
	"net/netip"
	"sort"
	"strconv"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/testenv"
)

type lbAlloc struct {
	key      string // ns/name
	ip       netip.Addr
	onBridge bool
	ports    map[int32]*lbPort // TCP, by Service port
	udp      map[int32]*udpForwarder
}

// lbPort is one forwarded port: the forwarder reads targets, which the
// loop replaces after each sync.
type lbPort struct {
	f       *testenv.Forwarder
	targets atomic.Pointer[[]string]
	next    atomic.Uint64
}

// pick is the targets in round-robin order: each connection starts at the
// next one and falls back to the others.
func (p *lbPort) pick() []string {
	ts := *p.targets.Load()
	if len(ts) == 0 {
		return nil
	}
	i := int(p.next.Add(1)-1) % len(ts)
	return append(append([]string(nil), ts[i:]...), ts[:i]...)
}

// syncLoadBalancers runs with d.mu held, after the Pods' sync.
func (d *DataPlane) syncLoadBalancers(ctx context.Context) {
	svcs, err := d.svcs.List(labels.Everything())
	if err != nil {
		d.opts.Logf("dataplane: listing Services: %v", err)
		return
	}
	seen := map[types.UID]bool{}
	requested := requestedIPs(svcs)
	for _, svc := range svcs {
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.LoadBalancerClass != nil || svc.DeletionTimestamp != nil {
			continue
		}
		seen[svc.UID] = true
		a := d.lbs[svc.UID]
		want, refused := d.requested(svc, requested)
		if a != nil && (refused != nil || want.IsValid() && a.ip != want) {
			// The request changed: the old address goes.
			d.release(a)
			delete(d.lbs, svc.UID)
			a = nil
		}
		if refused != nil {
			d.refuse(ctx, svc, refused)
			continue
		}
		if a == nil {
			ip, ok := want, want.IsValid()
			if !ok {
				ip, ok = d.allocate(requested)
			}
			if !ok {
				d.opts.Logf("dataplane: no load-balancer address left in %s for Service %s/%s", d.opts.LoadBalancers, svc.Namespace, svc.Name)
				continue
			}
			a = &lbAlloc{key: svc.Namespace + "/" + svc.Name, ip: ip, ports: map[int32]*lbPort{}}
			d.lbs[svc.UID] = a
		}
		if !a.onBridge {
			if err := command("ip", "addr", "add", a.ip.String()+"/32", "dev", d.bridge.Name); err != nil {
				d.opts.Logf("dataplane: load balancer %s (%s): %v", a.key, a.ip, err)
				continue
			}
			a.onBridge = true
		}
		backends := d.backends(svc)
		d.forward(a, svc, backends)
		d.forwardUDP(a, svc, backends)
		if len(backends) > 0 && len(a.ports)+len(a.udp) > 0 {
			d.writeStatus(ctx, svc, a.ip)
		}
	}
	for uid, a := range d.lbs {
		if !seen[uid] {
			d.release(a)
			delete(d.lbs, uid)
		}
	}
}

// forward keeps one forwarder per TCP port of svc, each sending to the
// backends at the port its targetPort names.
func (d *DataPlane) forward(a *lbAlloc, svc *corev1.Service, backends []*podRun) {
	want := map[int32]bool{}
	for _, sp := range svc.Spec.Ports {
		if sp.Protocol != "" && sp.Protocol != corev1.ProtocolTCP {
			continue
		}
		want[sp.Port] = true
		var targets []string
		for _, b := range backends {
			if port, ok := targetPort(b.pod, sp); ok {
				targets = append(targets, netip.AddrPortFrom(netip.MustParseAddr(b.pod.Status.PodIP), uint16(port)).String())
			}
		}
		p := a.ports[sp.Port]
		if p == nil {
			p = &lbPort{}
			p.targets.Store(&targets)
			f, err := testenv.ForwardWithin(netip.AddrPortFrom(a.ip, uint16(sp.Port)), p.pick, d.opts.PodCIDR)
			if err != nil {
				d.opts.Logf("dataplane: load balancer %s: port %d: %v", a.key, sp.Port, err)
				continue
			}
			p.f = f
			a.ports[sp.Port] = p
			d.opts.Logf("dataplane: load balancer %s: %s:%d → %v", a.key, a.ip, sp.Port, targets)
			continue
		}
		p.targets.Store(&targets)
	}
	for port, p := range a.ports {
		if !want[port] {
			_ = p.f.Close()
			delete(a.ports, port)
		}
	}
}

// targetPort is the Pod's port for Service port sp: a number, a named
// container port of the Pod of sp's protocol, or the Service port itself.
func targetPort(p *corev1.Pod, sp corev1.ServicePort) (int32, bool) {
	proto := func(p corev1.Protocol) corev1.Protocol {
		if p == "" {
			return corev1.ProtocolTCP
		}
		return p
	}
	switch {
	case sp.TargetPort.IntValue() > 0:
		return int32(sp.TargetPort.IntValue()), true
	case sp.TargetPort.StrVal != "":
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.Name == sp.TargetPort.StrVal && proto(cp.Protocol) == proto(sp.Protocol) {
					return cp.ContainerPort, true
				}
			}
		}
		if n, err := strconv.Atoi(sp.TargetPort.StrVal); err == nil && n > 0 {
			return int32(n), true
		}
		return 0, false
	default:
		return sp.Port, true
	}
}

// release closes a's forwarders and takes its address off the bridge.
func (d *DataPlane) release(a *lbAlloc) {
	for port, p := range a.ports {
		_ = p.f.Close()
		delete(a.ports, port)
	}
	for port, f := range a.udp {
		_ = f.Close()
		delete(a.udp, port)
	}
	if a.onBridge {
		if err := command("ip", "addr", "del", a.ip.String()+"/32", "dev", d.bridge.Name); err != nil {
			d.opts.Logf("dataplane: load balancer %s (%s): %v", a.key, a.ip, err)
		}
		a.onBridge = false
	}
}

// allocate is the lowest free address of the pool (its first and last
// addresses excluded) that no Service requests.
func (d *DataPlane) allocate(requested map[netip.Addr]types.UID) (netip.Addr, bool) {
	used := map[netip.Addr]bool{}
	for _, a := range d.lbs {
		used[a.ip] = true
	}
	p := d.opts.LoadBalancers.Masked()
	for ip := p.Addr().Next(); p.Contains(ip.Next()); ip = ip.Next() {
		if _, req := requested[ip]; !used[ip] && !req {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

// backends are the Pods svc selects that are Ready and not terminating,
// by name.
func (d *DataPlane) backends(svc *corev1.Service) []*podRun {
	if len(svc.Spec.Selector) == 0 {
		return nil
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	var out []*podRun
	for _, r := range d.running {
		if r.netns != nil && r.ready.Load() && !r.terminating.Load() && r.pod.Namespace == svc.Namespace && sel.Matches(labels.Set(r.pod.Labels)) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pod.Name < out[j].pod.Name })
	return out
}

// writeStatus sets svc's status.loadBalancer.ingress to ip unless it is
// already.
func (d *DataPlane) writeStatus(ctx context.Context, svc *corev1.Service, ip netip.Addr) {
	in := svc.Status.LoadBalancer.Ingress
	c := meta.FindStatusCondition(svc.Status.Conditions, ConditionIPAMRequestSatisfied)
	if len(in) == 1 && in[0].IP == ip.String() && in[0].Hostname == "" && (c == nil || c.Status == metav1.ConditionTrue) {
		return
	}
	vip := corev1.LoadBalancerIPModeVIP
	upd := svc.DeepCopy()
	upd.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip.String(), IPMode: &vip}}
	if c := meta.FindStatusCondition(upd.Status.Conditions, ConditionIPAMRequestSatisfied); c != nil && c.Status != metav1.ConditionTrue {
		meta.SetStatusCondition(&upd.Status.Conditions, metav1.Condition{
			Type: ConditionIPAMRequestSatisfied, Status: metav1.ConditionTrue, Reason: "satisfied",
			Message: "the requested address is assigned", ObservedGeneration: svc.Generation,
		})
	}
	if _, err := d.cs.CoreV1().Services(svc.Namespace).UpdateStatus(ctx, upd, metav1.UpdateOptions{}); err != nil {
		d.opts.Logf("dataplane: status of Service %s/%s: %v", svc.Namespace, svc.Name, err)
		d.wake() // the informer brings the current version; retry
	}
}
