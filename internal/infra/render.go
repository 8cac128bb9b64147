package infra

import (
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	autoscalingv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/proxyspec"
)

// Params are the controller-wide settings of rendered proxies.
type Params struct {
	// XDSAddress is host:port of the controller's xDS Service.
	XDSAddress string
	// XDSServerName is the TLS server name (SNI and SAN) of the xDS server.
	XDSServerName string
	// AgentImage is the image of the proxies' shutdown-manager sidecar
	// (`portico proxy-agent`): the controller's own image.
	AgentImage string
}

// Paths inside the Envoy container.
const (
	bootstrapDir  = "/etc/envoy"
	bootstrapFile = "envoy.json"
	xdsCertDir    = "/etc/portico/xds"
	// envoyUID is the user and group Envoy runs as (distroless nonroot),
	// and the Pod's fsGroup.
	envoyUID = 65532
)

// Objects are the apply configurations of one Gateway's proxies, in the
// order they are applied.
type Objects struct {
	ServiceAccount      *corev1ac.ServiceAccountApplyConfiguration
	ConfigMap           *corev1ac.ConfigMapApplyConfiguration
	Deployment          *appsv1ac.DeploymentApplyConfiguration
	Service             *corev1ac.ServiceApplyConfiguration
	PodDisruptionBudget *policyv1ac.PodDisruptionBudgetApplyConfiguration
	// HorizontalPodAutoscaler is nil unless the ProxyConfig sets
	// autoscaling.
	HorizontalPodAutoscaler *autoscalingv2ac.HorizontalPodAutoscalerApplyConfiguration
}

// RenderSpec builds the objects of s.Gateway with the effective
// ProxyConfig spec s.Proxy, exposing s.Ports over TCP and s.UDPPorts over
// UDP. It is pure: equal inputs give equal objects, whatever the order of
// the ports, and it does not modify s. A spec the translator refuses (see
// the package doc) is an error, never objects the API server would
// refuse.
func RenderSpec(s proxyspec.Spec, p Params) (*Objects, error) {
	gw, pc := s.Gateway, s.Proxy
	name := proxyspec.Name(gw.Name)
	ns := gw.Namespace
	labels := proxyspec.Labels(ns, gw.Name)
	meta := objectMeta(gw)

	files, err := BootstrapFiles(ns, gw.Name, pc, p)
	if err != nil {
		return nil, err
	}
	ports := exposedPorts(s.Ports, s.UDPPorts)

	sa := corev1ac.ServiceAccount(name, ns).
		WithLabels(meta.labels).WithAnnotations(meta.annotations).WithOwnerReferences(meta.owner).
		WithAutomountServiceAccountToken(false)

	cm := corev1ac.ConfigMap(name, ns).
		WithLabels(meta.labels).WithAnnotations(meta.annotations).WithOwnerReferences(meta.owner).
		WithData(files)

	tmpl, err := podTemplate(gw, pc, ports, p)
	if err != nil {
		return nil, err
	}
	spec := appsv1ac.DeploymentSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
		// A rollout adds a Pod before removing one: never fewer ready
		// proxies than wanted.
		WithStrategy(appsv1ac.DeploymentStrategy().WithType(appsv1.RollingUpdateDeploymentStrategyType).
			WithRollingUpdate(appsv1ac.RollingUpdateDeployment().
				WithMaxUnavailable(intstr.FromInt32(0)).WithMaxSurge(intstr.FromString("25%")))).
		WithTemplate(tmpl)
	if pc.Autoscaling == nil {
		// With autoscaling the field is not in Portico's configuration:
		// its owner is the HorizontalPodAutoscaler (see replicas.go).
		replicas := proxyspec.DefaultReplicas
		if pc.Replicas != nil {
			replicas = *pc.Replicas
		}
		spec.WithReplicas(replicas)
	}
	dep := appsv1ac.Deployment(name, ns).
		WithLabels(meta.labels).WithAnnotations(meta.annotations).WithOwnerReferences(meta.owner).
		WithSpec(spec)

	svcType := pc.Service.Type
	if svcType == "" {
		svcType = proxyspec.DefaultServiceType
	}
	svcAnn := map[string]string{}
	for k, v := range meta.annotations {
		svcAnn[k] = v
	}
	for k, v := range pc.Service.Annotations {
		svcAnn[k] = v
	}
	// spec.addresses (see proxyspec.PlanAddresses for the mapping).
	plan := proxyspec.PlanAddresses(gw.Spec.Addresses, svcType)
	if plan.ServiceType != "" {
		svcType = plan.ServiceType
	}
	svcSpec := corev1ac.ServiceSpec().WithType(svcType).WithSelector(labels)
	if plan.LoadBalancerIP != "" {
		svcSpec.WithLoadBalancerIP(plan.LoadBalancerIP)
	}
	if len(plan.ExternalIPs) > 0 {
		svcSpec.WithExternalIPs(plan.ExternalIPs...)
	}
	if plan.ClusterIP != "" {
		svcSpec.WithClusterIP(plan.ClusterIP)
	}
	svc := corev1ac.Service(name, ns).
		WithLabels(meta.labels).WithAnnotations(svcAnn).WithOwnerReferences(meta.owner).
		WithSpec(svcSpec)
	for _, lp := range ports {
		svc.Spec.WithPorts(corev1ac.ServicePort().WithName(lp.name()).WithPort(lp.port).
			WithTargetPort(intstr.FromInt32(lp.port)).WithProtocol(lp.protocol))
	}
	if len(ports) == 0 {
		// A Service needs a port; a Gateway without listeners still gets
		// a Service whose address can be reported.
		svc.Spec.WithPorts(corev1ac.ServicePort().WithName("none").WithPort(1).WithTargetPort(intstr.FromInt32(1)))
	}

	pdb, err := disruptionBudget(name, ns, meta, labels, pc)
	if err != nil {
		return nil, err
	}
	hpa, err := autoscaler(name, ns, meta, pc)
	if err != nil {
		return nil, err
	}
	return &Objects{ServiceAccount: sa, ConfigMap: cm, Deployment: dep, Service: svc, PodDisruptionBudget: pdb, HorizontalPodAutoscaler: hpa}, nil
}

