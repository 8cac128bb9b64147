package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/infra"
	"github.com/portico-dev/portico/internal/proxyspec"
)

// createAutoscaledGateway is createGatewayWith a ProxyConfig "proxies" that
// autoscales (minReplicas 2, maxReplicas 4; ClusterIP address: kwok has no
// load balancer), returned as created (with its UID).
func createAutoscaledGateway(t *testing.T, w world, name string) *gwv1.Gateway {
	t.Helper()
	gw := createGatewayWith(t, w, name, v1alpha1.ProxyConfigSpec{
		Autoscaling: &v1alpha1.ProxyAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 4},
		Service:     v1alpha1.ProxyService{Type: corev1.ServiceTypeClusterIP, AddressFromClusterIP: true},
	}, nil)
	if err := kubeClient().Get(ctxT(t), client.ObjectKeyFromObject(gw), gw); err != nil {
		t.Fatal(err)
	}
	return gw
}

// controlledBy checks that o is controlled by Gateway gw and applied by
// Portico's field manager.
func controlledBy(o client.Object, gw *gwv1.Gateway) error {
	refs := o.GetOwnerReferences()
	if len(refs) != 1 || refs[0].Kind != "Gateway" || refs[0].UID != gw.UID || !ptr.Deref(refs[0].Controller, false) {
		return fmt.Errorf("%T owner references = %+v, want the Gateway %s as controller", o, refs, gw.UID)
	}
	for _, mf := range o.GetManagedFields() {
		if mf.Manager == proxyspec.FieldManager && mf.Operation == metav1.ManagedFieldsOperationApply && mf.Subresource == "" {
			return nil
		}
	}
	return fmt.Errorf("%T not applied by %s", o, proxyspec.FieldManager)
}

// appliesReplicas reports whether Portico's apply of d owns spec.replicas.
func appliesReplicas(d *appsv1.Deployment) bool {
	for _, mf := range d.ManagedFields {
		if mf.Manager != proxyspec.FieldManager || mf.Operation != metav1.ManagedFieldsOperationApply || mf.Subresource != "" || mf.FieldsV1 == nil {
			continue
		}
		var set struct {
			Spec map[string]json.RawMessage `json:"f:spec"`
		}
		if json.Unmarshal(mf.FieldsV1.Raw, &set) == nil {
			if _, ok := set.Spec["f:replicas"]; ok {
				return true
			}
		}
	}
	return false
}

