package gatewayapi

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
	res "github.com/portico-dev/portico/internal/resource"
)

// boundsSnapshot: GatewayClass "portico" with ProxyConfig class (nil: no
// parametersRef), and Gateway ns/edge referencing its own ProxyConfig own.
func boundsSnapshot(class *v1alpha1.ProxyConfigSpec, own v1alpha1.ProxyConfigSpec) *res.Snapshot {
	s := res.New()
	gc := &gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "portico"},
		Spec:       gwv1.GatewayClassSpec{ControllerName: DefaultControllerName},
	}
	if class != nil {
		s.ProxyConfigs.Set(res.Key{Namespace: "admin", Name: "class"}, &v1alpha1.ProxyConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: "admin", Name: "class"}, Spec: *class})
		gc.Spec.ParametersRef = &gwv1.ParametersReference{Group: "portico.dev", Kind: "ProxyConfig", Name: "class", Namespace: ptr(gwv1.Namespace("admin"))}
	}
	s.GatewayClasses.Set("portico", gc)
	s.ProxyConfigs.Set(res.Key{Namespace: "ns", Name: "own"}, &v1alpha1.ProxyConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "own"}, Spec: own})
	s.Gateways.Set(res.Key{Namespace: "ns", Name: "edge"}, &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "edge", Generation: 1},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: "portico",
			Infrastructure: &gwv1.GatewayInfrastructure{ParametersRef: &gwv1.LocalParametersReference{
				Group: "portico.dev", Kind: "ProxyConfig", Name: "own"}},
			Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}},
		},
	})
	return s.Build()
}

// The effective ProxyConfig of a Gateway is its class's with the fields
// the Gateway's own sets: a Gateway's ProxyConfig that sets only replicas
// keeps the class's image, Service and annotations (replacing the class's
// whole spec would give the Gateway the default image and a public load
// balancer the administrator did not choose).
func TestGatewayProxyConfigMergesOverClass(t *testing.T) {
	class := &v1alpha1.ProxyConfigSpec{
		Image:    "mirror.example.com/envoy:v1",
		Replicas: ptr[int32](3),
		Service: v1alpha1.ProxyService{Type: corev1.ServiceTypeClusterIP,
			Annotations: map[string]string{"lb.example.com/internal": "true"}},
		GatewayOverrides: &v1alpha1.GatewayOverrides{Fields: []v1alpha1.OverridableField{
			v1alpha1.OverrideReplicas, v1alpha1.OverrideResources, v1alpha1.OverrideServiceAnnotations}},
	}
	own := v1alpha1.ProxyConfigSpec{
		Replicas:  ptr[int32](5),
		Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
		Service:   v1alpha1.ProxyService{Annotations: map[string]string{"lb.example.com/idle-timeout": "60"}},
		// Ignored in a Gateway's ProxyConfig: no Gateway widens its own bounds.
		GatewayOverrides: &v1alpha1.GatewayOverrides{Fields: []v1alpha1.OverridableField{v1alpha1.OverrideImage}},
	}
	r := Translate(boundsSnapshot(class, own), Options{ControllerName: DefaultControllerName})
	if len(r.Infra) != 1 {
		t.Fatalf("infra specs %+v", r.Infra)
	}
	got := r.Infra[0].Proxy
	want := v1alpha1.ProxyConfigSpec{
		Image:     "mirror.example.com/envoy:v1",
		Replicas:  ptr[int32](5),
		Resources: own.Resources,
		Service: v1alpha1.ProxyService{Type: corev1.ServiceTypeClusterIP, Annotations: map[string]string{
			"lb.example.com/internal": "true", "lb.example.com/idle-timeout": "60"}},
		GatewayOverrides: class.GatewayOverrides,
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("effective ProxyConfig\n got %+v\nwant %+v", got, want)
	}
	if c := apimeta.FindStatusCondition(gatewayStatusOf(t, r).Conditions, string(gwv1.GatewayConditionAccepted)); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Accepted = %+v", c)
	}
}

