package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ProbeTimeout bounds one probe's wait for the proxy.
const ProbeTimeout = 30 * time.Second

// RouteProbe is the outcome of one route probe: create a route, wait until
// the proxy holds it, delete it, wait until the proxy no longer does.
type RouteProbe struct {
	Create, Delete           time.Duration
	BytesCreate, BytesDelete int64 // bytes pushed for each change (quiet probes only)
}

// ProbeRoute runs probe k of stage n against the proxy a. With quiet set
// it also waits for the pushes of each change to end (100 ms without a
// response) and counts their bytes.
func ProbeRouteOnce(ctx context.Context, c client.Client, a *ADS, n, k int, quiet bool) (RouteProbe, error) {
	var p RouteProbe
	// The marker ends in a letter: a PathPrefix may be sent without its
	// trailing slash, and "-7-z" is no substring of "-70-z".
	marker := fmt.Sprintf("/bench-probe-%d-%d-z", n, k)
	route := ProbeRoute(RouteNamespace(k), fmt.Sprintf("probe-%d-%d", n, k), marker, k)
	tr := a.Track(marker)
	defer a.Untrack(tr)

	b0, _, _ := a.Stats()
	t0 := time.Now()
	if err := c.Create(ctx, route); err != nil {
		return p, fmt.Errorf("creating probe route: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	seen, err := a.Wait(wctx, tr, true)
	cancel()
	if err != nil {
		_ = c.Delete(context.Background(), route)
		return p, err
	}
	p.Create = seen.Sub(t0)
	if quiet {
		a.WaitQuiet(100*time.Millisecond, 2*time.Second)
	}
	b1, _, _ := a.Stats()
	p.BytesCreate = b1 - b0

	t1 := time.Now()
	if err := c.Delete(ctx, route); err != nil {
		return p, fmt.Errorf("deleting probe route: %w", err)
	}
	wctx, cancel = context.WithTimeout(ctx, ProbeTimeout)
	gone, err := a.Wait(wctx, tr, false)
	cancel()
	if err != nil {
		return p, err
	}
	p.Delete = gone.Sub(t1)
	if quiet {
		a.WaitQuiet(100*time.Millisecond, 2*time.Second)
	}
	b2, _, _ := a.Stats()
	p.BytesDelete = b2 - b1
	return p, nil
}

// EndpointProbe is the outcome of one endpoint probe: from the Pod's
// Ready (as the suite's watch sees it) to its address in the proxy's
// EDS, split at the moment the suite's watch sees the EndpointSlice that
// holds the address (the EndpointSlice controller's share before, the
// API server's delivery and Portico's after).
type EndpointProbe struct {
	Total, ReadyToSlice, SliceToEDS time.Duration
}

// ProbeEndpoint runs endpoint probe k of stage n: a Pod selected by the
// epprobe Service is created; from the moment the suite sees it Ready
// (kwok makes it so, with an IP) until its address is in the proxy's EDS.
// The Pod is then deleted and the suite waits for its address to leave.
func ProbeEndpoint(ctx context.Context, c client.WithWatch, a *ADS, n, k int) (EndpointProbe, error) {
	var ep EndpointProbe
	ns, name := RouteNamespace(0), fmt.Sprintf("ep-%d-%d", n, k)
	wctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	w, err := c.Watch(wctx, &corev1.PodList{}, client.InNamespace(ns),
		client.MatchingFields{"metadata.name": name})
	if err != nil {
		return ep, err
	}
	defer w.Stop()
	slices, err := c.Watch(wctx, &discoveryv1.EndpointSliceList{}, client.InNamespace(ns),
		client.MatchingLabels{discoveryv1.LabelServiceName: "epprobe"})
	if err != nil {
		return ep, err
	}
	defer slices.Stop()
	// sliceSeen records when the watch first delivers a slice with ip.
	var sliceMu sync.Mutex
	sliceAt := map[string]time.Time{}
	go func() {
		for ev := range slices.ResultChan() {
			es, ok := ev.Object.(*discoveryv1.EndpointSlice)
			if !ok {
				continue
			}
			now := time.Now()
			sliceMu.Lock()
			for _, e := range es.Endpoints {
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					for _, addr := range e.Addresses {
						if _, seen := sliceAt[addr]; !seen {
							sliceAt[addr] = now
						}
					}
				}
			}
			sliceMu.Unlock()
		}
	}()
	tpl := kwokPod(map[string]string{"bench-probe": "endpoint"})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: tpl.Labels}, Spec: tpl.Spec}
	if err := c.Create(ctx, pod); err != nil {
		return ep, fmt.Errorf("creating pod: %w", err)
	}
	defer func() {
		_ = c.Delete(context.Background(), pod, client.GracePeriodSeconds(0))
	}()
	var ready time.Time
	var ip string
	for ip == "" {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return ep, fmt.Errorf("pod %s: watch ended before it was Ready", name)
			}
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			if p, ok := ev.Object.(*corev1.Pod); ok && podReady(p) && p.Status.PodIP != "" {
				ready, ip = time.Now(), p.Status.PodIP
			}
		case <-wctx.Done():
			return ep, fmt.Errorf("pod %s not Ready within %s", name, ProbeTimeout)
		}
	}
	seen, err := a.WaitAddress(wctx, ip, true)
	if err != nil {
		return ep, fmt.Errorf("address %s of pod %s: %w", ip, name, err)
	}
	ep.Total = max(seen.Sub(ready), 0)
	// The slice event may still be on its way to the suite when the proxy
	// already has the address; wait for it briefly.
	_ = poll(wctx, 5*time.Second, time.Millisecond, func() (bool, error) {
		sliceMu.Lock()
		defer sliceMu.Unlock()
		at, ok := sliceAt[ip]
		if ok {
			ep.ReadyToSlice, ep.SliceToEDS = max(at.Sub(ready), 0), max(seen.Sub(at), 0)
		}
		return ok, nil
	})
	if err := c.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
		return ep, err
	}
	// Addresses are reused: the next probe must not see this one.
	if _, err := a.WaitAddress(wctx, ip, false); err != nil {
		return ep, fmt.Errorf("address %s still in EDS after its pod was deleted: %w", ip, err)
	}
	return ep, nil
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Churn rates: route spec changes and live Pod restarts per second.
const (
	ChurnRouteUpdatesPerSec = 5
	ChurnPodRestartsPerSec  = 1
)

