package dataplane

// The kubelet's part for the Pods annotated KubeletAnnotation: their
// Ready condition follows their readiness probes (kwok's pod-ready-kubelet
// stage starts them not Ready, hack/kwok-stages), and their termination is
// graceful. kwok removes every other Pod at once when it is deleted and
// marks it Ready as soon as it runs, which is all the conformance suite's
// Pods need; the Pods of tests about readiness, rollouts and drains carry
// the annotation (for proxies: ProxyConfig spec.pod.annotations).
//
// Termination, as the kubelet does it: when the Pod gets its deletion
// timestamp it stops being a load-balancer backend (kube-proxy drops
// terminating endpoints), each container's preStop hook runs (httpGet
// against the Pod's IP, or sleep) and then the container gets SIGTERM,
// all containers at once; whatever still runs at the end of the grace
// period (the deletion timestamp) is killed. The readiness probes go on
// meanwhile and the Ready condition with them. Once every container has
// stopped the data plane deletes the Pod (grace 0), as the kubelet's
// final deletion; kwok's pod-delete-kubelet stage removes it at the
// deletion timestamp if the data plane is not there to.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// KubeletAnnotation marks the Pods whose readiness and termination the
// data plane handles as a kubelet (any value).
const KubeletAnnotation = "dataplane.portico.dev/kubelet"

func isKubeletPod(p *corev1.Pod) bool {
	_, ok := p.Annotations[KubeletAnnotation]
	return ok
}

// beginTermination starts r's graceful termination; the loop's goroutine
// only, once. r.termDone is closed when every container has stopped.
func (r *podRun) beginTermination(p *corev1.Pod) {
	r.terminating.Store(true)
	r.termDone = make(chan struct{})
	deadline := time.Now()
	if p.DeletionTimestamp != nil {
		deadline = p.DeletionTimestamp.Time
	}
	containers := append([]*containerRun(nil), r.containers...)
	ip := p.Status.PodIP
	r.logf("terminating (grace period ends in %s)", time.Until(deadline).Round(time.Millisecond))
	done := r.termDone
	go func() {
		defer r.d.wake()
		defer close(done)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		var wg sync.WaitGroup
		for _, c := range containers {
			wg.Go(func() {
				if lc := c.spec.Spec.Lifecycle; lc != nil && lc.PreStop != nil {
					start := time.Now()
					if err := preStop(ctx, ip, c.spec.Spec, lc.PreStop); err != nil {
						r.logf("container %s: preStop hook: %v", c.spec.Spec.Name, err)
					} else {
						r.logf("container %s: preStop hook done in %s", c.spec.Spec.Name, time.Since(start).Round(time.Millisecond))
					}
				}
				c.mu.Lock()
				proc := c.proc
				c.mu.Unlock()
				if proc != nil {
					proc.Terminate(time.Until(deadline))
				}
			})
		}
		wg.Wait()
		r.logf("containers stopped")
	}()
	r.d.wake() // the load balancers drop it now
}

// preStop runs a container's preStop hook: httpGet (from the host, at the
// Pod's IP, as the kubelet) or sleep; exec is not supported (the
// containers are processes of images the data plane emulates).
func preStop(ctx context.Context, ip string, c *corev1.Container, h *corev1.LifecycleHandler) error {
	switch {
	case h.HTTPGet != nil:
		port, err := probePort(c, h.HTTPGet.Port.String(), h.HTTPGet.Port.IntValue())
		if err != nil {
			return err
		}
		if h.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			return fmt.Errorf("https hooks are not supported")
		}
		host := ip
		if h.HTTPGet.Host != "" {
			host = h.HTTPGet.Host
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, strconv.Itoa(port))+h.HTTPGet.Path, nil)
		if err != nil {
			return err
		}
		for _, hd := range h.HTTPGet.HTTPHeaders {
			req.Header.Add(hd.Name, hd.Value)
		}
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("GET %s: %s", h.HTTPGet.Path, resp.Status)
		}
		return nil
	case h.Sleep != nil:
		t := time.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	default:
		return fmt.Errorf("only httpGet and sleep hooks are supported")
	}
}

// finishTermination removes what is left of a terminated Pod and deletes
// it (grace 0, this very Pod: the UID is a precondition). The loop's
// goroutine, with d.mu held.
func (d *DataPlane) finishTermination(ctx context.Context, r *podRun) {
	r.stop()
	uid := r.pod.UID
	zero := int64(0)
	err := d.cs.CoreV1().Pods(r.pod.Namespace).Delete(ctx, r.pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil {
		r.logf("deleting it after its containers stopped: %v", err)
	}
}

// reportReady writes the Pod's Ready and ContainersReady conditions when
// they differ from what its probes say. The loop's goroutine.
func (d *DataPlane) reportReady(ctx context.Context, r *podRun, p *corev1.Pod) {
	want := corev1.ConditionFalse
	if r.ready.Load() {
		want = corev1.ConditionTrue
	}
	if podCondition(p, corev1.PodReady) == want && podCondition(p, corev1.ContainersReady) == want {
		return
	}
	now := metav1.Now().UTC().Format(time.RFC3339)
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":%q,"lastTransitionTime":%q},{"type":"ContainersReady","status":%q,"lastTransitionTime":%q}]}}`,
		want, now, want, now)
	if _, err := d.cs.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		r.logf("writing Ready=%s: %v", want, err)
		return
	}
	r.logf("Ready=%s", want)
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}
