// Package v1alpha1 holds Portico's own API: ProxyConfig, the parameters of
// the Envoy proxies Portico provisions for a Gateway.
//
// +kubebuilder:object:generate=true
// +groupName=portico.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of this package.
var GroupVersion = schema.GroupVersion{Group: "portico.dev", Version: "v1alpha1"}

// The scheme registration is apimachinery's builder, not
// controller-runtime's: the API types are read by packages that must not
// depend on controller code (internal/gatewayapi, internal/proxyspec).
var (
	// SchemeBuilder registers this package's types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ProxyConfig{}, &ProxyConfigList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
