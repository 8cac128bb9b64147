package resource

import (
	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/portico-dev/portico/api/v1alpha1"
)

// The descriptors of the kinds that are not routes (a kind of route has a
// file of its own). Each names its map in Snapshot.
var (
	gatewayClassKind = clusterScoped(Descriptor{
		Kind: KindGatewayClass, GVK: gwv1.SchemeGroupVersion.WithKind("GatewayClass"),
		LoadVersions: []string{"v1", "v1beta1"}, HasStatus: true,
		NewList: func() runtime.Object { return &gwv1.GatewayClassList{} },
	}, func(s *Snapshot) *Map[string, *gwv1.GatewayClass] { return &s.GatewayClasses })
	gatewayKind = namespaced(Descriptor{
		Kind: KindGateway, GVK: gwv1.SchemeGroupVersion.WithKind("Gateway"),
		LoadVersions: []string{"v1", "v1beta1"}, HasStatus: true,
		NewList: func() runtime.Object { return &gwv1.GatewayList{} },
	}, func(s *Snapshot) *Map[Key, *gwv1.Gateway] { return &s.Gateways })
	listenerSetKind = namespaced(Descriptor{
		Kind: KindListenerSet, GVK: gwv1.SchemeGroupVersion.WithKind("ListenerSet"),
		LoadVersions: []string{"v1"}, HasStatus: true,
		NewList: func() runtime.Object { return &gwv1.ListenerSetList{} },
	}, func(s *Snapshot) *Map[Key, *gwv1.ListenerSet] { return &s.ListenerSets })
	// ReferenceGrants are watched as v1beta1, whose schema v1 shares.
	referenceGrantKind = namespaced(Descriptor{
		Kind: KindReferenceGrant, GVK: gwv1beta1.SchemeGroupVersion.WithKind("ReferenceGrant"),
		LoadVersions: []string{"v1", "v1beta1"},
		NewList:      func() runtime.Object { return &gwv1beta1.ReferenceGrantList{} },
	}, func(s *Snapshot) *Map[Key, *gwv1beta1.ReferenceGrant] { return &s.ReferenceGrants })
	serviceKind = namespaced(Descriptor{
		Kind: KindService, GVK: corev1.SchemeGroupVersion.WithKind("Service"), LoadVersions: []string{"v1"},
		NewList: func() runtime.Object { return &corev1.ServiceList{} },
	}, func(s *Snapshot) *Map[Key, *corev1.Service] { return &s.Services })
	endpointSliceKind = namespaced(Descriptor{
		Kind: KindEndpointSlice, GVK: discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"), LoadVersions: []string{"v1"},
		NewList: func() runtime.Object { return &discoveryv1.EndpointSliceList{} },
	}, func(s *Snapshot) *Map[Key, *discoveryv1.EndpointSlice] { return &s.EndpointSlices })
	secretKind = namespaced(Descriptor{
		Kind: KindSecret, GVK: corev1.SchemeGroupVersion.WithKind("Secret"), LoadVersions: []string{"v1"},
		NewList: func() runtime.Object { return &corev1.SecretList{} },
	}, func(s *Snapshot) *Map[Key, *corev1.Secret] { return &s.Secrets })
	namespaceKind = clusterScoped(Descriptor{
		Kind: KindNamespace, GVK: corev1.SchemeGroupVersion.WithKind("Namespace"), LoadVersions: []string{"v1"},
		NewList: func() runtime.Object { return &corev1.NamespaceList{} },
	}, func(s *Snapshot) *Map[string, *corev1.Namespace] { return &s.Namespaces })
	proxyConfigKind = namespaced(Descriptor{
		Kind: KindProxyConfig, GVK: v1alpha1.GroupVersion.WithKind(v1alpha1.Kind),
		LoadVersions: []string{v1alpha1.GroupVersion.Version},
		NewList:      func() runtime.Object { return &v1alpha1.ProxyConfigList{} },
	}, func(s *Snapshot) *Map[Key, *v1alpha1.ProxyConfig] { return &s.ProxyConfigs })
	// Deployments are the provisioned proxies', never read from files.
	deploymentKind = namespaced(Descriptor{
		Kind: KindDeployment, GVK: appsv1.SchemeGroupVersion.WithKind("Deployment"),
		NewList: func() runtime.Object { return &appsv1.DeploymentList{} },
	}, func(s *Snapshot) *Map[Key, *appsv1.Deployment] { return &s.Deployments })
	// ConfigMaps hold CA certificates (key ca.crt) that CA certificate
	// references name.
	configMapKind = namespaced(Descriptor{
		Kind: KindConfigMap, GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap"), LoadVersions: []string{"v1"},
		ByReference: true,
		NewList:     func() runtime.Object { return &corev1.ConfigMapList{} },
	}, func(s *Snapshot) *Map[Key, *corev1.ConfigMap] { return &s.ConfigMaps })
	clusterTrustBundleKind = clusterScoped(Descriptor{
		Kind: KindClusterTrustBundle, GVK: certificatesv1.SchemeGroupVersion.WithKind("ClusterTrustBundle"),
		LoadVersions: []string{"v1"},
		NewList:      func() runtime.Object { return &certificatesv1.ClusterTrustBundleList{} },
	}, func(s *Snapshot) *Map[string, *certificatesv1.ClusterTrustBundle] { return &s.ClusterTrustBundles })
	backendTLSPolicyKind = namespaced(Descriptor{
		Kind: KindBackendTLSPolicy, GVK: gwv1.SchemeGroupVersion.WithKind("BackendTLSPolicy"),
		LoadVersions: []string{"v1"}, HasStatus: true,
		NewList: func() runtime.Object { return &gwv1.BackendTLSPolicyList{} },
	}, func(s *Snapshot) *Map[Key, *gwv1.BackendTLSPolicy] { return &s.BackendTLSPolicies })
)

// namespaced completes the descriptor of a namespaced kind whose objects
// are T (a pointer to O), kept in the map field returns.
func namespaced[T interface {
	*O
	Object
}, O any](d Descriptor, field func(*Snapshot) *Map[Key, T]) *Descriptor {
	d.New = func() Object { return T(new(O)) }
	d.store = keyed[T](field)
	return &d
}

// clusterScoped is namespaced for a cluster-scoped kind, keyed by name.
func clusterScoped[T interface {
	*O
	Object
}, O any](d Descriptor, field func(*Snapshot) *Map[string, T]) *Descriptor {
	d.New = func() Object { return T(new(O)) }
	d.store = named[T](field)
	d.ClusterScoped = true
	return &d
}
