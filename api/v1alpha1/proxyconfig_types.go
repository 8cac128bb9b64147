package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kind is the kind of ProxyConfig, as GatewayClass and Gateway
// parametersRefs name it.
const Kind = "ProxyConfig"

// DefaultEnvoyImage is the Envoy image used when a ProxyConfig names none.
const DefaultEnvoyImage = "docker.io/envoyproxy/envoy:distroless-v1.40.0"

// ProxyConfig configures the Envoy proxies Portico provisions for a
// Gateway. A GatewayClass references one with spec.parametersRef (group
// portico.dev, kind ProxyConfig, with a namespace): the administrator's. A
// Gateway may override some of its fields with
// spec.infrastructure.parametersRef (a ProxyConfig in its own namespace):
// the fields it sets replace the class's, within the bounds of the class's
// spec.gatewayOverrides; the fields it leaves unset are the class's.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=portico
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ProxyConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ProxyConfigSpec `json:"spec,omitempty"`
}

// ProxyConfigSpec is the desired shape of a Gateway's proxies.
type ProxyConfigSpec struct {
	// Image of Envoy. Defaults to a pinned Envoy release.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// Replicas of the Envoy Deployment. Unset: the class's, else 2.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Replicas *int32 `json:"replicas,omitempty"`

	// Resources of the Envoy container.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// Service exposing the listener ports.
	// +optional
	Service ProxyService `json:"service,omitempty"`

	// LogLevel of Envoy.
	// +optional
	// +kubebuilder:validation:Enum=trace;debug;info;warning;error;critical;off
	LogLevel string `json:"logLevel,omitempty"`

	// Autoscaling makes a HorizontalPodAutoscaler scale the proxies; then
	// Portico leaves the Deployment's replicas to it and ignores replicas.
	// +optional
	Autoscaling *ProxyAutoscaling `json:"autoscaling,omitempty"`

	// PodDisruptionBudget of the proxies. Unset: maxUnavailable 1.
	// +optional
	PodDisruptionBudget *ProxyDisruptionBudget `json:"podDisruptionBudget,omitempty"`

	// Placement of the proxy Pods on nodes. Unset: spread across nodes and
	// zones (topology spread, ScheduleAnyway).
	// +optional
	Placement *ProxyPlacement `json:"placement,omitempty"`

	// Pod adds labels and annotations to the proxy Pods.
	// +optional
	Pod *ProxyPod `json:"pod,omitempty"`

	// Shutdown bounds how long a terminating proxy drains.
	// +optional
	Shutdown *ProxyShutdown `json:"shutdown,omitempty"`

	// Metrics configures the Prometheus endpoint of the proxies.
	// +optional
	Metrics *ProxyMetrics `json:"metrics,omitempty"`

	// AccessLog configures the proxies' access logs (stdout). Unset: one
	// JSON object per request with DefaultAccessLogFields.
	// +optional
	AccessLog *ProxyAccessLog `json:"accessLog,omitempty"`

	// Timeouts of downstream and upstream connections and streams.
	// +optional
	Timeouts *ProxyTimeouts `json:"timeouts,omitempty"`

	// CircuitBreakers are the thresholds of every upstream cluster.
	// +optional
	CircuitBreakers *ProxyCircuitBreakers `json:"circuitBreakers,omitempty"`

	// Overload configures Envoy's overload manager.
	// +optional
	Overload *ProxyOverload `json:"overload,omitempty"`

	// GatewayOverrides bounds what the ProxyConfig of a Gateway of the
	// class may change. It is read in the ProxyConfig a GatewayClass
	// references and ignored in a Gateway's own. When absent, Gateways may
	// set DefaultOverridableFields (replicas, resources, logLevel,
	// service.addressFromClusterIP, autoscaling, accessLog) and narrow
	// service.type, nothing else.
	// +optional
	GatewayOverrides *GatewayOverrides `json:"gatewayOverrides,omitempty"`
}