func TestGatewayProxyConfigBounds(t *testing.T) {
	lb := func(class *v1alpha1.ProxyConfigSpec) *v1alpha1.ProxyConfigSpec { return class }
	overrides := func(o v1alpha1.GatewayOverrides) *v1alpha1.ProxyConfigSpec {
		return &v1alpha1.ProxyConfigSpec{GatewayOverrides: &o}
	}
	cases := []struct {
		name  string
		class *v1alpha1.ProxyConfigSpec
		own   v1alpha1.ProxyConfigSpec
		// refused names the field in the message; "" means accepted.
		refused string
	}{
		{"defaults: replicas, resources, log level", nil, v1alpha1.ProxyConfigSpec{Replicas: ptr[int32](9), LogLevel: "debug",
			Resources: &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}, ""},
		{"defaults: address from ClusterIP", nil, v1alpha1.ProxyConfigSpec{Service: v1alpha1.ProxyService{Type: corev1.ServiceTypeClusterIP, AddressFromClusterIP: true}}, ""},
		{"defaults: no image", nil, v1alpha1.ProxyConfigSpec{Image: "evil/envoy"}, "spec.image"},
		{"defaults: the default image is no override", nil, v1alpha1.ProxyConfigSpec{Image: v1alpha1.DefaultEnvoyImage}, ""},
		{"defaults: no service annotations", nil, v1alpha1.ProxyConfigSpec{Service: v1alpha1.ProxyService{Annotations: map[string]string{"a": "b"}}}, "spec.service.annotations"},
		{"the class's own annotation value is no override", lb(&v1alpha1.ProxyConfigSpec{Service: v1alpha1.ProxyService{Annotations: map[string]string{"a": "b"}}}),
			v1alpha1.ProxyConfigSpec{Service: v1alpha1.ProxyService{Annotations: map[string]string{"a": "b"}}}, ""},
		{"a changed annotation value is", lb(&v1alpha1.ProxyConfigSpec{Service: v1alpha1.ProxyService{Annotations: map[string]string{"a": "b"}}}),
			v1alpha1.ProxyConfigSpec{Service: v1alpha1.ProxyService{Annotations: map[string]string{"a": "c"}}}, `annotation "a"`},
		{"narrower Service type", lb(&v1alpha1.ProxyConfigSpec{Service: v1alpha1.ProxyService{Type: corev1.ServiceTypeNodePort}}),
			v1alpha1.ProxyConfigSpec{Service: v1alpha1.ProxyService{Type: corev1.ServiceTypeClusterIP}}, ""},
		{"wider Service type", lb(&v1alpha1.ProxyConfigSpec{Service: v1alpha1.ProxyService{Type: corev1.ServiceTypeNodePort}}),
			v1alpha1.ProxyConfigSpec{Service: v1alpha1.ProxyService{Type: corev1.ServiceTypeLoadBalancer}}, "spec.service.type LoadBalancer exposes the proxies more than the class's NodePort"},
		{"wider Service type, allowed", overrides(v1alpha1.GatewayOverrides{Fields: []v1alpha1.OverridableField{v1alpha1.OverrideServiceType}}),
			v1alpha1.ProxyConfigSpec{Service: v1alpha1.ProxyService{Type: corev1.ServiceTypeNodePort}}, ""},
		{"nothing overridable", overrides(v1alpha1.GatewayOverrides{}), v1alpha1.ProxyConfigSpec{LogLevel: "debug"}, "spec.logLevel"},
		{"nothing overridable, default repeated", overrides(v1alpha1.GatewayOverrides{}), v1alpha1.ProxyConfigSpec{LogLevel: "info", Replicas: ptr[int32](2)}, ""},
		{"any image", overrides(v1alpha1.GatewayOverrides{Fields: []v1alpha1.OverridableField{v1alpha1.OverrideImage}}),
			v1alpha1.ProxyConfigSpec{Image: "anything/at:all"}, ""},
		{"image from an allowed repository", overrides(v1alpha1.GatewayOverrides{Fields: []v1alpha1.OverridableField{v1alpha1.OverrideImage}, Images: []string{"reg.example.com/"}}),
			v1alpha1.ProxyConfigSpec{Image: "reg.example.com/envoy:v2"}, ""},
		{"image with an allowed prefix that is no registry", overrides(v1alpha1.GatewayOverrides{Fields: []v1alpha1.OverridableField{v1alpha1.OverrideImage}, Images: []string{"reg.example.com/"}}),
			v1alpha1.ProxyConfigSpec{Image: "reg.example.com.evil/envoy:v2"}, "is not among the allowed images"},
		{"an entry without a trailing separator matches exactly", overrides(v1alpha1.GatewayOverrides{Fields: []v1alpha1.OverridableField{v1alpha1.OverrideImage}, Images: []string{"reg.example.com/envoy"}}),
			v1alpha1.ProxyConfigSpec{Image: "reg.example.com/envoy-evil"}, "is not among the allowed images"},
		{"replicas within the maximum", overrides(v1alpha1.GatewayOverrides{Fields: []v1alpha1.OverridableField{v1alpha1.OverrideReplicas}, MaxReplicas: ptr[int32](4)}),
			v1alpha1.ProxyConfigSpec{Replicas: ptr[int32](4)}, ""},
		{"replicas over the maximum", overrides(v1alpha1.GatewayOverrides{Fields: []v1alpha1.OverridableField{v1alpha1.OverrideReplicas}, MaxReplicas: ptr[int32](4)}),
			v1alpha1.ProxyConfigSpec{Replicas: ptr[int32](5)}, "spec.replicas 5 exceeds the maximum of 4"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Translate(boundsSnapshot(tc.class, tc.own), Options{ControllerName: DefaultControllerName})
			c := apimeta.FindStatusCondition(gatewayStatusOf(t, r).Conditions, string(gwv1.GatewayConditionAccepted))
			if tc.refused == "" {
				if c == nil || c.Status != metav1.ConditionTrue {
					t.Fatalf("Accepted = %+v, want True", c)
				}
				return
			}
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.GatewayReasonInvalidParameters) ||
				!strings.Contains(c.Message, tc.refused) || !strings.Contains(c.Message, "ProxyConfig ns/own") {
				t.Fatalf("Accepted = %+v, want False/InvalidParameters naming %q and the ProxyConfig", c, tc.refused)
			}
			// A refused Gateway gets no configuration, and its proxies
			// the class's ProxyConfig, none of its own.
			if len(r.Gateways) != 0 {
				t.Errorf("a refused Gateway has IR")
			}
			want := v1alpha1.ProxyConfigSpec{}
			if tc.class != nil {
				want = *tc.class
			}
			if len(r.Infra) != 1 || !equality.Semantic.DeepEqual(r.Infra[0].Proxy, want) {
				t.Errorf("infra specs %+v, want the class's ProxyConfig %+v", r.Infra, want)
			}
		})
	}
}
