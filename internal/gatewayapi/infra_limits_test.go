package gatewayapi

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/infra"
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

		// The fields replaced whole.
		{"defaults: autoscaling, access log", nil, v1alpha1.ProxyConfigSpec{Autoscaling: &v1alpha1.ProxyAutoscaling{MaxReplicas: 8},
			AccessLog: &v1alpha1.ProxyAccessLog{Format: v1alpha1.AccessLogText}}, ""},
		{"defaults: no budget", nil, v1alpha1.ProxyConfigSpec{PodDisruptionBudget: &v1alpha1.ProxyDisruptionBudget{MaxUnavailable: ptr(intstr.FromInt32(2))}}, "spec.podDisruptionBudget may not be overridden"},
		{"defaults: no placement", nil, v1alpha1.ProxyConfigSpec{Placement: &v1alpha1.ProxyPlacement{NodeSelector: map[string]string{"pool": "edge"}}}, "spec.placement may not be overridden"},
		{"defaults: no pod metadata", nil, v1alpha1.ProxyConfigSpec{Pod: &v1alpha1.ProxyPod{Labels: map[string]string{"team": "a"}}}, "spec.pod may not be overridden"},
		{"defaults: no shutdown", nil, v1alpha1.ProxyConfigSpec{Shutdown: &v1alpha1.ProxyShutdown{DrainTimeout: &metav1.Duration{Duration: time.Hour}}}, "spec.shutdown may not be overridden"},
		{"defaults: no metrics", nil, v1alpha1.ProxyConfigSpec{Metrics: &v1alpha1.ProxyMetrics{Disabled: true}}, "spec.metrics may not be overridden"},
		{"defaults: no timeouts", nil, v1alpha1.ProxyConfigSpec{Timeouts: &v1alpha1.ProxyTimeouts{StreamIdle: &metav1.Duration{Duration: time.Hour}}}, "spec.timeouts may not be overridden"},
		{"defaults: no circuit breakers", nil, v1alpha1.ProxyConfigSpec{CircuitBreakers: &v1alpha1.ProxyCircuitBreakers{MaxConnections: ptr[int32](1 << 20)}}, "spec.circuitBreakers may not be overridden"},
		{"defaults: no overload", nil, v1alpha1.ProxyConfigSpec{Overload: &v1alpha1.ProxyOverload{MaxHeapPercent: ptr[int32](100)}}, "spec.overload may not be overridden"},
		{"defaults: the message lists autoscaling and accessLog", nil, v1alpha1.ProxyConfigSpec{Overload: &v1alpha1.ProxyOverload{MaxHeapPercent: ptr[int32](100)}},
			"(Gateways of the class may override: replicas, resources, logLevel, service.addressFromClusterIP, autoscaling, accessLog)"},
		{"an empty value is no override", nil, v1alpha1.ProxyConfigSpec{Placement: &v1alpha1.ProxyPlacement{}, Pod: &v1alpha1.ProxyPod{Labels: map[string]string{}}}, ""},
		{"the class's placement repeated is no override", lb(&v1alpha1.ProxyConfigSpec{GatewayOverrides: &v1alpha1.GatewayOverrides{},
			Placement: &v1alpha1.ProxyPlacement{NodeSelector: map[string]string{"pool": "edge"}, PriorityClassName: "gateways"}}),
			v1alpha1.ProxyConfigSpec{Placement: &v1alpha1.ProxyPlacement{NodeSelector: map[string]string{"pool": "edge"}, PriorityClassName: "gateways"}}, ""},
		{"the class's autoscaling repeated is no override", lb(&v1alpha1.ProxyConfigSpec{GatewayOverrides: &v1alpha1.GatewayOverrides{},
			Autoscaling: &v1alpha1.ProxyAutoscaling{MaxReplicas: 10}}),
			v1alpha1.ProxyConfigSpec{Autoscaling: &v1alpha1.ProxyAutoscaling{MaxReplicas: 10}}, ""},
		{"an empty value overrides the class's", lb(&v1alpha1.ProxyConfigSpec{GatewayOverrides: &v1alpha1.GatewayOverrides{},
			Metrics: &v1alpha1.ProxyMetrics{Port: ptr[int32](20000)}}),
			v1alpha1.ProxyConfigSpec{Metrics: &v1alpha1.ProxyMetrics{}}, "spec.metrics may not be overridden"},
		{"placement, allowed", overrides(v1alpha1.GatewayOverrides{Fields: []v1alpha1.OverridableField{v1alpha1.OverridePlacement}}),
			v1alpha1.ProxyConfigSpec{Placement: &v1alpha1.ProxyPlacement{NodeSelector: map[string]string{"pool": "edge"}}}, ""},
		{"autoscaling not listed", overrides(v1alpha1.GatewayOverrides{Fields: []v1alpha1.OverridableField{v1alpha1.OverrideReplicas}}),
			v1alpha1.ProxyConfigSpec{Autoscaling: &v1alpha1.ProxyAutoscaling{MaxReplicas: 3}}, "spec.autoscaling may not be overridden"},
		{"autoscaling within the maximum", overrides(v1alpha1.GatewayOverrides{Fields: []v1alpha1.OverridableField{v1alpha1.OverrideAutoscaling}, MaxReplicas: ptr[int32](4)}),
			v1alpha1.ProxyConfigSpec{Autoscaling: &v1alpha1.ProxyAutoscaling{MinReplicas: ptr[int32](4), MaxReplicas: 4}}, ""},
		{"autoscaling over the maximum", overrides(v1alpha1.GatewayOverrides{Fields: []v1alpha1.OverridableField{v1alpha1.OverrideAutoscaling}, MaxReplicas: ptr[int32](4)}),
			v1alpha1.ProxyConfigSpec{Autoscaling: &v1alpha1.ProxyAutoscaling{MaxReplicas: 5}}, "spec.autoscaling.maxReplicas 5 exceeds the maximum of 4 (gatewayOverrides.maxReplicas"},
		{"content before bounds", nil, v1alpha1.ProxyConfigSpec{Metrics: &v1alpha1.ProxyMetrics{Port: ptr[int32](19001)}}, "spec.metrics.port 19001 is reserved"},
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

