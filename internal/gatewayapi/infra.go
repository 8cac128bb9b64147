package gatewayapi

import (
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/proxyspec"
	"github.com/portico-dev/portico/internal/resource"
)

// Portico's parameters are ProxyConfigs (group portico.dev). A GatewayClass
// references one with a namespace; a Gateway with
// spec.infrastructure.parametersRef references one in its own namespace and
// overrides its class's.

func isProxyConfigRef(group, kind string) bool {
	return group == v1alpha1.GroupVersion.Group && kind == v1alpha1.Kind
}

// classParams resolves a GatewayClass parametersRef.
func (t *translator) classParams(ref *gwv1.ParametersReference) (*v1alpha1.ProxyConfigSpec, *problem) {
	what := fmt.Sprintf("parametersRef %s %q", groupKind(string(ref.Group), string(ref.Kind)), ref.Name)
	if !isProxyConfigRef(string(ref.Group), string(ref.Kind)) {
		return nil, &problem{string(gwv1.GatewayClassReasonInvalidParameters),
			what + " is not supported: Portico takes a portico.dev ProxyConfig"}
	}
	if ref.Namespace == nil || *ref.Namespace == "" {
		return nil, &problem{string(gwv1.GatewayClassReasonInvalidParameters), what + " needs a namespace: ProxyConfig is namespaced"}
	}
	pc := t.in.ProxyConfig(resource.Key{Namespace: string(*ref.Namespace), Name: ref.Name})
	if pc == nil {
		return nil, &problem{string(gwv1.GatewayClassReasonInvalidParameters),
			fmt.Sprintf("%s: ProxyConfig %s/%s does not exist", what, *ref.Namespace, ref.Name)}
	}
	if why := checkProxyContent(&pc.Spec); why != "" {
		// The spec all the same: the class's Gateways keep the
		// administrator's proxies, not the defaults (infra_limits.go).
		return &pc.Spec, &problem{string(gwv1.GatewayClassReasonInvalidParameters),
			fmt.Sprintf("%s: ProxyConfig %s/%s: %s", what, *ref.Namespace, ref.Name, why)}
	}
	return &pc.Spec, nil
}

// gatewayParams resolves spec.infrastructure.parametersRef of a Gateway
// and returns the effective ProxyConfig spec: its class's with the fields
// the Gateway's ProxyConfig sets, within the class's bounds (see
// infra_limits.go). The class's ProxyConfig was read by the class.
func (t *translator) gatewayParams(gw *gwv1.Gateway) (*v1alpha1.ProxyConfigSpec, *problem) {
	ref := gw.Spec.Infrastructure.ParametersRef
	what := fmt.Sprintf("infrastructure.parametersRef %s %q", groupKind(string(ref.Group), string(ref.Kind)), ref.Name)
	if !isProxyConfigRef(string(ref.Group), string(ref.Kind)) {
		return nil, &problem{string(gwv1.GatewayReasonInvalidParameters), what + " is not supported: Portico takes a portico.dev ProxyConfig"}
	}
	pc := t.in.ProxyConfig(resource.Key{Namespace: gw.Namespace, Name: ref.Name})
	if pc == nil {
		return nil, &problem{string(gwv1.GatewayReasonInvalidParameters),
			fmt.Sprintf("%s: ProxyConfig %s/%s does not exist", what, gw.Namespace, ref.Name)}
	}
	var class *v1alpha1.ProxyConfigSpec
	if cs := t.classes[string(gw.Spec.GatewayClassName)]; cs != nil {
		class = cs.proxy
	}
	eff, why := boundedProxy(class, &pc.Spec)
	if why != "" {
		return nil, &problem{string(gwv1.GatewayReasonInvalidParameters),
			fmt.Sprintf("%s: ProxyConfig %s/%s: %s", what, gw.Namespace, ref.Name, why)}
	}
	return eff, nil
}