// Churn changes routes and restarts Pods in the background until stopped.
type Churn struct {
	RouteUpdates, PodRestarts, Errors atomic.Int64
	cancel                            context.CancelFunc
	wg                                sync.WaitGroup
}

// StartChurn starts churning the first n routes: every route change sets
// a new header value on one random route (spec change: new generation,
// new config and a status write); every pod restart deletes one random
// Pod of a "live" Deployment (its EndpointSlice changes twice, its
// replacement is scheduled and made Ready by kwok).
func StartChurn(ctx context.Context, c client.Client, n int) *Churn {
	ctx, cancel := context.WithCancel(ctx)
	ch := &Churn{cancel: cancel}
	variant := 0
	ch.loop(ctx, time.Second/ChurnRouteUpdatesPerSec, func() error {
		variant++
		i := rand.IntN(n)
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"rules": RouteRules(i, variant)}})
		if err != nil {
			return err
		}
		r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: RouteNamespace(i), Name: fmt.Sprintf("route%d", i)}}
		if err := c.Patch(ctx, r, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return err
		}
		ch.RouteUpdates.Add(1)
		return nil
	})
	ch.loop(ctx, time.Second/ChurnPodRestartsPerSec, func() error {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(RouteNamespace(rand.IntN(RouteNS))),
			client.MatchingLabels{"app": "live"}); err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			return nil
		}
		p := &pods.Items[rand.IntN(len(pods.Items))]
		if err := c.Delete(ctx, p, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		ch.PodRestarts.Add(1)
		return nil
	})
	return ch
}

func (ch *Churn) loop(ctx context.Context, every time.Duration, f func() error) {
	ch.wg.Add(1)
	go func() {
		defer ch.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := f(); err != nil && ctx.Err() == nil {
					ch.Errors.Add(1)
				}
			}
		}
	}()
}

// actions counts what the churn did so far.
func (ch *Churn) actions() map[string]int64 {
	return map[string]int64{"route_updates": ch.RouteUpdates.Load(),
		"pod_restarts": ch.PodRestarts.Load(), "errors": ch.Errors.Load()}
}

// Stop stops the churn and waits for its goroutines.
func (ch *Churn) Stop() {
	ch.cancel()
	ch.wg.Wait()
}

// upsertRoute creates r, or replaces the spec of the existing route.
func upsertRoute(ctx context.Context, c client.Client, r *gwv1.HTTPRoute) error {
	var cur gwv1.HTTPRoute
	err := c.Get(ctx, client.ObjectKeyFromObject(r), &cur)
	if apierrors.IsNotFound(err) {
		return c.Create(ctx, r)
	}
	if err != nil {
		return err
	}
	cur.Spec = r.Spec
	return c.Update(ctx, &cur)
}