// listenerPort is one port a Gateway's proxies expose: a listener port
// over one protocol.
type listenerPort struct {
	port     int32
	protocol corev1.Protocol
}

// name names the port in the Service and the Envoy container: unique
// (a number may be both TCP and UDP), a DNS label and an IANA service
// name (at most 15 characters, a letter in it). TCP ports keep the
// "port-<n>" they had before UDP listeners existed, so that no Service
// port of an upgraded Gateway is renamed.
func (lp listenerPort) name() string {
	if lp.protocol == corev1.ProtocolUDP {
		return "udp-" + strconv.Itoa(int(lp.port))
	}
	return "port-" + strconv.Itoa(int(lp.port))
}

// exposedPorts are the TCP and UDP ports in the order they are rendered:
// by number, TCP before UDP for a number that is both. The callers' slices
// are not modified.
func exposedPorts(tcp, udp []int32) []listenerPort {
	out := make([]listenerPort, 0, len(tcp)+len(udp))
	for _, p := range tcp {
		out = append(out, listenerPort{port: p, protocol: corev1.ProtocolTCP})
	}
	for _, p := range udp {
		out = append(out, listenerPort{port: p, protocol: corev1.ProtocolUDP})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].port != out[j].port {
			return out[i].port < out[j].port
		}
		return out[i].protocol == corev1.ProtocolTCP && out[j].protocol != corev1.ProtocolTCP
	})
	return out
}

type renderedMeta struct {
	labels      map[string]string
	annotations map[string]string
	owner       *metav1ac.OwnerReferenceApplyConfiguration
}

// objectMeta merges spec.infrastructure labels and annotations with ours
// (ours win) and builds the owner reference to the Gateway.
func objectMeta(gw *gwv1.Gateway) renderedMeta {
	m := renderedMeta{labels: map[string]string{}, annotations: map[string]string{}}
	if inf := gw.Spec.Infrastructure; inf != nil {
		for k, v := range inf.Labels {
			m.labels[string(k)] = string(v)
		}
		for k, v := range inf.Annotations {
			m.annotations[string(k)] = string(v)
		}
	}
	for k, v := range proxyspec.Labels(gw.Namespace, gw.Name) {
		m.labels[k] = v
	}
	m.owner = metav1ac.OwnerReference().
		WithAPIVersion(gwv1.GroupVersion.String()).WithKind("Gateway").
		WithName(gw.Name).WithUID(gw.UID).WithController(true)
	return m
}