// gone checks that none of objs exists (by their keys).
func gone(t *testing.T, objs ...client.Object) error {
	for _, o := range objs {
		err := kubeClient().Get(ctxT(t), client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
		if err == nil {
			return fmt.Errorf("%T %s still exists", o, o.GetName())
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// An autoscaled Gateway's proxies get a PodDisruptionBudget (one Pod at a
// time, selecting the proxies, owned by the Gateway); Portico restores it
// when it is deleted or edited, and removes it with the Gateway.
func TestProxyDisruptionBudget(t *testing.T) {
	w := newWorld(t)
	startReplica(t, w, "solo")
	gw := createAutoscaledGateway(t, w, "edge")
	ctx := ctxT(t)
	c := kubeClient()
	key := types.NamespacedName{Namespace: w.ns, Name: proxyspec.Name(gw.Name)}

	var pdb policyv1.PodDisruptionBudget
	eventually(t, 60*time.Second, "the PodDisruptionBudget", func() error {
		if err := c.Get(ctx, key, &pdb); err != nil {
			return err
		}
		var dep appsv1.Deployment
		if err := c.Get(ctx, key, &dep); err != nil {
			return err
		}
		s := pdb.Spec
		switch {
		case s.MaxUnavailable == nil || *s.MaxUnavailable != intstr.FromInt32(1) || s.MinAvailable != nil:
			return fmt.Errorf("minAvailable %v, maxUnavailable %v, want maxUnavailable 1", s.MinAvailable, s.MaxUnavailable)
		case s.Selector == nil || len(s.Selector.MatchExpressions) > 0 || !maps.Equal(s.Selector.MatchLabels, proxyspec.Labels(w.ns, gw.Name)):
			return fmt.Errorf("selector %+v, want the proxy labels %v", s.Selector, proxyspec.Labels(w.ns, gw.Name))
		case dep.Spec.Selector == nil || !maps.Equal(s.Selector.MatchLabels, dep.Spec.Selector.MatchLabels):
			return fmt.Errorf("selector %+v, the Deployment's %+v", s.Selector, dep.Spec.Selector)
		case ptr.Deref(s.UnhealthyPodEvictionPolicy, "") != policyv1.AlwaysAllow:
			return fmt.Errorf("unhealthyPodEvictionPolicy %v, want AlwaysAllow", s.UnhealthyPodEvictionPolicy)
		}
		return controlledBy(&pdb, gw)
	})
	// The disruption controller counts the proxies it protects.
	eventually(t, 60*time.Second, "the budget to count the proxies", func() error {
		var b policyv1.PodDisruptionBudget
		if err := c.Get(ctx, key, &b); err != nil {
			return err
		}
		if b.Status.ExpectedPods < 1 {
			return fmt.Errorf("status %+v", b.Status)
		}
		return nil
	})

	// The autoscaler has scaled the Deployment (Portico re-applies then).
	eventually(t, 60*time.Second, "the autoscaler to scale the Deployment to 2", func() error {
		var d appsv1.Deployment
		if err := c.Get(ctx, key, &d); err != nil {
			return err
		}
		if r := ptr.Deref(d.Spec.Replicas, 0); r != 2 {
			return fmt.Errorf("replicas %d", r)
		}
		return nil
	})

	// A deleted budget is restored, and then an edited one: the first
	// may be restored by an apply for another reason (the autoscaler's
	// scaling of the Deployment); by the second nothing else is pending.
	if err := c.Delete(ctx, &pdb); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the PodDisruptionBudget restored", func() error {
		var b policyv1.PodDisruptionBudget
		if err := c.Get(ctx, key, &b); err != nil {
			return err
		}
		if b.UID == pdb.UID {
			return errors.New("still the deleted one")
		}
		return controlledBy(&b, gw)
	})
	// So is an edited one.
	eventually(t, 10*time.Second, "editing the PodDisruptionBudget", func() error {
		var b policyv1.PodDisruptionBudget
		if err := c.Get(ctx, key, &b); err != nil {
			return err
		}
		b.Spec.MaxUnavailable = ptr.To(intstr.FromString("100%"))
		return c.Update(ctx, &b) // a conflict is retried
	})
	eventually(t, 30*time.Second, "the PodDisruptionBudget's maxUnavailable restored", func() error {
		var b policyv1.PodDisruptionBudget
		if err := c.Get(ctx, key, &b); err != nil {
			return err
		}
		if b.Spec.MaxUnavailable == nil || *b.Spec.MaxUnavailable != intstr.FromInt32(1) {
			return fmt.Errorf("maxUnavailable %v", b.Spec.MaxUnavailable)
		}
		return nil
	})

	// The Gateway goes, and its budget and autoscaler with it.
	if err := c.Get(ctx, key, &autoscalingv2.HorizontalPodAutoscaler{}); err != nil {
		t.Fatalf("the autoscaled Gateway's HorizontalPodAutoscaler: %v", err)
	}
	if err := c.Delete(ctx, gw); err != nil {
		t.Fatal(err)
	}
	meta := metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}
	eventually(t, 30*time.Second, "the budget and autoscaler of the deleted Gateway removed", func() error {
		return gone(t, &policyv1.PodDisruptionBudget{ObjectMeta: meta}, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: meta},
			&appsv1.Deployment{ObjectMeta: meta})
	})
}

