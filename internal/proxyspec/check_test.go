package proxyspec

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/portico-dev/portico/api/v1alpha1"
)

// CheckProxyConfig names the offending field of each refused spec and
// accepts the edges of what it allows.
func TestCheckProxyConfig(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	cases := []struct {
		name    string
		spec    v1alpha1.ProxyConfigSpec
		refused string // "" means accepted
	}{
		{"defaults", v1alpha1.ProxyConfigSpec{}, ""},
		{"maxReplicas 0", v1alpha1.ProxyConfigSpec{Autoscaling: &v1alpha1.ProxyAutoscaling{MaxReplicas: 0}}, "spec.autoscaling.maxReplicas 0"},
		{"minReplicas above max", v1alpha1.ProxyConfigSpec{Autoscaling: &v1alpha1.ProxyAutoscaling{MinReplicas: ptr.To[int32](4), MaxReplicas: 3}}, "minReplicas 4 exceeds maxReplicas 3"},
		{"max below the default min", v1alpha1.ProxyConfigSpec{Autoscaling: &v1alpha1.ProxyAutoscaling{MaxReplicas: 1}}, "(unset: 2)"},
		{"min 1, max 1", v1alpha1.ProxyConfigSpec{Autoscaling: &v1alpha1.ProxyAutoscaling{MinReplicas: ptr.To[int32](1), MaxReplicas: 1}}, ""},
		{"CPU target 0", v1alpha1.ProxyConfigSpec{Autoscaling: &v1alpha1.ProxyAutoscaling{MaxReplicas: 3, TargetCPUUtilizationPercentage: ptr.To[int32](0)}}, "targetCPUUtilizationPercentage 0"},
		{"both budgets", v1alpha1.ProxyConfigSpec{PodDisruptionBudget: &v1alpha1.ProxyDisruptionBudget{MinAvailable: pct("50%"), MaxUnavailable: pct("50%")}}, "sets both"},
		{"budget above 100%", v1alpha1.ProxyConfigSpec{PodDisruptionBudget: &v1alpha1.ProxyDisruptionBudget{MaxUnavailable: pct("101%")}}, "spec.podDisruptionBudget.maxUnavailable"},
		{"budget 100%", v1alpha1.ProxyConfigSpec{PodDisruptionBudget: &v1alpha1.ProxyDisruptionBudget{MaxUnavailable: pct("100%")}}, ""},
		{"node selector", v1alpha1.ProxyConfigSpec{Placement: &v1alpha1.ProxyPlacement{NodeSelector: map[string]string{"a b": "c"}}}, "spec.placement.nodeSelector"},
		{"priority class", v1alpha1.ProxyConfigSpec{Placement: &v1alpha1.ProxyPlacement{PriorityClassName: "Not_DNS"}}, "spec.placement.priorityClassName"},
		{"pod annotation", v1alpha1.ProxyConfigSpec{Pod: &v1alpha1.ProxyPod{Annotations: map[string]string{"/x": "y"}}}, "spec.pod.annotations"},
		{"drain timeout 0", v1alpha1.ProxyConfigSpec{Shutdown: &v1alpha1.ProxyShutdown{DrainTimeout: dur(0)}}, "spec.shutdown.drainTimeout"},
		{"min drain above the default timeout", v1alpha1.ProxyConfigSpec{Shutdown: &v1alpha1.ProxyShutdown{MinDrainDuration: dur(DefaultDrainTimeout + time.Second)}}, "exceeds drainTimeout 1m0s"},
		{"metrics on a privileged port", v1alpha1.ProxyConfigSpec{Metrics: &v1alpha1.ProxyMetrics{Port: ptr.To[int32](80)}}, "spec.metrics.port 80"},
		{"metrics on the readiness port", v1alpha1.ProxyConfigSpec{Metrics: &v1alpha1.ProxyMetrics{Port: ptr.To(ReadyPort)}}, "is reserved: the proxy Pods use 19001, 19002, 19003"},
		{"disabled metrics keep their port unchecked", v1alpha1.ProxyConfigSpec{Metrics: &v1alpha1.ProxyMetrics{Disabled: true, Port: ptr.To(AdminPort)}}, ""},
	}
	for _, tc := range cases {
		err := CheckProxyConfig(tc.spec)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.refused)
		}
	}
}

// The defaults that a spec's unset fields take, and the ports it reserves.
func TestDefaults(t *testing.T) {
	if p, ok := MetricsPort(v1alpha1.ProxyConfigSpec{}); !ok || p != DefaultMetricsPort {
		t.Errorf("MetricsPort of defaults = %d, %v", p, ok)
	}
	if _, ok := MetricsPort(v1alpha1.ProxyConfigSpec{Metrics: &v1alpha1.ProxyMetrics{Disabled: true}}); ok {
		t.Error("disabled metrics have a port")
	}
	short := v1alpha1.ProxyConfigSpec{Shutdown: &v1alpha1.ProxyShutdown{DrainTimeout: dur(2 * time.Second)}}
	if DrainTimeout(short) != 2*time.Second || MinDrainDuration(short) != 2*time.Second {
		t.Errorf("drain %s, min %s: the minimum must not exceed the timeout", DrainTimeout(short), MinDrainDuration(short))
	}
	if minA, maxU := DisruptionBudget(v1alpha1.ProxyConfigSpec{}); minA != nil || maxU == nil || maxU.IntValue() != 1 {
		t.Errorf("default budget = %v, %v, want maxUnavailable 1", minA, maxU)
	}
	if cpu, mem := AutoscalingTargets(&v1alpha1.ProxyAutoscaling{MaxReplicas: 3}); cpu == nil || *cpu != DefaultTargetCPUUtilization || mem != nil {
		t.Errorf("default targets = %v, %v", cpu, mem)
	}
	if got := Ports([]uint32{443, 0, 80, 443, 70000}); len(got) != 2 || got[0] != 80 || got[1] != 443 {
		t.Errorf("Ports = %v, want [80 443]", got)
	}
}

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
