package infra

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/proxyspec"
)

// Prometheus scrape annotations of the proxy Pods (unless metrics are
// disabled): scrapePath on proxyspec.MetricsPort.
const (
	AnnotationScrape     = "prometheus.io/scrape"
	AnnotationScrapePort = "prometheus.io/port"
	AnnotationScrapePath = "prometheus.io/path"
	// scrapePath is the metrics listener's path (the bootstrap's).
	scrapePath = "/stats/prometheus"
)

// Names of the proxy Pod's containers, and the path of the
// shutdown-manager that the preStop hook calls.
const (
	EnvoyContainerName = "envoy"
	AgentContainerName = "shutdown-manager"
	shutdownWaitPath   = "/shutdown/wait"
)

// Resources of the shutdown-manager: it idles until the Pod terminates.
var (
	agentRequests = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("10m"),
		corev1.ResourceMemory: resource.MustParse("32Mi"),
	}
	agentLimits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
)

// podTemplate is the proxy Pod of Gateway gw.
func podTemplate(gw *gwv1.Gateway, pc v1alpha1.ProxyConfigSpec, ports []listenerPort, p Params) (*corev1ac.PodTemplateSpecApplyConfiguration, error) {
	name := proxyspec.Name(gw.Name)
	selector := proxyspec.Labels(gw.Namespace, gw.Name)
	labels, annotations := podMetadata(gw, pc)

	spec := corev1ac.PodSpec().
		WithServiceAccountName(name).
		WithAutomountServiceAccountToken(false).
		WithTerminationGracePeriodSeconds(ceilSeconds(TerminationGracePeriod(pc))).
		WithSecurityContext(corev1ac.PodSecurityContext().
			// The kubelet makes Secret files root-owned; with fsGroup
			// their group is Envoy's, so the 0440 client key is readable
			// by Envoy and nobody else.
			WithFSGroup(envoyUID).
			// Envoy runs as non-root and still binds listener ports below
			// 1024.
			WithSysctls(corev1ac.Sysctl().WithName("net.ipv4.ip_unprivileged_port_start").WithValue("0")).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
		WithContainers(envoyContainer(gw, pc, ports), agentContainer(pc, p)).
		WithVolumes(
			corev1ac.Volume().WithName("bootstrap").WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(name)),
			corev1ac.Volume().WithName("xds-cert").WithSecret(corev1ac.SecretVolumeSource().
				WithSecretName(proxyspec.ClientCertSecretName(gw.Name)).WithDefaultMode(0o440)))

	spread, err := topologySpread(pc, selector)
	if err != nil {
		return nil, err
	}
	spec.WithTopologySpreadConstraints(spread...)
	if pl := pc.Placement; pl != nil {
		if len(pl.NodeSelector) > 0 {
			spec.WithNodeSelector(pl.NodeSelector)
		}
		for i := range pl.Tolerations {
			t := &corev1ac.TolerationApplyConfiguration{}
			if err := convert(&pl.Tolerations[i], t); err != nil {
				return nil, fmt.Errorf("infra: placement.tolerations[%d]: %w", i, err)
			}
			spec.WithTolerations(t)
		}
		if pl.Affinity != nil {
			a := &corev1ac.AffinityApplyConfiguration{}
			if err := convert(pl.Affinity, a); err != nil {
				return nil, fmt.Errorf("infra: placement.affinity: %w", err)
			}
			spec.WithAffinity(a)
		}
		if pl.PriorityClassName != "" {
			spec.WithPriorityClassName(pl.PriorityClassName)
		}
	}
	return corev1ac.PodTemplateSpec().WithLabels(labels).WithAnnotations(annotations).WithSpec(spec), nil
}

// podMetadata merges the Pods' labels and annotations, later ones
// winning key by key: spec.infrastructure's, the ProxyConfig's pod, then
// Portico's own (the selector labels, the scrape annotations).
func podMetadata(gw *gwv1.Gateway, pc v1alpha1.ProxyConfigSpec) (labels, annotations map[string]string) {
	labels, annotations = map[string]string{}, map[string]string{}
	if inf := gw.Spec.Infrastructure; inf != nil {
		for k, v := range inf.Labels {
			labels[string(k)] = string(v)
		}
		for k, v := range inf.Annotations {
			annotations[string(k)] = string(v)
		}
	}
	if pod := pc.Pod; pod != nil {
		for k, v := range pod.Labels {
			labels[k] = v
		}
		for k, v := range pod.Annotations {
			annotations[k] = v
		}
	}
	for k, v := range proxyspec.Labels(gw.Namespace, gw.Name) {
		labels[k] = v
	}
	if port, ok := proxyspec.MetricsPort(pc); ok {
		annotations[AnnotationScrape] = "true"
		annotations[AnnotationScrapePort] = strconv.Itoa(int(port))
		annotations[AnnotationScrapePath] = scrapePath
	}
	return labels, annotations
}

