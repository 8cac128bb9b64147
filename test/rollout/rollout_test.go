package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/proxyspec"
)

// envoyState is the server state of a proxy Pod's Envoy, read from its
// admin interface on the Pod's loopback ("" while it does not answer).
func envoyState(ctx context.Context, ns, pod string) string {
	dial, err := harness.dp.PodDialer(ns, pod)
	if err != nil {
		return ""
	}
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:19001/server_info", nil)
	resp, err := c.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var info struct{ State string }
	if json.NewDecoder(resp.Body).Decode(&info) != nil {
		return ""
	}
	return info.State
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestReadyOnlyWithConfiguration: a proxy whose Envoy cannot get its
// configuration runs but is never Ready; once the configuration arrives
// (Envoy LIVE), the Pod is Ready within a second.
func TestReadyOnlyWithConfiguration(t *testing.T) {
	c := env(t)
	harness.xdsOpen.Store(false)
	defer harness.xdsOpen.Store(true)
	f := newGateway(t, c, "readiness", proxyConfig(1))
	ctx := context.Background()

	var pod string
	eventually(t, 90*time.Second, "the proxy's Envoy running", func() error {
		pods := f.pods(t)
		if len(pods) != 1 {
			return fmt.Errorf("%d proxy Pods", len(pods))
		}
		pod = pods[0].Name
		if s := envoyState(ctx, f.ns, pod); s == "" {
			return fmt.Errorf("Envoy's admin does not answer yet")
		}
		return nil
	})
	// Without configuration: not Ready, however long it waits (3 s of
	// its 1 s readiness probes here).
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		var p corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: pod}, &p); err != nil {
			t.Fatal(err)
		}
		if podReady(&p) {
			t.Fatalf("proxy Pod Ready without configuration (Envoy %s)", envoyState(ctx, f.ns, pod))
		}
		if s := envoyState(ctx, f.ns, pod); s == "LIVE" {
			t.Fatal("Envoy LIVE with the xDS server unreachable")
		}
	}

	harness.xdsOpen.Store(true)
	var live time.Time
	eventually(t, 90*time.Second, "Envoy LIVE once xDS is reachable", func() error {
		if s := envoyState(ctx, f.ns, pod); s != "LIVE" {
			return fmt.Errorf("state %q", s)
		}
		live = time.Now()
		return nil
	})
	var ready time.Time
	for deadline := time.Now().Add(10 * time.Second); ready.IsZero(); time.Sleep(20 * time.Millisecond) {
		var p corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: pod}, &p); err != nil {
			t.Fatal(err)
		}
		if podReady(&p) {
			ready = time.Now()
		} else if time.Now().After(deadline) {
			t.Fatal("the proxy Pod is not Ready 10 s after its Envoy went LIVE")
		}
	}
	lag := ready.Sub(live)
	t.Logf("FIGURE ready-after-live: %s", lag.Round(time.Millisecond))
	if lag > time.Second {
		t.Errorf("Pod Ready %s after its Envoy went LIVE, want within 1 s", lag.Round(time.Millisecond))
	}
	// And it serves.
	l := startLoad(t, "http://"+f.address(t, 60*time.Second)+"/", 1, 50*time.Millisecond)
	l.waitServed(t, 5, 30*time.Second)
	l.check(t, "ready proxy")
}

// TestRollingUpdateLosesNoRequest: a change of the proxies' Pod template
// (here a ProxyConfig annotation) rolls 3 replicas one at a time
// (maxUnavailable 0) under a constant request stream, and no request
// fails.
func TestRollingUpdateLosesNoRequest(t *testing.T) {
	c := env(t)
	f := newGateway(t, c, "rolling", proxyConfig(3))
	addr := f.address(t, 120*time.Second)
	f.settled(t, 3, 120*time.Second)
	before := podNames(f.pods(t))

	l := startLoad(t, "http://"+addr+"/", 6, 0)
	l.waitServed(t, 50, 30*time.Second)
	updateProxyConfig(t, c, f, func(s *v1alpha1.ProxyConfigSpec) {
		s.Pod.Annotations["rollout.portico.dev/revision"] = "2"
	})
	eventually(t, 30*time.Second, "the rollout to start", func() error {
		for _, p := range f.pods(t) {
			if !before[p.Name] {
				return nil
			}
		}
		return fmt.Errorf("no new Pod yet")
	})
	f.settled(t, 3, 180*time.Second)
	for _, p := range f.pods(t) {
		if before[p.Name] {
			t.Errorf("Pod %s of the old template still runs", p.Name)
		}
	}
	served := l.ok.Load()
	l.waitServed(t, served+50, 30*time.Second)
	l.check(t, "rolling update of 3 proxies")
}

