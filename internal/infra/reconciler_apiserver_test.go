package infra

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/proxyspec"
	"github.com/portico-dev/portico/internal/testenv"
)

// apiReconciler is a leading Reconciler against a real API server (no
// controller-manager: nothing scales, garbage-collects or schedules),
// reading through the uncached client.
type apiReconciler struct {
	*Reconciler
	c   client.Client
	dmu sync.Mutex
	// done counts each Gateway's successful writes or removals.
	done map[types.NamespacedName]int
}

func startAPIReconciler(t *testing.T) *apiReconciler {
	t.Helper()
	cfg, _ := testenv.StartAPIServer(t)
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	r := New(Config{Client: c, Reader: c, Params: params, BaseDelay: 10 * time.Millisecond, MaxDelay: 200 * time.Millisecond})
	a := &apiReconciler{Reconciler: r, c: c, done: map[types.NamespacedName]int{}}
	r.processed = func(k types.NamespacedName, err error) {
		if err == nil {
			a.dmu.Lock()
			a.done[k]++
			a.dmu.Unlock()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-stopped })
	r.SetLeading(ctx)
	return a
}

func (a *apiReconciler) doneOf(gw *gwv1.Gateway) int {
	a.dmu.Lock()
	defer a.dmu.Unlock()
	return a.done[types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}]
}

// publishAndWait publishes spec and waits for the Gateway's objects to be
// written (or removed, with remove set) once more.
func (a *apiReconciler) publishAndWait(t *testing.T, spec proxyspec.Spec, remove bool) {
	t.Helper()
	before := a.doneOf(spec.Gateway)
	if remove {
		a.Publish(nil)
	} else {
		a.Publish([]proxyspec.Spec{spec})
	}
	a.waitDone(t, spec.Gateway, before)
}

// observeAndWait reports a change of the Gateway's Deployment (as the
// informers do when the autoscaler scales it) and waits for the write
// that follows.
func (a *apiReconciler) observeAndWait(t *testing.T, gw *gwv1.Gateway, dep *appsv1.Deployment) {
	t.Helper()
	before := a.doneOf(gw)
	a.Observe(dep)
	a.waitDone(t, gw, before)
}

func (a *apiReconciler) waitDone(t *testing.T, gw *gwv1.Gateway, before int) {
	t.Helper()
	waitFor(t, 30*time.Second, "the Gateway's objects written", func() error {
		if n := a.doneOf(gw); n <= before {
			return fmt.Errorf("%d successful writes", n-before)
		}
		return nil
	})
}

func (a *apiReconciler) deployment(t *testing.T, gw *gwv1.Gateway) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	if err := a.c.Get(context.Background(), types.NamespacedName{Namespace: gw.Namespace, Name: proxyspec.Name(gw.Name)}, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

// scale writes the Deployment's replicas through the scale subresource,
// as a HorizontalPodAutoscaler does.
func (a *apiReconciler) scale(t *testing.T, dep *appsv1.Deployment, n int32) {
	t.Helper()
	sc := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: n}}
	if err := a.c.SubResource("scale").Update(context.Background(), dep, client.WithSubResourceBody(sc), client.FieldOwner("test-autoscaler")); err != nil {
		t.Fatal(err)
	}
	var live appsv1.Deployment
	if err := a.c.Get(context.Background(), client.ObjectKeyFromObject(dep), &live); err != nil {
		t.Fatal(err)
	}
	if got := *live.Spec.Replicas; got != n {
		t.Fatalf("scaled to %d, replicas = %d", n, got)
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func gatewayIn(ns, name string) *gwv1.Gateway {
	return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)},
		Spec: gwv1.GatewaySpec{GatewayClassName: "portico"}}
}