// The fields replaced whole: a Gateway's value replaces its class's; the
// fields it leaves unset, or sets to the class's value, are the class's.
func TestGatewayProxyConfigReplacesWholeFields(t *testing.T) {
	classMetrics := &v1alpha1.ProxyMetrics{Port: ptr[int32](20000)}
	class := &v1alpha1.ProxyConfigSpec{
		Replicas:            ptr[int32](3),
		PodDisruptionBudget: &v1alpha1.ProxyDisruptionBudget{MinAvailable: ptr(intstr.FromString("50%"))},
		Shutdown:            &v1alpha1.ProxyShutdown{DrainTimeout: &metav1.Duration{Duration: 30 * time.Second}},
		Metrics:             classMetrics,
		Placement:           &v1alpha1.ProxyPlacement{PriorityClassName: "gateways"},
		GatewayOverrides: &v1alpha1.GatewayOverrides{MaxReplicas: ptr[int32](6), Fields: []v1alpha1.OverridableField{
			v1alpha1.OverrideAutoscaling, v1alpha1.OverrideDisruptionBudget, v1alpha1.OverrideShutdown}},
	}
	own := v1alpha1.ProxyConfigSpec{
		Autoscaling:         &v1alpha1.ProxyAutoscaling{MinReplicas: ptr[int32](3), MaxReplicas: 6, TargetMemoryUtilizationPercentage: ptr[int32](70)},
		PodDisruptionBudget: &v1alpha1.ProxyDisruptionBudget{MaxUnavailable: ptr(intstr.FromInt32(2))},
		// The whole field: drainTimeout is the default again.
		Shutdown: &v1alpha1.ProxyShutdown{MinDrainDuration: &metav1.Duration{Duration: 10 * time.Second}},
		// Repeated: no override, although metrics are not overridable.
		Metrics: &v1alpha1.ProxyMetrics{Port: ptr[int32](20000)},
	}
	r := Translate(boundsSnapshot(class, own), Options{ControllerName: DefaultControllerName})
	if c := apimeta.FindStatusCondition(gatewayStatusOf(t, r).Conditions, string(gwv1.GatewayConditionAccepted)); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Accepted = %+v", c)
	}
	want := *class.DeepCopy()
	want.Autoscaling, want.PodDisruptionBudget, want.Shutdown = own.Autoscaling, own.PodDisruptionBudget, own.Shutdown
	if len(r.Infra) != 1 || !equality.Semantic.DeepEqual(r.Infra[0].Proxy, want) {
		t.Fatalf("effective ProxyConfig\n got %+v\nwant %+v", r.Infra, want)
	}
	if r.Infra[0].Proxy.Autoscaling == own.Autoscaling || r.Infra[0].Proxy.Metrics == classMetrics {
		t.Error("the effective spec shares values with the inputs")
	}
}

