package gatewayapi

// Gateway addresses (spec.addresses).
//
// With provisioned proxies (Options.Infrastructure) an address is a
// request on the Gateway's Service, mapped by proxyspec.PlanAddresses
// (the mapping is documented there and in internal/infra). The Gateway's
// status.addresses are the Service's addresses that satisfy a request,
// one per satisfied request, each with the request's type and
// routability (GEP-5093: an empty routability is reported explicitly as
// empty, Cluster as Cluster); without requests, the Service's addresses
// as before, of empty routability.
//
// Conditions, from the specification's reasons:
//   - a request of an unsupported type: Accepted=False UnsupportedAddress;
//   - a request the Service cannot honour (a hostname value, a second
//     static ClusterIP, a value that is not an IP), or one the cluster
//     refused (the load balancer reports the requested IP unusable, or
//     assigned another): Programmed=False AddressNotUsable, naming it;
//   - no request satisfied (yet), or only requests of an unsupported
//     routability: Programmed=False AddressNotAssigned;
//   - some but not all satisfied: the Gateway is programmed with those
//     (AddressesAssigned=False PartiallyAssigned names the others);
//     all satisfied: AddressesAssigned=True.
//
// The load balancer's refusal is read from the Service alone: a condition
// of status.conditions that a load-balancer IPAM writes (Cilium's
// cilium.io/IPAMRequestSatisfied, which the test cluster's data plane
// writes too) set to False, or an ingress IP other than the requested
// spec.loadBalancerIP. So every replica computes the same status from the
// snapshot.

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/proxyspec"
)

// ServiceConditionIPAMRequestSatisfied is the Service condition a
// load-balancer IPAM sets to False when it cannot assign the requested
// address (Cilium LB IPAM's type; the test data plane writes it alike).
const ServiceConditionIPAMRequestSatisfied = "cilium.io/IPAMRequestSatisfied"

// addressPlan is the plan of g's spec.addresses on its Service.
func addressPlan(g *gatewayState) proxyspec.AddressPlan {
	var typ corev1.ServiceType
	if g.proxy != nil {
		typ = g.proxy.Service.Type
	}
	return proxyspec.PlanAddresses(g.obj.Spec.Addresses, typ)
}

// addressOutcome is how a Gateway's requests fare on its Service.
type addressOutcome struct {
	addresses []gwv1.GatewayStatusAddress
	// problem is the Programmed=False reason and message, or nil.
	problem *problem
	// unsatisfied names the requests not satisfied (for AddressesAssigned).
	unsatisfied []string
}

