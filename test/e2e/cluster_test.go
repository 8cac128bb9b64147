package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestClusterBehavesLikeKubernetes proves the kwok cluster does what the
// Portico e2e tests rely on: a Deployment's Pods are scheduled onto the fake
// Node and become Ready with an IP, the Deployment becomes available, the
// Service gets an EndpointSlice with the ready Pods, and deleting the
// Deployment removes its Pods and empties the slice.
func TestClusterBehavesLikeKubernetes(t *testing.T) {
	ctx := ctxT(t)
	c := kubeClient()
	ns := newNamespace(t)
	labels := map[string]string{"app": "smoke"}

	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "smoke"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "app",
					Image: "registry.invalid/portico/smoke:never-pulled",
					Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				}}},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "smoke"},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	for _, o := range []client.Object{dep, svc} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T: %v", o, err)
		}
	}

	var podIPs []string
	eventually(t, 60*time.Second, "2 Pods scheduled on a kwok Node and Ready", func() error {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
			return err
		}
		podIPs = podIPs[:0]
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				continue
			}
			if p.Spec.NodeName == "" {
				return fmt.Errorf("pod %s not scheduled", p.Name)
			}
			var node corev1.Node
			if err := c.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, &node); err != nil {
				return err
			}
			if node.Labels["type"] != "kwok" {
				return fmt.Errorf("pod %s on node %s without label type=kwok", p.Name, node.Name)
			}
			if !podReady(&p) || p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
				return fmt.Errorf("pod %s: phase %s, ready %v, IP %q", p.Name, p.Status.Phase, podReady(&p), p.Status.PodIP)
			}
			podIPs = append(podIPs, p.Status.PodIP)
		}
		if len(podIPs) != 2 {
			return fmt.Errorf("%d ready pods, want 2", len(podIPs))
		}
		return nil
	})

	eventually(t, 30*time.Second, "Deployment availableReplicas=2", func() error {
		var got appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKeyFromObject(dep), &got); err != nil {
			return err
		}
		if got.Status.AvailableReplicas != 2 || got.Status.ReadyReplicas != 2 {
			return fmt.Errorf("available %d, ready %d", got.Status.AvailableReplicas, got.Status.ReadyReplicas)
		}
		return nil
	})

	eventually(t, 30*time.Second, "an EndpointSlice of the Service with the 2 ready Pods", func() error {
		ready, err := readyEndpoints(ctx, ns, svc.Name)
		if err != nil {
			return err
		}
		slices.Sort(ready)
		slices.Sort(podIPs)
		if !slices.Equal(ready, podIPs) {
			return fmt.Errorf("ready endpoints %v, want the pod IPs %v", ready, podIPs)
		}
		return nil
	})

	if err := c.Delete(ctx, dep); err != nil {
		t.Fatalf("deleting the Deployment: %v", err)
	}
	eventually(t, 60*time.Second, "the Deployment's Pods to be gone", func() error {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
			return err
		}
		if n := len(pods.Items); n > 0 {
			return fmt.Errorf("%d pods left", n)
		}
		return nil
	})
	eventually(t, 30*time.Second, "no ready endpoints", func() error {
		ready, err := readyEndpoints(ctx, ns, svc.Name)
		if err != nil {
			return err
		}
		if len(ready) > 0 {
			return fmt.Errorf("ready endpoints %v", ready)
		}
		return nil
	})
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// readyEndpoints lists the ready addresses in the Service's EndpointSlices,
// checking they carry the Service's target port (8080, "http").
func readyEndpoints(ctx context.Context, ns, service string) ([]string, error) {
	var list discoveryv1.EndpointSliceList
	if err := kubeClient().List(ctx, &list, client.InNamespace(ns),
		client.MatchingLabels{discoveryv1.LabelServiceName: service}); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("no EndpointSlice for service %s", service)
	}
	var ready []string
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || !*e.Conditions.Ready {
				continue
			}
			if len(s.Ports) != 1 || s.Ports[0].Port == nil || *s.Ports[0].Port != 8080 {
				return nil, fmt.Errorf("slice %s ports %v, want http/8080", s.Name, s.Ports)
			}
			ready = append(ready, e.Addresses...)
		}
	}
	return ready, nil
}
