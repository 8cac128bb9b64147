package dataplane

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// TestKubeletPods: for Pods annotated KubeletAnnotation the data plane
// writes Ready from the probes, the load balancer spreads connections
// over the Ready Pods, and a deleted Pod terminates gracefully: it leaves
// the load balancer at once, its preStop hook runs before its SIGTERM,
// and the data plane deletes it once its containers stopped, before the
// grace period ends.
func TestKubeletPods(t *testing.T) {
	_, cs, _ := startEchoDataPlane(t)
	ctx := context.Background()

	const ns = "default"
	ips := map[string]string{"echo-a": "10.244.1.5", "echo-b": "10.244.1.6"}
	for name, ip := range ips {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "echo"},
				Annotations: map[string]string{KubeletAnnotation: "true"}},
			Spec: corev1.PodSpec{
				NodeName: "kwok-node-0", AutomountServiceAccountToken: ptr.To(false),
				TerminationGracePeriodSeconds: ptr.To[int64](20),
				Containers: []corev1.Container{{
					Name: "echo", Image: "registry.k8s.io/gateway-api/conformance/echo-basic:v1.7.0",
					Env:            []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(3000)}}},
					Lifecycle:      &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 3}}},
				}},
			},
		}
		created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// What kwok's pod-ready-kubelet stage does: Running, not Ready.
		created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, HostIP: "127.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "echo"},
			Ports: []corev1.ServicePort{{Port: 8080, TargetPort: intstr.FromInt32(3000)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	for name := range ips {
		eventually(t, 30*time.Second, name+" Ready", func() error {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if podCondition(p, corev1.PodReady) != corev1.ConditionTrue {
				return fmt.Errorf("Ready=%s", podCondition(p, corev1.PodReady))
			}
			return nil
		})
	}
	var lb string
	eventually(t, 30*time.Second, "the load-balancer address", func() error {
		s, err := cs.CoreV1().Services(ns).Get(ctx, "echo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if in := s.Status.LoadBalancer.Ingress; len(in) == 1 {
			lb = in[0].IP
			return nil
		}
		return fmt.Errorf("no address yet")
	})
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	who := func() (string, error) {
		resp, err := client.Get("http://" + lb + ":8080/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		var body struct{ Pod string }
		err = json.NewDecoder(resp.Body).Decode(&body)
		return body.Pod, err
	}
	// Both Pods take connections.
	eventually(t, 30*time.Second, "connections to both Pods", func() error {
		seen := map[string]bool{}
		for range 6 {
			p, err := who()
			if err != nil {
				return err
			}
			seen[p] = true
		}
		if len(seen) != 2 {
			return fmt.Errorf("answered by %v", seen)
		}
		return nil
	})

	start := time.Now()
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "echo-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// At once out of the load balancer; still running during its preStop
	// hook (its IP answers).
	eventually(t, 5*time.Second, "echo-a out of the load balancer", func() error {
		for range 4 {
			p, err := who()
			if err != nil {
				return err
			}
			if p != "echo-b" {
				return fmt.Errorf("answered by %s", p)
			}
		}
		return nil
	})
	// Still serving during its hook (only checked while the hook surely
	// runs: a slow machine makes the check late, never wrong).
	resp, err := client.Get("http://" + ips["echo-a"] + ":3000/")
	if err == nil {
		resp.Body.Close()
	}
	if time.Since(start) < 2500*time.Millisecond && err != nil {
		t.Errorf("echo-a stopped before its preStop hook ended: %v", err)
	}
	// Deleted by the data plane once stopped: after the hook, well before
	// the 20 s grace period.
	eventually(t, 15*time.Second, "echo-a deleted", func() error {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, "echo-a", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	if el := time.Since(start); el < 3*time.Second {
		t.Errorf("echo-a deleted after %s, before its 3 s preStop hook ended", el)
	}
	if p, err := who(); err != nil || p != "echo-b" {
		t.Errorf("after the deletion: answered by %q, %v", p, err)
	}
}