// envoyContainer runs Envoy. It is ready while /ready on proxyspec.ReadyPort says so
// (the shutdown-manager fails it first when the Pod terminates), and its
// preStop hook waits for the shutdown-manager to drain it.
func envoyContainer(gw *gwv1.Gateway, pc v1alpha1.ProxyConfigSpec, ports []listenerPort) *corev1ac.ContainerApplyConfiguration {
	image := pc.Image
	if image == "" {
		image = v1alpha1.DefaultEnvoyImage
	}
	logLevel := pc.LogLevel
	if logLevel == "" {
		logLevel = proxyspec.DefaultLogLevel
	}
	c := corev1ac.Container().
		WithName(EnvoyContainerName).
		WithImage(image).
		WithArgs("--config-path", bootstrapDir+"/"+bootstrapFile,
			"--service-cluster", gw.Namespace+"/"+gw.Name,
			"--service-node", "$(POD_NAME)",
			"--log-level", logLevel,
			"--drain-time-s", strconv.FormatInt(ceilSeconds(proxyspec.DrainTimeout(pc)), 10),
			"--drain-strategy", "immediate").
		WithEnv(corev1ac.EnvVar().WithName("POD_NAME").WithValueFrom(
			corev1ac.EnvVarSource().WithFieldRef(corev1ac.ObjectFieldSelector().WithFieldPath("metadata.name")))).
		WithVolumeMounts(
			corev1ac.VolumeMount().WithName("bootstrap").WithMountPath(bootstrapDir).WithReadOnly(true),
			corev1ac.VolumeMount().WithName("xds-cert").WithMountPath(xdsCertDir).WithReadOnly(true)).
		WithReadinessProbe(corev1ac.Probe().
			WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/ready").WithPort(intstr.FromInt32(proxyspec.ReadyPort))).
			WithPeriodSeconds(1).WithTimeoutSeconds(1).
			WithFailureThreshold(3).WithSuccessThreshold(1)).
		WithLifecycle(corev1ac.Lifecycle().WithPreStop(corev1ac.LifecycleHandler().
			WithHTTPGet(corev1ac.HTTPGetAction().WithPath(shutdownWaitPath).WithPort(intstr.FromInt32(proxyspec.AgentPort))))).
		WithSecurityContext(lockedDown()).
		WithResources(envoyResources(pc))
	for _, lp := range ports {
		c.WithPorts(corev1ac.ContainerPort().WithName(lp.name()).WithContainerPort(lp.port).WithProtocol(lp.protocol))
	}
	if port, ok := proxyspec.MetricsPort(pc); ok {
		c.WithPorts(corev1ac.ContainerPort().WithName("metrics").WithContainerPort(port).WithProtocol(corev1.ProtocolTCP))
	}
	return c
}

// agentContainer is the shutdown-manager sidecar (`portico proxy-agent`):
// on SIGTERM it drains Envoy through its admin interface, and Envoy's
// preStop hook waits for that drain. The drain waits for the connections
// of the Gateway's listeners, not for those of the readiness and metrics
// listeners (probes and scrapers keep coming).
func agentContainer(pc v1alpha1.ProxyConfigSpec, p Params) *corev1ac.ContainerApplyConfiguration {
	image := p.AgentImage
	if image == "" {
		image = DefaultAgentImage
	}
	ignore := strconv.Itoa(int(proxyspec.ReadyPort))
	if port, ok := proxyspec.MetricsPort(pc); ok {
		ignore += "," + strconv.Itoa(int(port))
	}
	return corev1ac.Container().
		WithName(AgentContainerName).
		WithImage(image).
		WithArgs("proxy-agent",
			"--admin-address=127.0.0.1:"+strconv.Itoa(int(proxyspec.AdminPort)),
			"--listen=:"+strconv.Itoa(int(proxyspec.AgentPort)),
			"--drain-timeout="+proxyspec.DrainTimeout(pc).String(),
			"--min-drain-duration="+proxyspec.MinDrainDuration(pc).String(),
			"--ignore-ports="+ignore).
		WithPorts(corev1ac.ContainerPort().WithName("agent").WithContainerPort(proxyspec.AgentPort).WithProtocol(corev1.ProtocolTCP)).
		WithSecurityContext(lockedDown()).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(agentRequests.DeepCopy()).
			WithLimits(agentLimits.DeepCopy()))
}

