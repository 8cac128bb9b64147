package proxyspec

// Gateway addresses (spec.addresses) on the provisioned Service. The
// translator (internal/gatewayapi) checks and reports them, the
// reconciler (internal/infra) renders them, and both read this one plan.
//
// The mapping of a request (type, value, routability) to the Service:
//
//   - IPAddress, routability empty, with a value: on a LoadBalancer Service
//     the first such value is spec.loadBalancerIP (what the load-balancer
//     implementation is asked to assign) and any others are
//     spec.externalIPs; on a ClusterIP or NodePort Service every value is
//     an external IP. Satisfied when the Service's load-balancer ingress or
//     spec.externalIPs has the value.
//   - IPAddress, routability empty, without a value ("assign one",
//     GatewayAddressEmpty): nothing is requested; satisfied by an address
//     the Service has (its load-balancer ingress, or its ClusterIPs with
//     service.addressFromClusterIP).
//   - IPAddress, routability Cluster: the Service's ClusterIP. A value is
//     spec.clusterIP (it must be in the cluster's ServiceCIDR, and the API
//     server refuses to change it on an existing Service); only one Cluster
//     value can be honoured. When every request is Cluster, the Service is
//     of type ClusterIP whatever the ProxyConfig says: a cluster-internal
//     Gateway gets no load balancer.
//   - routability testing.x-k8s.io/sentinel (reserved for conformance):
//     like an empty routability, and reported with that value.
//   - Hostname: nothing can be requested of a Service; satisfied when the
//     load-balancer ingress has the hostname (or any hostname, without a
//     value). A hostname value the ingress does not report is unusable.
//   - any other routability: unsatisfiable (GEP-5093), never replaced by
//     another scope.
//   - any other type (NamedAddress, implementation-specific): unsupported,
//     the Gateway is not accepted (UnsupportedAddress).

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// RoutabilitySentinel is the routability value reserved for conformance
// (GEP-5093): supported, carries no guarantee, reported as requested.
const RoutabilitySentinel gwv1.GatewayAddressRoutabilityType = "testing.x-k8s.io/sentinel"

// AddressRequest is one entry of spec.addresses with its defaults applied.
type AddressRequest struct {
	Type        gwv1.AddressType
	Value       string
	Routability gwv1.GatewayAddressRoutabilityType
}

// AddressPlan is what a Gateway's spec.addresses ask of its Service.
type AddressPlan struct {
	Requests []AddressRequest
	// ServiceType is the type the Service must have ("" keeps the
	// ProxyConfig's).
	ServiceType    corev1.ServiceType
	LoadBalancerIP string
	ExternalIPs    []string
	ClusterIP      string
	// Unsupported names the first request of a type Portico does not
	// support ("" when none): the Gateway is not accepted.
	Unsupported string
	// Unusable are the requests that cannot be honoured whatever the
	// cluster does, each with why.
	Unusable []string
	// Unsatisfiable are the requests of a routability Portico cannot
	// provide.
	Unsatisfiable []string
}

// PlanAddresses maps addrs onto a Service of type svcType ("" is the
// default type).
func PlanAddresses(addrs []gwv1.GatewaySpecAddress, svcType corev1.ServiceType) AddressPlan {
	if svcType == "" {
		svcType = DefaultServiceType
	}
	var p AddressPlan
	allCluster := len(addrs) > 0
	for i, a := range addrs {
		r := AddressRequest{Type: gwv1.IPAddressType, Value: a.Value, Routability: a.Routability}
		if a.Type != nil && *a.Type != "" {
			r.Type = *a.Type
		}
		p.Requests = append(p.Requests, r)
		if r.Routability != gwv1.GatewayAddressRoutabilityCluster {
			allCluster = false
		}
		what := fmt.Sprintf("spec.addresses[%d] (%s %q)", i, r.Type, r.Value)
		switch r.Type {
		case gwv1.IPAddressType, gwv1.HostnameAddressType:
		default:
			if p.Unsupported == "" {
				p.Unsupported = fmt.Sprintf("%s: the address type %q is not supported (only IPAddress and Hostname)", what, r.Type)
			}
			continue
		}
		switch r.Routability {
		case gwv1.GatewayAddressRoutabilityDefault, RoutabilitySentinel, gwv1.GatewayAddressRoutabilityCluster:
		default:
			p.Unsatisfiable = append(p.Unsatisfiable, fmt.Sprintf("%s: the routability %q is not supported (only empty, Cluster and %s)", what, r.Routability, RoutabilitySentinel))
			continue
		}
		if r.Type == gwv1.HostnameAddressType || r.Value == "" {
			continue
		}
		ip, err := netip.ParseAddr(r.Value)
		if err != nil {
			p.Unusable = append(p.Unusable, fmt.Sprintf("%s is not an IP address", what))
			continue
		}
		v := ip.String()
		switch {
		case r.Routability == gwv1.GatewayAddressRoutabilityCluster && p.ClusterIP == "":
			p.ClusterIP = v
		case r.Routability == gwv1.GatewayAddressRoutabilityCluster:
			p.Unusable = append(p.Unusable, fmt.Sprintf("%s: a Service has one ClusterIP, already requested (%s)", what, p.ClusterIP))
		case svcType == corev1.ServiceTypeLoadBalancer && p.LoadBalancerIP == "":
			p.LoadBalancerIP = v
		default:
			p.ExternalIPs = append(p.ExternalIPs, v)
		}
	}
	if allCluster {
		p.ServiceType = corev1.ServiceTypeClusterIP
		// A LoadBalancerIP cannot have been planned: every request is Cluster.
	}
	return p
}
