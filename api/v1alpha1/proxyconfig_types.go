package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kind is the kind of ProxyConfig, as GatewayClass and Gateway
// parametersRefs name it.
const Kind = "ProxyConfig"

// DefaultEnvoyImage is the Envoy image used when a ProxyConfig names none.
const DefaultEnvoyImage = "docker.io/envoyproxy/envoy:distroless-v1.36.2"

// ProxyConfig configures the Envoy proxies Portico provisions for a
// Gateway. A GatewayClass references one with spec.parametersRef (group
// portico.dev, kind ProxyConfig, with a namespace); a Gateway may override it
// with spec.infrastructure.parametersRef (a ProxyConfig in its own
// namespace).
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

	// Replicas of the Envoy Deployment.
	// +optional
	// +kubebuilder:default=2
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

func init() {
	SchemeBuilder.Register(&ProxyConfig{}, &ProxyConfigList{})
}