// lockedDown is the security context of both containers: non-root,
// read-only root file system, no capability, no privilege escalation.
func lockedDown() *corev1ac.SecurityContextApplyConfiguration {
	return corev1ac.SecurityContext().
		WithAllowPrivilegeEscalation(false).
		WithReadOnlyRootFilesystem(true).
		WithRunAsNonRoot(true).
		WithRunAsUser(envoyUID).
		WithRunAsGroup(envoyUID).
		WithCapabilities(corev1ac.Capabilities().WithDrop("ALL"))
}

// envoyResources are the ProxyConfig's resources, with a default request
// (defaultCPURequest, defaultMemoryRequest) for CPU and memory when
// neither a request nor a limit names them (a limit alone makes the
// request equal to it).
func envoyResources(pc v1alpha1.ProxyConfigSpec) *corev1ac.ResourceRequirementsApplyConfiguration {
	req, lim := corev1.ResourceList{}, corev1.ResourceList{}
	if r := pc.Resources; r != nil {
		for k, v := range r.Requests {
			req[k] = v.DeepCopy()
		}
		for k, v := range r.Limits {
			lim[k] = v.DeepCopy()
		}
	}
	def := func(name corev1.ResourceName, q resource.Quantity) {
		_, requested := req[name]
		_, limited := lim[name]
		if !requested && !limited {
			req[name] = q.DeepCopy()
		}
	}
	def(corev1.ResourceCPU, defaultCPURequest)
	def(corev1.ResourceMemory, defaultMemoryRequest)
	rr := corev1ac.ResourceRequirements().WithRequests(req)
	if len(lim) > 0 {
		rr.WithLimits(lim)
	}
	return rr
}

// topologySpread is the ProxyConfig's topology spread constraints, each
// without a label selector given the proxies' own, else the default: at
// most one Pod more in a node, and in a zone, than in another
// (ScheduleAnyway: a preference, never a reason to stay Pending), counted
// among the Pods of the same ReplicaSet (pod-template-hash), so that a
// rollout's old Pods do not skew the new ones.
func topologySpread(pc v1alpha1.ProxyConfigSpec, selector map[string]string) ([]*corev1ac.TopologySpreadConstraintApplyConfiguration, error) {
	var out []*corev1ac.TopologySpreadConstraintApplyConfiguration
	if pc.Placement != nil && len(pc.Placement.TopologySpreadConstraints) > 0 {
		for i := range pc.Placement.TopologySpreadConstraints {
			c := pc.Placement.TopologySpreadConstraints[i].DeepCopy()
			if s := c.LabelSelector; s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0) {
				c.LabelSelector = &metav1.LabelSelector{MatchLabels: selector}
			}
			t := &corev1ac.TopologySpreadConstraintApplyConfiguration{}
			if err := convert(c, t); err != nil {
				return nil, fmt.Errorf("infra: placement.topologySpreadConstraints[%d]: %w", i, err)
			}
			out = append(out, t)
		}
		return out, nil
	}
	for _, key := range []string{corev1.LabelHostname, corev1.LabelTopologyZone} {
		out = append(out, corev1ac.TopologySpreadConstraint().
			WithMaxSkew(1).
			WithTopologyKey(key).
			WithWhenUnsatisfiable(corev1.ScheduleAnyway).
			WithLabelSelector(metav1ac.LabelSelector().WithMatchLabels(selector)).
			WithMatchLabelKeys(appsv1.DefaultDeploymentUniqueLabelKey))
	}
	return out, nil
}

// convert turns an API value into its apply configuration, which has the
// same JSON form.
func convert(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// ceilSeconds is d in whole seconds, rounded up, at least 1.
func ceilSeconds(d time.Duration) int64 {
	return max(1, int64(math.Ceil(d.Seconds())))
}
