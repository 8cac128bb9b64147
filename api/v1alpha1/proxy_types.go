package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ProxyAutoscaling is a HorizontalPodAutoscaler (autoscaling/v2) of the
// proxy Deployment. With neither target set, the target is 80% CPU.
type ProxyAutoscaling struct {
	// MinReplicas. Unset: 2.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MinReplicas *int32 `json:"minReplicas,omitempty"`
	// MaxReplicas, at least minReplicas.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxReplicas int32 `json:"maxReplicas"`
	// TargetCPUUtilizationPercentage of the Envoy container's CPU request.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	TargetCPUUtilizationPercentage *int32 `json:"targetCPUUtilizationPercentage,omitempty"`
	// TargetMemoryUtilizationPercentage of the Envoy container's memory
	// request.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	TargetMemoryUtilizationPercentage *int32 `json:"targetMemoryUtilizationPercentage,omitempty"`
}

// ProxyDisruptionBudget is the proxies' PodDisruptionBudget: at most one
// of minAvailable and maxUnavailable; neither means maxUnavailable 1.
type ProxyDisruptionBudget struct {
	// +optional
	// +kubebuilder:validation:XIntOrString
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`
	// +optional
	// +kubebuilder:validation:XIntOrString
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// ProxyPlacement places the proxy Pods. These fields grant capacity (nodes,
// priority), so by default only the class's ProxyConfig sets them.
type ProxyPlacement struct {
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// Affinity replaces the default (none).
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// TopologySpreadConstraints replace the default spread across
	// kubernetes.io/hostname and topology.kubernetes.io/zone; their label
	// selector, when empty, is the proxies' own.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName string `json:"priorityClassName,omitempty"`
}

// ProxyPod is extra metadata of the proxy Pods; Portico's own labels and
// annotations win over these.
type ProxyPod struct {
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ProxyShutdown bounds the drain of a terminating proxy: it fails
// readiness, keeps serving while its endpoints are removed, closes
// connections gracefully, and exits when no downstream connection is left
// (after minDrainDuration) or at drainTimeout.
type ProxyShutdown struct {
	// DrainTimeout. Unset: 60s. terminationGracePeriodSeconds is it plus
	// 10s.
	// +optional
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`
	// MinDrainDuration is how long a draining proxy keeps accepting
	// connections while load balancers take it out. Unset: 5s.
	// +optional
	MinDrainDuration *metav1.Duration `json:"minDrainDuration,omitempty"`
}

// ProxyMetrics is the proxies' Prometheus endpoint: /stats/prometheus on
// its own port, which serves nothing else of Envoy's admin interface.
type ProxyMetrics struct {
	// Port. Unset: 19090.
	// +optional
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	Port *int32 `json:"port,omitempty"`
	// Disabled removes the endpoint and the scrape annotations.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
}

// AccessLogFormat is the encoding of access-log lines.
// +kubebuilder:validation:Enum=JSON;Text
type AccessLogFormat string

// Access-log formats.
const (
	AccessLogJSON AccessLogFormat = "JSON"
	AccessLogText AccessLogFormat = "Text"
)

// ProxyAccessLog configures access logs to stdout.
type ProxyAccessLog struct {
	// Disabled turns access logs off.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
	// Format: JSON (default) or Text.
	// +optional
	Format AccessLogFormat `json:"format,omitempty"`
	// JSON fields (name → Envoy command operator such as
	// "%RESPONSE_CODE%") replacing the default fields, for format JSON.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	JSON map[string]string `json:"json,omitempty"`
	// Text is the line format (Envoy command operators), for format Text.
	// Unset: Envoy's default format.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Text string `json:"text,omitempty"`
}

// ProxyTimeouts are connection and stream timeouts; 0s disables one.
type ProxyTimeouts struct {
	// RequestHeaders: a client must send its request headers within it.
	// Unset: 10s.
	// +optional
	RequestHeaders *metav1.Duration `json:"requestHeaders,omitempty"`
	// StreamIdle: a stream with no activity is reset. Unset: 5m.
	// +optional
	StreamIdle *metav1.Duration `json:"streamIdle,omitempty"`
	// ConnectionIdle: a client connection with no stream is closed.
	// Unset: 1h.
	// +optional
	ConnectionIdle *metav1.Duration `json:"connectionIdle,omitempty"`
	// UpstreamConnect bounds connecting to a backend. Unset: 5s.
	// +optional
	UpstreamConnect *metav1.Duration `json:"upstreamConnect,omitempty"`
}

// ProxyCircuitBreakers are per-cluster thresholds (Envoy's default
// priority). Unset fields: 1024 connections, pending requests and
// requests, 3 concurrent retries.
type ProxyCircuitBreakers struct {
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxConnections *int32 `json:"maxConnections,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxPendingRequests *int32 `json:"maxPendingRequests,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxRequests *int32 `json:"maxRequests,omitempty"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxRetries *int32 `json:"maxRetries,omitempty"`
}

// ProxyOverload configures Envoy's overload manager.
type ProxyOverload struct {
	// MaxHeapPercent of the Envoy container's memory limit: at 95% of it
	// Envoy stops accepting requests, at 98% it closes connections
	// (shrinking its heap from 90%). Applies only with a memory limit.
	// Unset: 90.
	// +optional
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=100
	MaxHeapPercent *int32 `json:"maxHeapPercent,omitempty"`
	// MaxDownstreamConnections caps the proxy's client connections.
	// Unset: 50000.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxDownstreamConnections *int64 `json:"maxDownstreamConnections,omitempty"`
}
