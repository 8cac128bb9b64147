package faults

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/status"
	"github.com/portico-dev/portico/internal/testenv"
	"github.com/portico-dev/portico/test/faults/faultproxy"
)

// Many writers, one Gateway — the auto-TLS case, one HTTPS listener per
// application: concurrent clients each add their own listener (own
// hostname, own certificate Secret) to one shared Gateway.
//
//   - ListenerSets: 200 clients, each creating its own ListenerSet.
//   - ServerSideApply: as many clients as the Gateway CRD allows (spec.listeners
//     has maxItems 64; the Gateway keeps its own HTTP listener, so 63), each
//     server-side applying one spec.listeners entry with its own field
//     manager (listeners are a map-list keyed by name, so the applies merge).
//     At most 4 applies are in flight: kube-apiserver serializes writes to
//     one object, retries an apply that lost the race, and re-runs the
//     Gateway CRD's CEL rules (quadratic in the listeners) each time, so
//     applies to one Gateway slow down super-linearly with concurrency —
//     without Portico running, 63 applies took 4.6 s one at a time, 12 s
//     with 4 in flight, 35 s with 16, and timed out with 63 on 2 quiet CPUs
//     (and 35-45 s with 4 in flight on a busy machine, some timing out:
//     clients retry those).
//
// Every listener becomes Programmed; the clients see no write conflicts;
// Portico writes the Gateway's status a bounded number of times (at most
// once per translation, and far fewer times than there are listeners).
func TestManyWritersOneGateway(t *testing.T) {
	t.Run("ListenerSets", func(t *testing.T) { manyWriters(t, 200, true, 200) })
	t.Run("ServerSideApply", func(t *testing.T) { manyWriters(t, 63, false, 4) })
}