// An autoscaled Gateway's proxies get a HorizontalPodAutoscaler of their
// Deployment (minReplicas 2, maxReplicas 4, Envoy's CPU), which owns the
// Deployment's replicas (the cluster's autoscaler scales it to 2) and is
// restored when deleted or edited. Turning autoscaling off deletes it, and Portico
// sets the replicas again, keeping a replica count; the Gateway's removal
// removes the rest.
func TestProxyAutoscaling(t *testing.T) {
	w := newWorld(t)
	startReplica(t, w, "solo")
	gw := createAutoscaledGateway(t, w, "edge")
	ctx := ctxT(t)
	c := kubeClient()
	key := types.NamespacedName{Namespace: w.ns, Name: proxyspec.Name(gw.Name)}

	var hpa autoscalingv2.HorizontalPodAutoscaler
	eventually(t, 60*time.Second, "the HorizontalPodAutoscaler", func() error {
		if err := c.Get(ctx, key, &hpa); err != nil {
			return err
		}
		s := hpa.Spec
		ref := autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: key.Name}
		switch {
		case s.ScaleTargetRef != ref:
			return fmt.Errorf("scaleTargetRef %+v, want %+v", s.ScaleTargetRef, ref)
		case ptr.Deref(s.MinReplicas, 0) != 2 || s.MaxReplicas != 4:
			return fmt.Errorf("replicas %v to %d, want 2 to 4", s.MinReplicas, s.MaxReplicas)
		case len(s.Metrics) != 1 || s.Metrics[0].Type != autoscalingv2.ContainerResourceMetricSourceType || s.Metrics[0].ContainerResource == nil:
			return fmt.Errorf("metrics %+v, want the Envoy container's CPU", s.Metrics)
		}
		m := s.Metrics[0].ContainerResource
		if m.Name != corev1.ResourceCPU || m.Container != infra.EnvoyContainerName ||
			m.Target.Type != autoscalingv2.UtilizationMetricType || ptr.Deref(m.Target.AverageUtilization, 0) != proxyspec.DefaultTargetCPUUtilization {
			return fmt.Errorf("metric %+v, want %s CPU at %d%%", m, infra.EnvoyContainerName, proxyspec.DefaultTargetCPUUtilization)
		}
		return controlledBy(&hpa, gw)
	})
	// The cluster's autoscaler raises the Deployment to minReplicas (no
	// metrics needed below the minimum); Portico's applies leave the
	// replicas to it.
	eventually(t, 60*time.Second, "the autoscaler to scale the Deployment to 2", func() error {
		var d appsv1.Deployment
		if err := c.Get(ctx, key, &d); err != nil {
			return err
		}
		if r := ptr.Deref(d.Spec.Replicas, 0); r != 2 {
			return fmt.Errorf("replicas %d", r)
		}
		if appliesReplicas(&d) {
			return errors.New("Portico's apply owns the replicas of an autoscaled Deployment")
		}
		return nil
	})

	// A deleted autoscaler is restored, and then an edited one: the first
	// may be restored by an apply for another reason (the scaling of the
	// Deployment); by the second nothing else is pending.
	if err := c.Delete(ctx, &hpa); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the HorizontalPodAutoscaler restored", func() error {
		var h autoscalingv2.HorizontalPodAutoscaler
		if err := c.Get(ctx, key, &h); err != nil {
			return err
		}
		if h.UID == hpa.UID {
			return errors.New("still the deleted one")
		}
		return controlledBy(&h, gw)
	})
	eventually(t, 10*time.Second, "editing the HorizontalPodAutoscaler", func() error {
		var h autoscalingv2.HorizontalPodAutoscaler
		if err := c.Get(ctx, key, &h); err != nil {
			return err
		}
		h.Spec.MaxReplicas = 40
		return c.Update(ctx, &h)
	})
	eventually(t, 30*time.Second, "the HorizontalPodAutoscaler's maxReplicas restored", func() error {
		var h autoscalingv2.HorizontalPodAutoscaler
		if err := c.Get(ctx, key, &h); err != nil {
			return err
		}
		if h.Spec.MaxReplicas != 4 {
			return fmt.Errorf("maxReplicas %d", h.Spec.MaxReplicas)
		}
		return nil
	})

	// Autoscaling off: the autoscaler goes, Portico owns the replicas
	// again (the default, 2) and the Deployment never loses them.
	eventually(t, 10*time.Second, "turning autoscaling off", func() error {
		var pc v1alpha1.ProxyConfig
		if err := c.Get(ctx, types.NamespacedName{Namespace: w.ns, Name: "proxies"}, &pc); err != nil {
			return err
		}
		pc.Spec.Autoscaling = nil
		return c.Update(ctx, &pc)
	})
	eventually(t, 30*time.Second, "the autoscaler deleted and the replicas Portico's", func() error {
		if err := gone(t, &hpa); err != nil {
			return err
		}
		var d appsv1.Deployment
		if err := c.Get(ctx, key, &d); err != nil {
			return err
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != proxyspec.DefaultReplicas {
			return fmt.Errorf("replicas %v, want %d", d.Spec.Replicas, proxyspec.DefaultReplicas)
		}
		if !appliesReplicas(&d) {
			return errors.New("Portico's apply does not own the replicas")
		}
		return nil
	})

	if err := c.Delete(ctx, gw); err != nil {
		t.Fatal(err)
	}
	meta := metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}
	eventually(t, 30*time.Second, "the deleted Gateway's objects removed", func() error {
		return gone(t, &policyv1.PodDisruptionBudget{ObjectMeta: meta}, &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: meta},
			&appsv1.Deployment{ObjectMeta: meta})
	})
}