// contentCases are ProxyConfig specs whose values Portico cannot render as
// written (refused names the field and the problem), and some it can.
var contentCases = []struct {
	name    string
	spec    v1alpha1.ProxyConfigSpec
	refused string
}{
	{"autoscaling", v1alpha1.ProxyConfigSpec{Autoscaling: &v1alpha1.ProxyAutoscaling{MinReplicas: ptr[int32](1), MaxReplicas: 1, TargetCPUUtilizationPercentage: ptr[int32](50)}}, ""},
	{"autoscaling minReplicas over maxReplicas", v1alpha1.ProxyConfigSpec{Autoscaling: &v1alpha1.ProxyAutoscaling{MinReplicas: ptr[int32](5), MaxReplicas: 3}},
		"spec.autoscaling.minReplicas 5 exceeds maxReplicas 3"},
	{"autoscaling default minReplicas over maxReplicas", v1alpha1.ProxyConfigSpec{Autoscaling: &v1alpha1.ProxyAutoscaling{MaxReplicas: 1}},
		"spec.autoscaling.maxReplicas 1 is less than minReplicas (unset: 2)"},
	{"autoscaling no maxReplicas", v1alpha1.ProxyConfigSpec{Autoscaling: &v1alpha1.ProxyAutoscaling{}}, "spec.autoscaling.maxReplicas 0 is less than 1"},
	{"autoscaling minReplicas 0", v1alpha1.ProxyConfigSpec{Autoscaling: &v1alpha1.ProxyAutoscaling{MinReplicas: ptr[int32](0), MaxReplicas: 2}}, "spec.autoscaling.minReplicas 0 is less than 1"},
	{"autoscaling target 0", v1alpha1.ProxyConfigSpec{Autoscaling: &v1alpha1.ProxyAutoscaling{MaxReplicas: 2, TargetMemoryUtilizationPercentage: ptr[int32](0)}},
		"spec.autoscaling.targetMemoryUtilizationPercentage 0 is less than 1"},
	{"budget percentage", v1alpha1.ProxyConfigSpec{PodDisruptionBudget: &v1alpha1.ProxyDisruptionBudget{MinAvailable: ptr(intstr.FromString("50%"))}}, ""},
	{"budget with both", v1alpha1.ProxyConfigSpec{PodDisruptionBudget: &v1alpha1.ProxyDisruptionBudget{MinAvailable: ptr(intstr.FromInt32(1)), MaxUnavailable: ptr(intstr.FromInt32(1))}},
		"spec.podDisruptionBudget sets both minAvailable and maxUnavailable"},
	{"budget malformed percentage", v1alpha1.ProxyConfigSpec{PodDisruptionBudget: &v1alpha1.ProxyDisruptionBudget{MaxUnavailable: ptr(intstr.FromString("half"))}},
		`spec.podDisruptionBudget.maxUnavailable: "half" is neither an integer nor a percentage`},
	{"budget over 100%", v1alpha1.ProxyConfigSpec{PodDisruptionBudget: &v1alpha1.ProxyDisruptionBudget{MinAvailable: ptr(intstr.FromString("150%"))}},
		`spec.podDisruptionBudget.minAvailable: "150%" is more than 100%`},
	{"budget negative", v1alpha1.ProxyConfigSpec{PodDisruptionBudget: &v1alpha1.ProxyDisruptionBudget{MaxUnavailable: ptr(intstr.FromInt32(-1))}},
		"spec.podDisruptionBudget.maxUnavailable: -1 is negative"},
	{"metrics port", v1alpha1.ProxyConfigSpec{Metrics: &v1alpha1.ProxyMetrics{Port: ptr[int32](9102)}}, ""},
	{"metrics on the admin port", v1alpha1.ProxyConfigSpec{Metrics: &v1alpha1.ProxyMetrics{Port: ptr[int32](19001)}}, "spec.metrics.port 19001 is reserved"},
	{"metrics on the readiness port", v1alpha1.ProxyConfigSpec{Metrics: &v1alpha1.ProxyMetrics{Port: ptr[int32](19002)}}, "spec.metrics.port 19002 is reserved"},
	{"metrics on the agent port", v1alpha1.ProxyConfigSpec{Metrics: &v1alpha1.ProxyMetrics{Port: ptr[int32](19003)}}, "spec.metrics.port 19003 is reserved"},
	{"metrics disabled, port unused", v1alpha1.ProxyConfigSpec{Metrics: &v1alpha1.ProxyMetrics{Port: ptr[int32](19001), Disabled: true}}, ""},
	{"metrics on a privileged port", v1alpha1.ProxyConfigSpec{Metrics: &v1alpha1.ProxyMetrics{Port: ptr[int32](80)}}, "spec.metrics.port 80 is not between 1024 and 65535"},
	{"shutdown", v1alpha1.ProxyConfigSpec{Shutdown: &v1alpha1.ProxyShutdown{DrainTimeout: &metav1.Duration{Duration: 10 * time.Second}, MinDrainDuration: &metav1.Duration{Duration: 10 * time.Second}}}, ""},
	{"shutdown minimum over the timeout", v1alpha1.ProxyConfigSpec{Shutdown: &v1alpha1.ProxyShutdown{DrainTimeout: &metav1.Duration{Duration: 10 * time.Second}, MinDrainDuration: &metav1.Duration{Duration: 20 * time.Second}}},
		"spec.shutdown.minDrainDuration 20s exceeds drainTimeout 10s"},
	{"shutdown minimum over the default timeout", v1alpha1.ProxyConfigSpec{Shutdown: &v1alpha1.ProxyShutdown{MinDrainDuration: &metav1.Duration{Duration: 2 * time.Minute}}},
		"spec.shutdown.minDrainDuration 2m0s exceeds drainTimeout 1m0s"},
	{"shutdown negative timeout", v1alpha1.ProxyConfigSpec{Shutdown: &v1alpha1.ProxyShutdown{DrainTimeout: &metav1.Duration{Duration: -time.Second}}}, "spec.shutdown.drainTimeout -1s is not positive"},
	{"shutdown zero timeout", v1alpha1.ProxyConfigSpec{Shutdown: &v1alpha1.ProxyShutdown{DrainTimeout: &metav1.Duration{}}}, "spec.shutdown.drainTimeout 0s is not positive"},
	{"shutdown negative minimum", v1alpha1.ProxyConfigSpec{Shutdown: &v1alpha1.ProxyShutdown{MinDrainDuration: &metav1.Duration{Duration: -time.Second}}}, "spec.shutdown.minDrainDuration -1s is negative"},
	{"pod metadata", v1alpha1.ProxyConfigSpec{Pod: &v1alpha1.ProxyPod{Labels: map[string]string{"example.com/team": "edge"}, Annotations: map[string]string{"example.com/note": "any value: at all"}}}, ""},
	{"pod label key", v1alpha1.ProxyConfigSpec{Pod: &v1alpha1.ProxyPod{Labels: map[string]string{"bad key": "v"}}}, `spec.pod.labels: Invalid value: "bad key"`},
	{"pod label value", v1alpha1.ProxyConfigSpec{Pod: &v1alpha1.ProxyPod{Labels: map[string]string{"team": "no spaces"}}}, `spec.pod.labels: Invalid value: "no spaces"`},
	{"pod annotation key", v1alpha1.ProxyConfigSpec{Pod: &v1alpha1.ProxyPod{Annotations: map[string]string{"a/b/c": "v"}}}, `spec.pod.annotations: Invalid value: "a/b/c"`},
	{"node selector", v1alpha1.ProxyConfigSpec{Placement: &v1alpha1.ProxyPlacement{NodeSelector: map[string]string{"pool": "edge nodes"}}}, `spec.placement.nodeSelector: Invalid value: "edge nodes"`},
	{"priority class", v1alpha1.ProxyConfigSpec{Placement: &v1alpha1.ProxyPlacement{PriorityClassName: "Gateways_High"}}, `spec.placement.priorityClassName "Gateways_High"`},
}

