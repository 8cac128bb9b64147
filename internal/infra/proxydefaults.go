package infra

import (
	"time"

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