// manyWriters runs n clients, at most inFlight at a time.
func manyWriters(t *testing.T, n int, listenerSets bool, inFlight int) {
	w := newWorld(t)
	w.gateway("shared", func(gw *gwv1.Gateway) {
		gw.Spec.AllowedListeners = &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(gwv1.NamespacesFromSame)}}
	})
	rs := w.startReplicas(t, 2)
	leader := waitLeader(t, 30*time.Second, rs...)
	eventually(t, 60*time.Second, "the shared Gateway programmed", func() error { return w.gatewayProgrammed("shared", 0) })
	translationsBefore, err := leader.metric("portico_translation_duration_seconds_count", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Certificates first (not timed): generating keys is the clients' work.
	secrets := make([]*corev1.Secret, n)
	for i := range n {
		secrets[i] = tlsSecret(t, w.ns, fmt.Sprintf("tls-%03d", i), hostname(i))
	}

	start := time.Now()
	gatewayWrites := func(match func(*faultproxy.Record) bool) int {
		total := 0
		for _, r := range rs {
			total += r.statusWrites(func(rec *faultproxy.Record) bool {
				return rec.Resource == "gateways" && rec.Name == "shared" && rec.Start.After(start) && match(rec)
			})
		}
		return total
	}
	var conflicts, failures, retries atomic.Int64
	wroteAt := make([]time.Time, n) // when client i's write returned
	seen := watchProgrammed(w, n, listenerSets)
	var wg sync.WaitGroup
	sem := make(chan struct{}, inFlight)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			err := kubeClient().Create(w.ctx, secrets[i])
			if err == nil {
				if listenerSets {
					err = kubeClient().Create(w.ctx, listenerSet(w, i))
				} else {
					// kube-apiserver may time an apply out when it is busy
					// (see above); a client tries again, as kubectl users do.
					for try := 0; ; try++ {
						err = applyListener(w, i)
						if try == 3 || !(apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err)) {
							break
						}
						retries.Add(1)
					}
				}
			}
			wroteAt[i] = time.Now()
			if apierrors.IsConflict(err) {
				conflicts.Add(1)
			}
			if err != nil {
				failures.Add(1)
				t.Errorf("client %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	figure(t, "clients", n)
	figure(t, "clients_in_flight", inFlight)
	figure(t, "client_retries_after_apiserver_timeouts", retries.Load())
	allWritten := time.Since(start)
	figure(t, "all_written", allWritten)
	if t.Failed() {
		t.FailNow()
	}

	check := func() error {
		if listenerSets {
			return listenerSetsProgrammed(w, n)
		}
		return gatewayListenersProgrammed(w, n)
	}
	eventually(t, 120*time.Second, fmt.Sprintf("all %d listeners programmed", n), check)
	figure(t, "all_programmed", time.Since(start))
	// How long each client waited for its own listener to be Programmed.
	var waits []time.Duration
	for i, at := range seen() {
		waits = append(waits, at.Sub(wroteAt[i]))
	}
	// A figure, not a verdict: the watch may miss a listener that became
	// Programmed between two events (all n are checked Programmed above).
	figure(t, "client_waits_observed", len(waits))
	if len(waits) > 0 {
		slices.Sort(waits)
		figure(t, "client_wait_for_programmed_p50", waits[len(waits)/2])
		figure(t, "client_wait_for_programmed_max", waits[len(waits)-1])
	}
	eventually(t, 30*time.Second, "the shared Gateway programmed", func() error {
		if err := w.gatewayProgrammed("shared", 0); err != nil {
			return err
		}
		if listenerSets {
			var gw gwv1.Gateway
			if err := kubeClient().Get(w.ctx, w.key("shared"), &gw); err != nil {
				return err
			}
			if got := ptr.Deref(gw.Status.AttachedListenerSets, 0); got != int32(n) {
				return fmt.Errorf("attachedListenerSets %d, want %d", got, n)
			}
		}
		return nil
	})
	// Settled: the leader's status queue is empty.
	eventually(t, 10*time.Second, "the status queue drained", func() error {
		if q, err := leader.metric("portico_status_queue_depth", nil); err != nil || q > 0 {
			return fmt.Errorf("queue depth %v (%v)", q, err)
		}
		return nil
	})
	translations, err := leader.metric("portico_translation_duration_seconds_count", nil)
	if err != nil {
		t.Fatal(err)
	}
	translations -= translationsBefore
	written := gatewayWrites(func(r *faultproxy.Record) bool { return r.OK() })
	ourConflicts := gatewayWrites(func(r *faultproxy.Record) bool { return r.Code == 409 })
	figure(t, "translations", int(translations))
	figure(t, "portico_gateway_status_writes", written)
	figure(t, "portico_gateway_status_conflicts", ourConflicts)
	figure(t, "client_conflicts", conflicts.Load())
	if c := conflicts.Load(); c > 0 {
		t.Errorf("clients saw %d write conflicts", c)
	}
	if written > int(translations) {
		t.Errorf("Portico wrote the Gateway's status %d times in %v translations (want at most one write per translation)", written, translations)
	}
	// Coalescing: far fewer writes than listeners, and never more than
	// one per write interval while the clients keep changing them (when
	// the API server is slow, their writes spread over many intervals).
	limit := max(n/4, int(allWritten/status.DefaultWriteInterval)+2)
	if written > limit {
		t.Errorf("Portico wrote the Gateway's status %d times for %d listeners written in %v (want coalescing, ≤ %d)", written, n, allWritten.Round(time.Millisecond), limit)
	}
	for _, r := range others(leader, rs) {
		if k := r.statusWrites(nil); k > 0 {
			t.Errorf("follower %s wrote %d statuses", r.name, k)
		}
	}
}

// watchProgrammed polls (every 100 ms) until the returned function is
// called, noting when each client's listener was first seen Programmed; the
// function returns those times by client.
func watchProgrammed(w *world, n int, listenerSets bool) func() map[int]time.Time {
	seen := map[int]time.Time{}
	stop := make(chan struct{})
	done := make(chan struct{})
	note := func(name string, conds []metav1.Condition) {
		var i int
		if _, err := fmt.Sscanf(name, "https-%03d", &i); err != nil || i < 0 || i >= n {
			return
		}
		if _, ok := seen[i]; ok {
			return
		}
		if c := meta.FindStatusCondition(conds, "Programmed"); c != nil && c.Status == metav1.ConditionTrue {
			seen[i] = time.Now()
		}
	}
	go func() {
		defer close(done)
		for {
			if listenerSets {
				var list gwv1.ListenerSetList
				if kubeClient().List(w.ctx, &list, client.InNamespace(w.ns)) == nil {
					for _, ls := range list.Items {
						for _, l := range ls.Status.Listeners {
							note(string(l.Name), l.Conditions)
						}
					}
				}
			} else {
				var gw gwv1.Gateway
				if kubeClient().Get(w.ctx, w.key("shared"), &gw) == nil {
					for _, l := range gw.Status.Listeners {
						note(string(l.Name), l.Conditions)
					}
				}
			}
			select {
			case <-stop:
				return
			case <-w.ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() map[int]time.Time {
		close(stop)
		<-done
		return seen
	}
}

func hostname(i int) string { return fmt.Sprintf("app-%03d.example.com", i) }

// tlsSecret is a kubernetes.io/tls Secret with a self-signed certificate
// for host.
func tlsSecret(t *testing.T, ns, name, host string) *corev1.Secret {
	t.Helper()
	certPEM, keyPEM, err := testenv.SelfSignedCert(host)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
	}
}

func httpsListener(i int) (gwv1.SectionName, gwv1.Hostname, *gwv1.ListenerTLSConfig) {
	return gwv1.SectionName(fmt.Sprintf("https-%03d", i)), gwv1.Hostname(hostname(i)), &gwv1.ListenerTLSConfig{
		Mode:            ptr.To(gwv1.TLSModeTerminate),
		CertificateRefs: []gwv1.SecretObjectReference{{Name: gwv1.ObjectName(fmt.Sprintf("tls-%03d", i))}},
	}
}

// listenerSet is client i's ListenerSet with its one HTTPS listener.
func listenerSet(w *world, i int) *gwv1.ListenerSet {
	name, host, tls := httpsListener(i)
	return &gwv1.ListenerSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: fmt.Sprintf("app-%03d", i)},
		Spec: gwv1.ListenerSetSpec{
			ParentRef: gwv1.ParentGatewayReference{Name: "shared"},
			Listeners: []gwv1.ListenerEntry{{Name: name, Hostname: &host, Port: 443, Protocol: gwv1.HTTPSProtocolType, TLS: tls}},
		},
	}
}

// applyListener server-side applies client i's listener to the shared
// Gateway, as field manager client-<i>.
func applyListener(w *world, i int) error {
	name, host, tls := httpsListener(i)
	patch := map[string]any{
		"apiVersion": gwv1.GroupVersion.String(),
		"kind":       "Gateway",
		"metadata":   map[string]any{"namespace": w.ns, "name": "shared"},
		"spec": map[string]any{"listeners": []gwv1.Listener{{
			Name: name, Hostname: &host, Port: 443, Protocol: gwv1.HTTPSProtocolType, TLS: tls,
		}}},
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "shared"}}
	return kubeClient().Patch(w.ctx, gw, client.RawPatch(types.ApplyPatchType, data), client.FieldOwner(fmt.Sprintf("client-%03d", i)))
}