// An invalid class ProxyConfig makes the class Accepted=False
// (InvalidParameters) naming the field, and its Gateways Invalid; their
// proxies keep the class's spec (never the defaults). A valid one renders.
func TestClassProxyConfigContent(t *testing.T) {
	for _, tc := range contentCases {
		t.Run(tc.name, func(t *testing.T) {
			s := res.New()
			s.ProxyConfigs.Set(res.Key{Namespace: "admin", Name: "class"}, &v1alpha1.ProxyConfig{
				ObjectMeta: metav1.ObjectMeta{Namespace: "admin", Name: "class"}, Spec: tc.spec})
			s.GatewayClasses.Set("portico", &gwv1.GatewayClass{
				ObjectMeta: metav1.ObjectMeta{Name: "portico"},
				Spec: gwv1.GatewayClassSpec{ControllerName: DefaultControllerName, ParametersRef: &gwv1.ParametersReference{
					Group: "portico.dev", Kind: "ProxyConfig", Name: "class", Namespace: ptr(gwv1.Namespace("admin"))}},
			})
			s.Gateways.Set(res.Key{Namespace: "ns", Name: "edge"}, &gwv1.Gateway{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "edge", Generation: 1},
				Spec: gwv1.GatewaySpec{GatewayClassName: "portico",
					Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}},
			})
			r := Translate(s.Build(), Options{ControllerName: DefaultControllerName})
			var class *gwv1.GatewayClassStatus
			for _, st := range r.Statuses {
				if st.Kind == res.KindGatewayClass {
					class = st.GatewayClass
				}
			}
			if class == nil {
				t.Fatal("no GatewayClass status")
			}
			cc := apimeta.FindStatusCondition(class.Conditions, string(gwv1.GatewayClassConditionStatusAccepted))
			gc := apimeta.FindStatusCondition(gatewayStatusOf(t, r).Conditions, string(gwv1.GatewayConditionAccepted))
			if len(r.Infra) != 1 || !equality.Semantic.DeepEqual(r.Infra[0].Proxy, tc.spec) {
				t.Fatalf("infra specs %+v, want the class's ProxyConfig", r.Infra)
			}
			if tc.refused == "" {
				if cc == nil || cc.Status != metav1.ConditionTrue || gc == nil || gc.Status != metav1.ConditionTrue {
					t.Fatalf("class Accepted = %+v, Gateway Accepted = %+v, want True", cc, gc)
				}
				// What the translator accepts, the reconciler renders.
				if _, err := infra.RenderSpec(r.Infra[0], infra.Params{XDSAddress: "xds.example:18000", XDSServerName: "xds.example"}); err != nil {
					t.Fatalf("an accepted ProxyConfig does not render: %v", err)
				}
				return
			}
			if cc == nil || cc.Status != metav1.ConditionFalse || cc.Reason != string(gwv1.GatewayClassReasonInvalidParameters) ||
				!strings.Contains(cc.Message, tc.refused) || !strings.Contains(cc.Message, "ProxyConfig admin/class") {
				t.Fatalf("class Accepted = %+v, want False/InvalidParameters naming %q and the ProxyConfig", cc, tc.refused)
			}
			if gc == nil || gc.Status != metav1.ConditionFalse || gc.Reason != string(gwv1.GatewayReasonInvalid) {
				t.Errorf("Gateway Accepted = %+v, want False/Invalid", gc)
			}
		})
	}
}