// proxyReadiness tells, when Portico provisions proxies (Options.
// Infrastructure), whether a Gateway's proxies can take traffic: its Envoy
// Deployment has an available replica and its Service has an address. The
// Deployment and Service are ordinary inputs of the snapshot.
//
// A Deployment or Service of the Gateway's provisioned name that is not
// the Gateway's (proxyspec.CheckOwner: another Gateway's, whose long name was
// shortened to the same name, or anyone else's) makes it Programmed=False
// with reason Invalid, naming the holder: the leader does not write such
// objects, and the holder's readiness and addresses are not the Gateway's.
// Of the reasons the specification lists for Programmed=False, Invalid
// fits best: the Gateway's name is unusable with this implementation
// until someone acts (Pending would promise that waiting helps, and
// NoResources is about capacity). The decision reads only the snapshot,
// so every replica computes the same status.
func (t *translator) proxyReadiness(g *gatewayState) ([]gwv1.GatewayStatusAddress, []string, *problem) {
	if len(g.obj.Name) > proxyspec.MaxGatewayNameLength {
		return nil, nil, &problem{string(gwv1.GatewayReasonInvalid), fmt.Sprintf(
			"Portico cannot provision proxies for a Gateway name of more than %d characters (the limit of the label %s): use a shorter name",
			proxyspec.MaxGatewayNameLength, proxyspec.LabelGatewayAPIName)}
	}
	name := proxyspec.Name(g.obj.Name)
	k := resource.Key{Namespace: g.obj.Namespace, Name: name}
	svc := t.in.Service(k)
	dep := t.in.Deployment(k)
	if dep != nil {
		if err := proxyspec.CheckOwner(dep, "Envoy Deployment", g.obj); err != nil {
			return nil, nil, &problem{string(gwv1.GatewayReasonInvalid), err.Error()}
		}
	}
	if svc != nil {
		if err := proxyspec.CheckOwner(svc, "Service", g.obj); err != nil {
			return nil, nil, &problem{string(gwv1.GatewayReasonInvalid), err.Error()}
		}
	}
	fromClusterIP := g.proxy != nil && g.proxy.Service.AddressFromClusterIP
	var addrs []gwv1.GatewayStatusAddress
	var unsatisfied []string
	var addrProblem *problem
	if len(g.obj.Spec.Addresses) > 0 {
		// Requested addresses (addresses.go).
		o := matchAddresses(addressPlan(g), svc, fromClusterIP)
		addrs, unsatisfied, addrProblem = o.addresses, o.unsatisfied, o.problem
	} else {
		addrs = serviceAddresses(svc, fromClusterIP)
	}
	switch {
	case addrProblem != nil && addrProblem.reason == string(gwv1.GatewayReasonAddressNotUsable):
		return addrs, unsatisfied, addrProblem
	case dep == nil:
		return addrs, unsatisfied, &problem{string(gwv1.GatewayReasonPending), fmt.Sprintf("waiting for the Envoy Deployment %s/%s to be created", k.Namespace, name)}
	case dep.Status.AvailableReplicas < 1:
		return addrs, unsatisfied, &problem{string(gwv1.GatewayReasonPending), fmt.Sprintf("waiting for an available replica of the Envoy Deployment %s/%s", k.Namespace, name)}
	case addrProblem != nil:
		return nil, unsatisfied, addrProblem
	case len(addrs) == 0:
		return nil, unsatisfied, &problem{string(gwv1.GatewayReasonAddressNotAssigned), fmt.Sprintf("the Service %s/%s has no address yet", k.Namespace, name)}
	}
	return addrs, unsatisfied, nil
}

// serviceAddresses are a proxy Service's load-balancer ingress addresses,
// or its ClusterIPs when clusterIP is set.
func serviceAddresses(svc *corev1.Service, clusterIP bool) []gwv1.GatewayStatusAddress {
	if svc == nil {
		return nil
	}
	var out []gwv1.GatewayStatusAddress
	add := func(v string) {
		if v == "" || v == corev1.ClusterIPNone {
			return
		}
		typ := gwv1.HostnameAddressType
		if net.ParseIP(v) != nil {
			typ = gwv1.IPAddressType
		}
		for _, a := range out {
			if a.Value == v {
				return
			}
		}
		// Routability is reported on every address (GEP-5093): Cluster
		// for a ClusterIP, else explicitly empty.
		rt := gwv1.GatewayAddressRoutabilityDefault
		if clusterIP {
			rt = gwv1.GatewayAddressRoutabilityCluster
		}
		out = append(out, gwv1.GatewayStatusAddress{Type: &typ, Value: v, Routability: &rt})
	}
	if clusterIP {
		for _, ip := range svc.Spec.ClusterIPs {
			add(ip)
		}
		if len(svc.Spec.ClusterIPs) == 0 {
			add(svc.Spec.ClusterIP)
		}
		return out
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		add(in.IP)
		add(in.Hostname)
	}
	return out
}

// infraSpecs lists, for every Gateway of ours, what its proxies need: the
// effective ProxyConfig and the ports of its programmed listeners.
func (t *translator) infraSpecs(gws []*ir.Gateway) []proxyspec.Spec {
	ports, udp := map[resource.Key][]uint32{}, map[resource.Key][]uint32{}
	for _, g := range gws {
		k := resource.Key{Namespace: g.Namespace, Name: g.Name}
		for _, l := range g.Listeners {
			if l.Protocol == ir.ProtocolUDP {
				udp[k] = append(udp[k], l.Port)
			} else {
				ports[k] = append(ports[k], l.Port)
			}
		}
	}
	var out []proxyspec.Spec
	for _, g := range t.gwOrder {
		s := proxyspec.Spec{Gateway: g.obj, Ports: proxyspec.Ports(ports[g.key()]), UDPPorts: proxyspec.Ports(udp[g.key()])}
		if g.proxy != nil {
			s.Proxy = *g.proxy.DeepCopy()
		}
		out = append(out, s)
	}
	return out
}