// matchAddresses matches plan's requests with what svc has.
func matchAddresses(plan proxyspec.AddressPlan, svc *corev1.Service, fromClusterIP bool) addressOutcome {
	var out addressOutcome
	if svc == nil {
		return out
	}
	var ingressIPs, ingressHosts []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			ingressIPs = append(ingressIPs, canonIP(in.IP))
		}
		if in.Hostname != "" {
			ingressHosts = append(ingressHosts, in.Hostname)
		}
	}
	var clusterIPs []string
	for _, ip := range svc.Spec.ClusterIPs {
		if ip != "" && ip != corev1.ClusterIPNone {
			clusterIPs = append(clusterIPs, canonIP(ip))
		}
	}
	if len(clusterIPs) == 0 && svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		clusterIPs = []string{canonIP(svc.Spec.ClusterIP)}
	}
	var externalIPs []string
	for _, ip := range svc.Spec.ExternalIPs {
		externalIPs = append(externalIPs, canonIP(ip))
	}
	// defaults are what a request without a value can be satisfied with.
	defaults := ingressIPs
	if fromClusterIP {
		defaults = clusterIPs
	}
	used := map[string]bool{}
	take := func(from []string) string {
		for _, v := range from {
			if !used[v] {
				return v
			}
		}
		return ""
	}
	var unusable []string
	unusable = append(unusable, plan.Unusable...)
	if c := serviceCondition(svc, ServiceConditionIPAMRequestSatisfied); c != nil && c.Status == "False" {
		unusable = append(unusable, fmt.Sprintf("the load balancer refuses the Service's requested address: %s (%s)", c.Message, c.Reason))
	} else if plan.LoadBalancerIP != "" && len(ingressIPs) > 0 && !slices.Contains(ingressIPs, plan.LoadBalancerIP) {
		unusable = append(unusable, fmt.Sprintf("the load balancer assigned %s instead of the requested %s", strings.Join(ingressIPs, ", "), plan.LoadBalancerIP))
	}
	for i, r := range plan.Requests {
		if r.Type != gwv1.IPAddressType && r.Type != gwv1.HostnameAddressType {
			continue
		}
		var got string
		switch {
		case r.Routability != gwv1.GatewayAddressRoutabilityDefault && r.Routability != gwv1.GatewayAddressRoutabilityCluster && r.Routability != proxyspec.RoutabilitySentinel:
		case r.Type == gwv1.HostnameAddressType && r.Value != "":
			if slices.Contains(ingressHosts, r.Value) && !used[r.Value] {
				got = r.Value
			} else {
				unusable = append(unusable, fmt.Sprintf("spec.addresses[%d]: the hostname %q cannot be requested of a Service, and its load balancer does not report it", i, r.Value))
			}
		case r.Type == gwv1.HostnameAddressType:
			got = take(ingressHosts)
		case r.Routability == gwv1.GatewayAddressRoutabilityCluster && r.Value != "":
			if v := canonIP(r.Value); slices.Contains(clusterIPs, v) && !used[v] {
				got = v
			}
		case r.Routability == gwv1.GatewayAddressRoutabilityCluster:
			got = take(clusterIPs)
		case r.Value != "":
			if v := canonIP(r.Value); (slices.Contains(ingressIPs, v) || slices.Contains(externalIPs, v)) && !used[v] {
				got = v
			}
		default:
			got = take(defaults)
		}
		if got == "" {
			out.unsatisfied = append(out.unsatisfied, fmt.Sprintf("spec.addresses[%d] (%s %q)", i, r.Type, r.Value))
			continue
		}
		used[got] = true
		typ, rt := r.Type, r.Routability
		if rt == gwv1.GatewayAddressRoutabilityDefault && slices.Contains(clusterIPs, got) {
			// An address of the default scope that is a ClusterIP has
			// the Cluster guarantee, and says so (GEP-5093).
			rt = gwv1.GatewayAddressRoutabilityCluster
		}
		out.addresses = append(out.addresses, gwv1.GatewayStatusAddress{Type: &typ, Value: got, Routability: &rt})
	}
	switch {
	case len(unusable) > 0:
		out.problem = &problem{string(gwv1.GatewayReasonAddressNotUsable), strings.Join(unusable, "; ")}
	case len(out.addresses) == 0 && len(plan.Unsatisfiable) > 0:
		out.problem = &problem{string(gwv1.GatewayReasonAddressNotAssigned), strings.Join(plan.Unsatisfiable, "; ")}
	case len(out.addresses) == 0:
		out.problem = &problem{string(gwv1.GatewayReasonAddressNotAssigned), fmt.Sprintf("the Service %s/%s has none of the requested addresses yet: %s", svc.Namespace, svc.Name, strings.Join(out.unsatisfied, ", "))}
	}
	out.unsatisfied = append(out.unsatisfied, plan.Unsatisfiable...)
	return out
}

// serviceCondition is svc's condition of type t, or nil.
func serviceCondition(svc *corev1.Service, t string) *struct{ Status, Reason, Message string } {
	for _, c := range svc.Status.Conditions {
		if c.Type == t {
			return &struct{ Status, Reason, Message string }{string(c.Status), c.Reason, c.Message}
		}
	}
	return nil
}

// canonIP is the canonical form of an IP (as the status reports it), or
// s unchanged when it is not one.
func canonIP(s string) string {
	if ip, err := netip.ParseAddr(s); err == nil {
		return ip.String()
	}
	return s
}