// A Gateway's ProxyConfig with invalid content is refused before its
// bounds are considered (the message names the content), and its proxies
// get the class's ProxyConfig.
func TestGatewayProxyConfigContent(t *testing.T) {
	allFields := &v1alpha1.ProxyConfigSpec{GatewayOverrides: &v1alpha1.GatewayOverrides{Fields: []v1alpha1.OverridableField{
		v1alpha1.OverrideAutoscaling, v1alpha1.OverrideDisruptionBudget, v1alpha1.OverridePlacement, v1alpha1.OverridePod,
		v1alpha1.OverrideShutdown, v1alpha1.OverrideMetrics}}}
	for _, class := range []*v1alpha1.ProxyConfigSpec{nil, allFields} {
		for _, tc := range contentCases {
			if tc.refused == "" && class == nil {
				continue // not all overridable by default
			}
			t.Run(tc.name, func(t *testing.T) {
				r := Translate(boundsSnapshot(class, tc.spec), Options{ControllerName: DefaultControllerName})
				c := apimeta.FindStatusCondition(gatewayStatusOf(t, r).Conditions, string(gwv1.GatewayConditionAccepted))
				if tc.refused == "" {
					if c == nil || c.Status != metav1.ConditionTrue {
						t.Fatalf("Accepted = %+v, want True", c)
					}
					return
				}
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.GatewayReasonInvalidParameters) ||
					!strings.Contains(c.Message, tc.refused) || !strings.Contains(c.Message, "ProxyConfig ns/own") {
					t.Fatalf("Accepted = %+v, want False/InvalidParameters naming %q", c, tc.refused)
				}
				want := v1alpha1.ProxyConfigSpec{}
				if class != nil {
					want = *class
				}
				if len(r.Infra) != 1 || !equality.Semantic.DeepEqual(r.Infra[0].Proxy, want) {
					t.Errorf("infra specs %+v, want the class's ProxyConfig", r.Infra)
				}
			})
		}
	}
}

// The message of a spec with several invalid labels does not depend on
// map order: statuses are compared byte for byte.
func TestProxyContentMessageIsStable(t *testing.T) {
	spec := &v1alpha1.ProxyConfigSpec{Pod: &v1alpha1.ProxyPod{Labels: map[string]string{}}}
	for i := range 20 {
		spec.Pod.Labels[strings.Repeat("x", i)+" bad"] = "v"
	}
	first := checkProxyContent(spec)
	for range 50 {
		if got := checkProxyContent(spec); got != first {
			t.Fatalf("messages differ: %q and %q", first, got)
		}
	}
}
