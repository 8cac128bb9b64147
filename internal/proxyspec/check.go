package proxyspec

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/portico-dev/portico/api/v1alpha1"
)

// CheckProxyConfig checks the values of an effective ProxyConfig spec that
// infra.Render puts into the proxies' objects, and names the first offending
// field (in spec order): autoscaling bounds (1 ≤ minReplicas ≤
// maxReplicas, targets of at least 1%), a budget with at most one of
// minAvailable and maxUnavailable, each an integer or a percentage, valid
// node selector, priority class name and Pod labels and annotations, a
// positive drain timeout no shorter than the minimum drain, and a metrics
// port that is not reserved (ReservedPorts). The translator refuses a
// ProxyConfig that fails it, naming the field in the status, and the
// reconciler renders none (what runs stays): never a clamped value, nor
// objects the API server would refuse. The API's validation (the CRD)
// refuses some of these too, but not the relations between fields, and
// files are not validated at all. The access log, timeouts, circuit
// breakers and overload are the translator's to check (they go into the
// IR).
func CheckProxyConfig(pc v1alpha1.ProxyConfigSpec) error {
	if a := pc.Autoscaling; a != nil {
		switch {
		case a.MaxReplicas < 1:
			return fmt.Errorf("spec.autoscaling.maxReplicas %d is less than 1", a.MaxReplicas)
		case a.MinReplicas != nil && *a.MinReplicas < 1:
			return fmt.Errorf("spec.autoscaling.minReplicas %d is less than 1", *a.MinReplicas)
		case a.MinReplicas != nil && *a.MinReplicas > a.MaxReplicas:
			return fmt.Errorf("spec.autoscaling.minReplicas %d exceeds maxReplicas %d", *a.MinReplicas, a.MaxReplicas)
		case a.MinReplicas == nil && DefaultMinReplicas > a.MaxReplicas:
			return fmt.Errorf("spec.autoscaling.maxReplicas %d is less than minReplicas (unset: %d)", a.MaxReplicas, DefaultMinReplicas)
		}
		for _, t := range []struct {
			field string
			v     *int32
		}{{"targetCPUUtilizationPercentage", a.TargetCPUUtilizationPercentage}, {"targetMemoryUtilizationPercentage", a.TargetMemoryUtilizationPercentage}} {
			if t.v != nil && *t.v < 1 {
				return fmt.Errorf("spec.autoscaling.%s %d is less than 1", t.field, *t.v)
			}
		}
	}
	if b := pc.PodDisruptionBudget; b != nil {
		if b.MinAvailable != nil && b.MaxUnavailable != nil {
			return errors.New("spec.podDisruptionBudget sets both minAvailable and maxUnavailable: set at most one")
		}
		for _, v := range []struct {
			field string
			v     *intstr.IntOrString
		}{{"minAvailable", b.MinAvailable}, {"maxUnavailable", b.MaxUnavailable}} {
			if v.v == nil {
				continue
			}
			if err := CheckIntOrPercent(*v.v); err != nil {
				return fmt.Errorf("spec.podDisruptionBudget.%s: %w", v.field, err)
			}
		}
	}
	if p := pc.Placement; p != nil {
		if err := firstError(metav1validation.ValidateLabels(p.NodeSelector, field.NewPath("spec", "placement", "nodeSelector"))); err != nil {
			return err
		}
		if p.PriorityClassName != "" {
			if errs := validation.IsDNS1123Subdomain(p.PriorityClassName); len(errs) > 0 {
				return fmt.Errorf("spec.placement.priorityClassName %q: %s", p.PriorityClassName, errs[0])
			}
		}
	}
	if p := pc.Pod; p != nil {
		if err := firstError(metav1validation.ValidateLabels(p.Labels, field.NewPath("spec", "pod", "labels"))); err != nil {
			return err
		}
		if err := firstError(apivalidation.ValidateAnnotations(p.Annotations, field.NewPath("spec", "pod", "annotations"))); err != nil {
			return err
		}
	}
	if sd := pc.Shutdown; sd != nil {
		if d := sd.DrainTimeout; d != nil && d.Duration <= 0 {
			return fmt.Errorf("spec.shutdown.drainTimeout %s is not positive", d.Duration)
		}
		if d := sd.MinDrainDuration; d != nil {
			if d.Duration < 0 {
				return fmt.Errorf("spec.shutdown.minDrainDuration %s is negative", d.Duration)
			}
			if timeout := DrainTimeout(pc); d.Duration > timeout {
				return fmt.Errorf("spec.shutdown.minDrainDuration %s exceeds drainTimeout %s", d.Duration, timeout)
			}
		}
	}
	if m := pc.Metrics; m != nil && !m.Disabled && m.Port != nil {
		port := *m.Port
		switch {
		case port < 1024 || port > 65535:
			return fmt.Errorf("spec.metrics.port %d is not between 1024 and 65535", port)
		case slices.Contains(ReservedPorts(), port):
			return fmt.Errorf("spec.metrics.port %d is reserved: the proxy Pods use %s (Envoy's admin interface, readiness, shutdown manager)", port, joinPorts(ReservedPorts()))
		}
	}
	return nil
}

// firstError is the first of errs in a stable order (validation of a map
// reports in iteration order), or nil.
func firstError(errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return slices.MinFunc(errs, func(a, b *field.Error) int { return strings.Compare(a.Error(), b.Error()) })
}

func joinPorts(ports []int32) string {
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = strconv.Itoa(int(p))
	}
	return strings.Join(out, ", ")
}

// CheckIntOrPercent accepts what a PodDisruptionBudget accepts: an integer
// of at least 0, or a percentage from 0% to 100%.
func CheckIntOrPercent(v intstr.IntOrString) error {
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			return fmt.Errorf("%d is negative", v.IntVal)
		}
		return nil
	}
	digits, ok := strings.CutSuffix(v.StrVal, "%")
	n, err := strconv.Atoi(digits)
	if !ok || err != nil || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return fmt.Errorf("%q is neither an integer nor a percentage such as \"50%%\"", v.StrVal)
	}
	if n > 100 {
		return fmt.Errorf("%q is more than 100%%", v.StrVal)
	}
	return nil
}
