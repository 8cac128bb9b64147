package proxyspec

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/portico-dev/portico/api/v1alpha1"
)

// Ports of a proxy Pod besides its listeners. Envoy's admin interface
// listens on loopback only (AdminPort); the readiness listener (ReadyPort)
// answers /ready, the metrics listener (MetricsPort) /stats/prometheus,
// and the shutdown-manager sidecar (`portico proxy-agent`, AgentPort) the
// preStop hook's /shutdown/wait.
const (
	AdminPort          int32 = 19001
	ReadyPort          int32 = 19002
	AgentPort          int32 = 19003
	DefaultMetricsPort int32 = 19090
)

// ReservedPorts are the ports of a proxy Pod that neither the metrics
// endpoint nor anything else configurable may take: Envoy's admin
// interface (loopback), the readiness listener and the shutdown-manager.
func ReservedPorts() []int32 { return []int32{AdminPort, ReadyPort, AgentPort} }

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

// Values of the fields a ProxyConfig leaves unset (and
// v1alpha1.DefaultEnvoyImage).
const (
	DefaultReplicas    int32 = 2
	DefaultLogLevel          = "info"
	DefaultServiceType       = corev1.ServiceTypeLoadBalancer
)

// Defaults of ProxyConfig's shutdown.
const (
	DefaultDrainTimeout     = 60 * time.Second
	DefaultMinDrainDuration = 5 * time.Second
)

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

// DisruptionBudget is the PodDisruptionBudget's minAvailable or
// maxUnavailable (the other nil): the ProxyConfig's, else maxUnavailable
// 1 (one Pod at a time may be evicted). A ProxyConfig setting both
// (refused by CheckProxyConfig) gets both.
func DisruptionBudget(pc v1alpha1.ProxyConfigSpec) (minAvailable, maxUnavailable *intstr.IntOrString) {
	if b := pc.PodDisruptionBudget; b != nil && (b.MinAvailable != nil || b.MaxUnavailable != nil) {
		return b.MinAvailable, b.MaxUnavailable
	}
	d := intstr.FromInt32(1)
	return nil, &d
}
