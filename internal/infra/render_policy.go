package infra

import (
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	autoscalingv2ac "k8s.io/client-go/applyconfigurations/autoscaling/v2"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/proxyspec"
)

// disruptionBudget is the proxies' PodDisruptionBudget (see
// proxyspec.DisruptionBudget). Pods that are not Ready may always be evicted
// (unhealthyPodEvictionPolicy AlwaysAllow): a proxy that serves nothing
// must not block a node's drain.
func disruptionBudget(name, ns string, meta renderedMeta, selector map[string]string, pc v1alpha1.ProxyConfigSpec) (*policyv1ac.PodDisruptionBudgetApplyConfiguration, error) {
	minAvailable, maxUnavailable := proxyspec.DisruptionBudget(pc)
	if minAvailable != nil && maxUnavailable != nil {
		return nil, errors.New("infra: podDisruptionBudget sets both minAvailable and maxUnavailable")
	}
	spec := policyv1ac.PodDisruptionBudgetSpec().
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(selector)).
		WithUnhealthyPodEvictionPolicy(policyv1.AlwaysAllow)
	if minAvailable != nil {
		if err := proxyspec.CheckIntOrPercent(*minAvailable); err != nil {
			return nil, fmt.Errorf("infra: podDisruptionBudget.minAvailable: %w", err)
		}
		spec.WithMinAvailable(*minAvailable)
	} else {
		if err := proxyspec.CheckIntOrPercent(*maxUnavailable); err != nil {
			return nil, fmt.Errorf("infra: podDisruptionBudget.maxUnavailable: %w", err)
		}
		spec.WithMaxUnavailable(*maxUnavailable)
	}
	return policyv1ac.PodDisruptionBudget(name, ns).
		WithLabels(meta.labels).WithAnnotations(meta.annotations).WithOwnerReferences(meta.owner).
		WithSpec(spec), nil
}

// autoscaler is the proxies' HorizontalPodAutoscaler, nil without
// autoscaling: it scales the Deployment between minReplicas and
// maxReplicas on the Envoy container's utilization of its CPU and memory
// requests (ContainerResource metrics: the shutdown-manager's usage does
// not dilute Envoy's).
func autoscaler(name, ns string, meta renderedMeta, pc v1alpha1.ProxyConfigSpec) (*autoscalingv2ac.HorizontalPodAutoscalerApplyConfiguration, error) {
	a := pc.Autoscaling
	if a == nil {
		return nil, nil
	}
	minReplicas := proxyspec.AutoscalingMinReplicas(a)
	if a.MaxReplicas < 1 || minReplicas < 1 || minReplicas > a.MaxReplicas {
		return nil, fmt.Errorf("infra: autoscaling: minReplicas %d and maxReplicas %d: want 1 ≤ minReplicas ≤ maxReplicas", minReplicas, a.MaxReplicas)
	}
	spec := autoscalingv2ac.HorizontalPodAutoscalerSpec().
		WithScaleTargetRef(autoscalingv2ac.CrossVersionObjectReference().
			WithAPIVersion(appsv1.SchemeGroupVersion.String()).WithKind("Deployment").WithName(name)).
		WithMinReplicas(minReplicas).
		WithMaxReplicas(a.MaxReplicas)
	metric := func(res corev1.ResourceName, percent int32) *autoscalingv2ac.MetricSpecApplyConfiguration {
		return autoscalingv2ac.MetricSpec().
			WithType(autoscalingv2.ContainerResourceMetricSourceType).
			WithContainerResource(autoscalingv2ac.ContainerResourceMetricSource().
				WithName(res).WithContainer(EnvoyContainerName).
				WithTarget(autoscalingv2ac.MetricTarget().
					WithType(autoscalingv2.UtilizationMetricType).WithAverageUtilization(percent)))
	}
	cpu, memory := proxyspec.AutoscalingTargets(a)
	if cpu != nil {
		spec.WithMetrics(metric(corev1.ResourceCPU, *cpu))
	}
	if memory != nil {
		spec.WithMetrics(metric(corev1.ResourceMemory, *memory))
	}
	return autoscalingv2ac.HorizontalPodAutoscaler(name, ns).
		WithLabels(meta.labels).WithAnnotations(meta.annotations).WithOwnerReferences(meta.owner).
		WithSpec(spec), nil
}