// addressesAssigned sets the AddressesAssigned condition (GEP-5093) of a
// Gateway with provisioned proxies: without requests, True once the
// Service has an address (omitted before); with requests, True when all
// are satisfied, else False, PartiallyAssigned or NotAssigned, naming the
// requests not satisfied.
func addressesAssigned(c *conditions, g *gatewayState, got []gwv1.GatewayStatusAddress, unsatisfied []string) {
	const typ = string(gwv1.GatewayConditionAddressesAssigned)
	switch {
	case len(g.obj.Spec.Addresses) == 0 && len(got) > 0:
		c.set(typ, true, string(gwv1.GatewayReasonAddressesAssigned), "the Service's addresses are the Gateway's")
	case len(g.obj.Spec.Addresses) == 0:
	case len(unsatisfied) == 0 && len(got) > 0:
		c.set(typ, true, string(gwv1.GatewayReasonAddressesAssigned), "every requested address is assigned")
	case len(got) > 0:
		c.set(typ, false, string(gwv1.GatewayReasonAddressesPartiallyAssigned), "not assigned: "+strings.Join(unsatisfied, "; "))
	default:
		msg := "no requested address is assigned"
		if len(unsatisfied) > 0 {
			msg += ": " + strings.Join(unsatisfied, "; ")
		}
		c.set(typ, false, string(gwv1.GatewayReasonAddressesNotAssigned), msg)
	}
}

// Standalone (no Options.Infrastructure): there is no Service, and the
// addresses of spec.addresses are where the listeners bind. A static
// IPAddress of empty (or sentinel) routability is a bind address, reported
// in status.addresses as requested; without a value there is nothing to
// assign from (AddressNotAssigned); a Hostname cannot be bound
// (AddressNotUsable); Cluster has no meaning without a cluster
// (unsatisfiable). Whether the host has the address is Envoy's to find:
// a listener that cannot bind is refused by Envoy, not by the translator,
// which reads no interfaces. With no usable bind address, the listeners
// bind to all addresses.

// standaloneAddresses matches plan's requests in standalone mode.
func standaloneAddresses(plan proxyspec.AddressPlan) addressOutcome {
	var out addressOutcome
	unusable := append([]string(nil), plan.Unusable...)
	var unassigned []string
	seen := map[string]bool{}
	for i, r := range plan.Requests {
		what := fmt.Sprintf("spec.addresses[%d] (%s %q)", i, r.Type, r.Value)
		switch {
		case r.Type != gwv1.IPAddressType && r.Type != gwv1.HostnameAddressType:
			continue
		case r.Routability != gwv1.GatewayAddressRoutabilityDefault && r.Routability != proxyspec.RoutabilitySentinel:
			out.unsatisfied = append(out.unsatisfied, what+": only empty routability (or the sentinel) without a cluster")
			continue
		case r.Type == gwv1.HostnameAddressType:
			unusable = append(unusable, what+": a listener cannot bind to a hostname")
			out.unsatisfied = append(out.unsatisfied, what)
			continue
		case r.Value == "":
			unassigned = append(unassigned, what+": standalone Portico has no addresses to assign; name one")
			out.unsatisfied = append(out.unsatisfied, what)
			continue
		}
		ip, err := netip.ParseAddr(r.Value)
		if err != nil {
			out.unsatisfied = append(out.unsatisfied, what)
			continue // in plan.Unusable already
		}
		v := ip.String()
		if seen[v] {
			continue
		}
		seen[v] = true
		typ, rt := r.Type, r.Routability
		out.addresses = append(out.addresses, gwv1.GatewayStatusAddress{Type: &typ, Value: v, Routability: &rt})
	}
	switch {
	case len(unusable) > 0:
		out.problem = &problem{string(gwv1.GatewayReasonAddressNotUsable), strings.Join(unusable, "; ")}
	case len(unassigned) > 0 && len(out.addresses) == 0:
		out.problem = &problem{string(gwv1.GatewayReasonAddressNotAssigned), strings.Join(unassigned, "; ")}
	case len(out.addresses) == 0 && len(plan.Unsatisfiable)+len(out.unsatisfied) > 0:
		out.problem = &problem{string(gwv1.GatewayReasonAddressNotAssigned), "no requested address can be bound: " + strings.Join(append(out.unsatisfied, plan.Unsatisfiable...), "; ")}
	}
	out.unsatisfied = append(out.unsatisfied, plan.Unsatisfiable...)
	return out
}

// bindAddresses are the IR's bind addresses of g: in standalone mode its
// usable static IP addresses, none otherwise (proxies in a cluster listen
// on all the Pod's addresses; the Service carries the Gateway's).
func (t *translator) bindAddresses(g *gatewayState) []string {
	if t.opts.Infrastructure || len(g.obj.Spec.Addresses) == 0 {
		return nil
	}
	var out []string
	for _, a := range standaloneAddresses(addressPlan(g)).addresses {
		out = append(out, a.Value)
	}
	return out
}