// TestPodDeleteLosesNoRequest: `kubectl delete pod` of one of 3 proxies
// (default grace period) under a constant request stream: it drains, its
// replacement comes up, and no request fails.
func TestPodDeleteLosesNoRequest(t *testing.T) {
	c := env(t)
	f := newGateway(t, c, "delete", proxyConfig(3))
	addr := f.address(t, 120*time.Second)
	f.settled(t, 3, 120*time.Second)

	l := startLoad(t, "http://"+addr+"/", 6, 0)
	l.waitServed(t, 50, 30*time.Second)
	victim := f.pods(t)[0]
	if err := c.Delete(context.Background(), &victim); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the deleted Pod gone", func() error {
		if podNames(f.pods(t))[victim.Name] {
			return fmt.Errorf("%s still there", victim.Name)
		}
		return nil
	})
	f.settled(t, 3, 120*time.Second)
	served := l.ok.Load()
	l.waitServed(t, served+50, 30*time.Second)
	l.check(t, "deleting 1 of 3 proxy Pods")
}

// TestAutoscalerScaleDownLosesNoRequest: with autoscaling, the cluster's
// HorizontalPodAutoscaler controller owns the proxies' replicas. Busy
// proxies (the metrics API reports twice the CPU target) are scaled up to
// 3; idle ones are scaled down to 1 under a constant request stream, and
// no request fails while 2 proxies drain. Portico's later applies leave
// the HPA's replicas alone.
func TestAutoscalerScaleDownLosesNoRequest(t *testing.T) {
	c := env(t)
	spec := proxyConfig(3)
	spec.Replicas = nil
	spec.Autoscaling = &v1alpha1.ProxyAutoscaling{MinReplicas: ptr.To[int32](1), MaxReplicas: 3, TargetCPUUtilizationPercentage: ptr.To[int32](50)}
	f := newGateway(t, c, "autoscaled", spec)
	harness.cpu.Store(f.ns, int64(100)) // the Envoy container requests 100m: 100% of it
	addr := f.address(t, 120*time.Second)
	f.settled(t, 3, 120*time.Second)
	t.Logf("scaled up to 3 by the HPA")

	l := startLoad(t, "http://"+addr+"/", 6, 0)
	l.waitServed(t, 50, 30*time.Second)
	harness.cpu.Store(f.ns, int64(1))
	f.settled(t, 1, 120*time.Second)
	served := l.ok.Load()
	l.waitServed(t, served+50, 30*time.Second)
	l.check(t, "HPA scale-down from 3 to 1 proxies")

	var hpa autoscalingv2.HorizontalPodAutoscaler
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: proxyspec.Name(f.gateway)}, &hpa); err != nil {
		t.Fatal(err)
	}
	t.Logf("HPA %s: current %d, desired %d", hpa.Name, hpa.Status.CurrentReplicas, hpa.Status.DesiredReplicas)
	updateProxyConfig(t, c, f, func(s *v1alpha1.ProxyConfigSpec) { s.LogLevel = "warning" })
	eventually(t, 30*time.Second, "the new template rolled out", func() error {
		var d appsv1.Deployment
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: proxyspec.Name(f.gateway)}, &d); err != nil {
			return err
		}
		if d.Status.ObservedGeneration < d.Generation {
			return fmt.Errorf("generation %d not observed", d.Generation)
		}
		if r := ptr.Deref(d.Spec.Replicas, -1); r != 1 {
			return fmt.Errorf("replicas %d after Portico's apply, want the HPA's 1", r)
		}
		return nil
	})
	f.settled(t, 1, 120*time.Second)
}

func updateProxyConfig(t *testing.T, c client.Client, f *gatewayFixture, mutate func(*v1alpha1.ProxyConfigSpec)) {
	t.Helper()
	eventually(t, 10*time.Second, "the ProxyConfig updated", func() error {
		var pc v1alpha1.ProxyConfig
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(f.pc), &pc); err != nil {
			return err
		}
		mutate(&pc.Spec)
		return c.Update(context.Background(), &pc)
	})
}

func podNames(pods []corev1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, p := range pods {
		out[p.Name] = true
	}
	return out
}