// OverridableField is a field of ProxyConfigSpec that a Gateway's
// ProxyConfig may set to another value than its class's.
// +kubebuilder:validation:Enum=image;replicas;resources;logLevel;service.type;service.annotations;service.addressFromClusterIP;autoscaling;podDisruptionBudget;placement;pod;shutdown;metrics;accessLog;timeouts;circuitBreakers;overload
type OverridableField string

// Fields a GatewayOverrides can list.
const (
	OverrideImage                OverridableField = "image"
	OverrideReplicas             OverridableField = "replicas"
	OverrideResources            OverridableField = "resources"
	OverrideLogLevel             OverridableField = "logLevel"
	OverrideServiceType          OverridableField = "service.type"
	OverrideServiceAnnotations   OverridableField = "service.annotations"
	OverrideAddressFromClusterIP OverridableField = "service.addressFromClusterIP"
	OverrideAutoscaling          OverridableField = "autoscaling"
	OverrideDisruptionBudget     OverridableField = "podDisruptionBudget"
	OverridePlacement            OverridableField = "placement"
	OverridePod                  OverridableField = "pod"
	OverrideShutdown             OverridableField = "shutdown"
	OverrideMetrics              OverridableField = "metrics"
	OverrideAccessLog            OverridableField = "accessLog"
	OverrideTimeouts             OverridableField = "timeouts"
	OverrideCircuitBreakers      OverridableField = "circuitBreakers"
	OverrideOverload             OverridableField = "overload"
)

// DefaultOverridableFields are the fields a Gateway may override when its
// class's ProxyConfig has no gatewayOverrides (or the class has no
// ProxyConfig): what a namespace's ResourceQuota and LimitRange already
// bound (replicas, resources), and what concerns only the Gateway's own
// proxies (log level, the address it reports, autoscaling within
// maxReplicas, its access-log format).
var DefaultOverridableFields = []OverridableField{OverrideReplicas, OverrideResources, OverrideLogLevel, OverrideAddressFromClusterIP, OverrideAutoscaling, OverrideAccessLog}

// GatewayOverrides bounds the ProxyConfigs of the Gateways of a class. A
// Gateway's ProxyConfig that sets a field outside the bounds (to a value
// other than the class's) makes the Gateway Accepted=False with reason
// InvalidParameters, naming the field; its proxies then run with the
// class's ProxyConfig alone.
type GatewayOverrides struct {
	// Fields a Gateway's ProxyConfig may set to another value than the
	// class's; an empty list allows none. Whatever the list, a Gateway may
	// pick a Service type that exposes no more than the class's (ClusterIP,
	// then NodePort, then LoadBalancer): listing service.type allows any.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=17
	Fields []OverridableField `json:"fields,omitempty"`

	// Images a Gateway's ProxyConfig may name when fields lists image:
	// each entry is an image reference that must match exactly, or a
	// prefix ending in "/", ":" or "@" (a registry or repository). Empty:
	// any image.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	Images []string `json:"images,omitempty"`

	// MaxReplicas bounds the replicas a Gateway's ProxyConfig may set
	// (when fields lists replicas) and its autoscaling.maxReplicas (when
	// fields lists autoscaling). Unset: no bound but the ProxyConfig
	// maximum (1000) and the namespace's ResourceQuota.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`
}

// ProxyService configures the Service in front of the proxies.
type ProxyService struct {
	// Type of the Service: LoadBalancer (default), ClusterIP or NodePort.
	// +optional
	// +kubebuilder:validation:Enum=LoadBalancer;ClusterIP;NodePort
	Type corev1.ServiceType `json:"type,omitempty"`

	// AddressFromClusterIP reports the Service's ClusterIP as the Gateway's
	// address instead of load-balancer ingress addresses (for clusters
	// without a load-balancer implementation).
	// +optional
	AddressFromClusterIP bool `json:"addressFromClusterIP,omitempty"`

	// Annotations added to the Service (e.g. for a cloud load balancer).
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ProxyConfigList is a list of ProxyConfigs.
//
// +kubebuilder:object:root=true
type ProxyConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProxyConfig `json:"items"`
}