func programmedAt(conds []metav1.Condition, gen int64) error {
	c := meta.FindStatusCondition(conds, "Programmed")
	if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != gen {
		return fmt.Errorf("Programmed = %+v (generation %d)", c, gen)
	}
	return nil
}

// listenerSetsProgrammed checks that n ListenerSets are Programmed with
// their listener Programmed.
func listenerSetsProgrammed(w *world, n int) error {
	var list gwv1.ListenerSetList
	if err := kubeClient().List(w.ctx, &list, client.InNamespace(w.ns)); err != nil {
		return err
	}
	ok := 0
	var first error
	for _, ls := range list.Items {
		err := programmedAt(ls.Status.Conditions, ls.Generation)
		if err == nil && (len(ls.Status.Listeners) != 1 || programmedAt(ls.Status.Listeners[0].Conditions, ls.Generation) != nil) {
			err = fmt.Errorf("listener status %+v", ls.Status.Listeners)
		}
		if err != nil {
			if first == nil {
				first = fmt.Errorf("%s: %w", ls.Name, err)
			}
			continue
		}
		ok++
	}
	if ok != n {
		return fmt.Errorf("%d/%d ListenerSets programmed; %v", ok, n, first)
	}
	return nil
}

// gatewayListenersProgrammed checks that the shared Gateway has its HTTP
// listener and n HTTPS listeners, all Programmed at its generation.
func gatewayListenersProgrammed(w *world, n int) error {
	var gw gwv1.Gateway
	if err := kubeClient().Get(w.ctx, w.key("shared"), &gw); err != nil {
		return err
	}
	if len(gw.Spec.Listeners) != n+1 {
		return fmt.Errorf("%d listeners in spec, want %d", len(gw.Spec.Listeners), n+1)
	}
	ok := 0
	var first error
	for _, l := range gw.Status.Listeners {
		if err := programmedAt(l.Conditions, gw.Generation); err != nil {
			if first == nil {
				first = fmt.Errorf("listener %s: %w", l.Name, err)
			}
			continue
		}
		ok++
	}
	if ok != n+1 {
		return errors.Join(fmt.Errorf("%d/%d listeners programmed", ok, n+1), first)
	}
	return nil
}
