package infra

import (
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-dev/portico/api/v1alpha1"
)

// Ports of a proxy Pod besides its listeners. Envoy's admin interface
// listens on loopback only (adminPort); the readiness listener (readyPort)
// answers /ready, the metrics listener /stats/prometheus, and the
// shutdown-manager sidecar (`portico proxy-agent`, AgentPort) the preStop
// hook's /shutdown/wait.
const (
	AgentPort          int32 = 19003
	DefaultMetricsPort int32 = 19090
	// DefaultAgentImage is the sidecar's image when Params names none.
	DefaultAgentImage = "ghcr.io/portico-dev/portico:v0.1.0"
)

// Defaults of ProxyConfig's shutdown.
const (
	DefaultDrainTimeout     = 60 * time.Second
	DefaultMinDrainDuration = 5 * time.Second
	// terminationSlack is what terminationGracePeriodSeconds adds to the
	// drain timeout: Envoy's own exit after the drain.
	terminationSlack = 10 * time.Second
)

// MetricsPort is the proxies' Prometheus port, or false when metrics are
// disabled.
func MetricsPort(pc v1alpha1.ProxyConfigSpec) (int32, bool) {
	if pc.Metrics == nil {
		return DefaultMetricsPort, true
	}
	if pc.Metrics.Disabled {
		return 0, false
	}
	if pc.Metrics.Port != nil {
		return *pc.Metrics.Port, true
	}
	return DefaultMetricsPort, true
}

// DrainTimeout and MinDrainDuration of a ProxyConfig, defaulted; the
// minimum never exceeds the timeout.
func DrainTimeout(pc v1alpha1.ProxyConfigSpec) time.Duration {
	if pc.Shutdown != nil && pc.Shutdown.DrainTimeout != nil && pc.Shutdown.DrainTimeout.Duration > 0 {
		return pc.Shutdown.DrainTimeout.Duration
	}
	return DefaultDrainTimeout
}

func MinDrainDuration(pc v1alpha1.ProxyConfigSpec) time.Duration {
	d := DefaultMinDrainDuration
	if pc.Shutdown != nil && pc.Shutdown.MinDrainDuration != nil && pc.Shutdown.MinDrainDuration.Duration >= 0 {
		d = pc.Shutdown.MinDrainDuration.Duration
	}
	return min(d, DrainTimeout(pc))
}

// TerminationGracePeriod of the proxy Pods: the drain timeout and slack.
func TerminationGracePeriod(pc v1alpha1.ProxyConfigSpec) time.Duration {
	return DrainTimeout(pc) + terminationSlack
}

// Defaults of the proxies' HorizontalPodAutoscaler (ProxyConfig's
// autoscaling): with neither target set, the Envoy container's CPU at 80%
// of its request.
const (
	DefaultMinReplicas          int32 = 2
	DefaultTargetCPUUtilization int32 = 80
)

// AutoscalingMinReplicas is autoscaling.minReplicas, defaulted.
func AutoscalingMinReplicas(a *v1alpha1.ProxyAutoscaling) int32 {
	if a == nil || a.MinReplicas == nil {
		return DefaultMinReplicas
	}
	return *a.MinReplicas
}

// AutoscalingTargets are the CPU and memory utilization targets of
// autoscaling (percent of the Envoy container's requests), nil when not
// targeted: CPU at DefaultTargetCPUUtilization when neither is set.
func AutoscalingTargets(a *v1alpha1.ProxyAutoscaling) (cpu, memory *int32) {
	if a == nil {
		return nil, nil
	}
	cpu, memory = a.TargetCPUUtilizationPercentage, a.TargetMemoryUtilizationPercentage
	if cpu == nil && memory == nil {
		v := DefaultTargetCPUUtilization
		cpu = &v
	}
	return cpu, memory
}

// defaultMaxUnavailable is the proxies' PodDisruptionBudget when the
// ProxyConfig sets none: one Pod at a time may be evicted.
var defaultMaxUnavailable = intstr.FromInt32(1)

// DisruptionBudget is the PodDisruptionBudget's minAvailable or
// maxUnavailable (the other nil): the ProxyConfig's, else maxUnavailable
// 1. A ProxyConfig setting both (refused by the
// translator) gets both.
func DisruptionBudget(pc v1alpha1.ProxyConfigSpec) (minAvailable, maxUnavailable *intstr.IntOrString) {
	if b := pc.PodDisruptionBudget; b != nil && (b.MinAvailable != nil || b.MaxUnavailable != nil) {
		return b.MinAvailable, b.MaxUnavailable
	}
	d := defaultMaxUnavailable
	return nil, &d
}

// Requests of the Envoy container when the ProxyConfig names neither a
// request nor a limit of the resource: a HorizontalPodAutoscaler's
// utilization targets are percentages of requests, and a Pod without
// requests is the first evicted under node pressure.
var (
	defaultCPURequest    = resource.MustParse("100m")
	defaultMemoryRequest = resource.MustParse("128Mi")
)

// ReservedPorts are the ports of a proxy Pod that neither the metrics
// endpoint nor anything else configurable may take: Envoy's admin
// interface (loopback), the readiness listener and the shutdown-manager.
func ReservedPorts() []int32 { return []int32{adminPort, readyPort, AgentPort} }