// Against a real API server: the PodDisruptionBudget is created; the
// HorizontalPodAutoscaler exists exactly while autoscaling is set and owns
// the replicas then (Portico's applies do not reset what it scaled); a
// Deployment whose replicas Portico set keeps them when autoscaling is
// turned on; a removed Gateway's budget and autoscaler are deleted.
func TestReconcilerDisruptionBudgetAndAutoscaler(t *testing.T) {
	a := startAPIReconciler(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}
	if err := a.c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	autoscaling := &v1alpha1.ProxyAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 5, TargetMemoryUtilizationPercentage: ptr.To[int32](70)}

	t.Run("autoscaled from the start", func(t *testing.T) {
		gw := gatewayIn("apps", "auto")
		spec := proxyspec.Spec{Gateway: gw, Ports: []int32{80}, Proxy: v1alpha1.ProxyConfigSpec{Autoscaling: autoscaling}}
		a.publishAndWait(t, spec, false)
		key := types.NamespacedName{Namespace: "apps", Name: proxyspec.Name(gw.Name)}

		var hpa autoscalingv2.HorizontalPodAutoscaler
		if err := a.c.Get(ctx, key, &hpa); err != nil {
			t.Fatal(err)
		}
		if hpa.Spec.ScaleTargetRef != (autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: key.Name}) ||
			ptr.Deref(hpa.Spec.MinReplicas, 0) != 2 || hpa.Spec.MaxReplicas != 5 || len(hpa.Spec.Metrics) != 1 ||
			hpa.Spec.Metrics[0].ContainerResource == nil || hpa.Spec.Metrics[0].ContainerResource.Name != corev1.ResourceMemory ||
			ptr.Deref(hpa.Spec.Metrics[0].ContainerResource.Target.AverageUtilization, 0) != 70 {
			t.Errorf("HPA spec = %+v", hpa.Spec)
		}
		checkControlledBy(t, &hpa, gw)
		var pdb policyv1.PodDisruptionBudget
		if err := a.c.Get(ctx, key, &pdb); err != nil {
			t.Fatal(err)
		}
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || pdb.Spec.MinAvailable != nil ||
			pdb.Spec.Selector == nil || pdb.Spec.Selector.MatchLabels[proxyspec.LabelGatewayName] != gw.Name {
			t.Errorf("PDB spec = %+v", pdb.Spec)
		}
		checkControlledBy(t, &pdb, gw)

		dep := a.deployment(t, gw)
		if ownsReplicas(dep.ManagedFields, proxyspec.FieldManager) {
			t.Errorf("Portico owns the replicas of an autoscaled Deployment")
		}
		// The autoscaler scales; Portico's next apply leaves it be.
		a.scale(t, dep, 4)
		a.observeAndWait(t, gw, dep)
		if got := *a.deployment(t, gw).Spec.Replicas; got != 4 {
			t.Errorf("after Portico's apply, replicas = %d, want the autoscaler's 4", got)
		}

		// Autoscaling off: the HPA goes, Portico sets replicas.
		spec.Proxy = v1alpha1.ProxyConfigSpec{Replicas: ptr.To[int32](3)}
		a.publishAndWait(t, spec, false)
		if err := a.c.Get(ctx, key, &autoscalingv2.HorizontalPodAutoscaler{}); !apierrors.IsNotFound(err) {
			t.Errorf("HPA after autoscaling was turned off: %v, want NotFound", err)
		}
		if got := *a.deployment(t, gw).Spec.Replicas; got != 3 {
			t.Errorf("replicas = %d, want the ProxyConfig's 3", got)
		}

		// On again, then the Gateway goes: everything is deleted.
		spec.Proxy = v1alpha1.ProxyConfigSpec{Autoscaling: autoscaling}
		a.publishAndWait(t, spec, false)
		a.publishAndWait(t, spec, true)
		waitFor(t, 30*time.Second, "the removed Gateway's objects deleted", func() error {
			for _, o := range []client.Object{&policyv1.PodDisruptionBudget{}, &autoscalingv2.HorizontalPodAutoscaler{}, &appsv1.Deployment{}, &corev1.Service{}} {
				if err := a.c.Get(ctx, key, o); !apierrors.IsNotFound(err) {
					return fmt.Errorf("%T: %v", o, err)
				}
			}
			return nil
		})
	})

	t.Run("autoscaling turned on keeps the replicas", func(t *testing.T) {
		gw := gatewayIn("apps", "grow")
		spec := proxyspec.Spec{Gateway: gw, Ports: []int32{80}, Proxy: v1alpha1.ProxyConfigSpec{Replicas: ptr.To[int32](5)}}
		a.publishAndWait(t, spec, false)
		if got := *a.deployment(t, gw).Spec.Replicas; got != 5 {
			t.Fatalf("replicas = %d, want 5", got)
		}
		spec.Proxy = v1alpha1.ProxyConfigSpec{Autoscaling: autoscaling}
		a.publishAndWait(t, spec, false)
		dep := a.deployment(t, gw)
		if got := *dep.Spec.Replicas; got != 5 {
			t.Errorf("after autoscaling was turned on, replicas = %d, want 5 kept until the autoscaler scales", got)
		}
		if ownsReplicas(dep.ManagedFields, proxyspec.FieldManager) || !ownsReplicas(dep.ManagedFields, ReplicasFieldManager) {
			t.Errorf("replicas managers: %v", managersOf(dep))
		}
		a.scale(t, dep, 2)
		a.observeAndWait(t, gw, dep)
		dep = a.deployment(t, gw)
		if got := *dep.Spec.Replicas; got != 2 {
			t.Errorf("after Portico's apply, replicas = %d, want the autoscaler's 2", got)
		}
		// Nobody but the autoscaler holds them now.
		if ownsReplicas(dep.ManagedFields, ReplicasFieldManager) {
			t.Errorf("the hand-over manager still owns the replicas: %v", managersOf(dep))
		}
	})

	t.Run("an autoscaler of the name that is not the Gateway's", func(t *testing.T) {
		gw := gatewayIn("apps", "taken")
		foreign := &autoscalingv2.HorizontalPodAutoscaler{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: proxyspec.Name(gw.Name)},
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "other"},
				MaxReplicas:    3,
			},
		}
		if err := a.c.Create(ctx, foreign); err != nil {
			t.Fatal(err)
		}
		// Without autoscaling it is left alone and blocks nothing.
		a.publishAndWait(t, proxyspec.Spec{Gateway: gw, Ports: []int32{80}}, false)
		if err := a.c.Get(ctx, client.ObjectKeyFromObject(foreign), &autoscalingv2.HorizontalPodAutoscaler{}); err != nil {
			t.Errorf("a foreign HPA was deleted: %v", err)
		}
		// With autoscaling, Portico does not take it over.
		a.Publish([]proxyspec.Spec{{Gateway: gw, Ports: []int32{80}, Proxy: v1alpha1.ProxyConfigSpec{Autoscaling: autoscaling}}})
		waitFor(t, 30*time.Second, "the Gateway blocked", func() error {
			a.Reconciler.mu.Lock()
			defer a.Reconciler.mu.Unlock()
			if _, ok := a.blocked[types.NamespacedName{Namespace: "apps", Name: gw.Name}]; !ok {
				return errors.New("not blocked")
			}
			return nil
		})
		var hpa autoscalingv2.HorizontalPodAutoscaler
		if err := a.c.Get(ctx, client.ObjectKeyFromObject(foreign), &hpa); err != nil || hpa.Spec.ScaleTargetRef.Name != "other" {
			t.Errorf("the foreign HPA was written: %+v (%v)", hpa.Spec, err)
		}
	})
}

func checkControlledBy(t *testing.T, o client.Object, gw *gwv1.Gateway) {
	t.Helper()
	c := metav1.GetControllerOf(o)
	if c == nil || c.Kind != "Gateway" || c.Name != gw.Name || c.UID != gw.UID {
		t.Errorf("%T controller = %+v", o, c)
	}
}

func managersOf(o client.Object) []string {
	var out []string
	for _, mf := range o.GetManagedFields() {
		out = append(out, fmt.Sprintf("%s/%s/%s", mf.Manager, mf.Operation, mf.Subresource))
	}
	return out
}
