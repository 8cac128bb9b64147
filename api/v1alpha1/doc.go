// Package v1alpha1 holds Portico's own API: ProxyConfig, the parameters of
// the Envoy proxies Portico provisions for a Gateway.
//
// +kubebuilder:object:generate=true
// +groupName=portico.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// GroupVersion is the API group and version of this package.
var GroupVersion = schema.GroupVersion{Group: "portico.dev", Version: "v1alpha1"}

var (
	// SchemeBuilder registers this package's types.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
