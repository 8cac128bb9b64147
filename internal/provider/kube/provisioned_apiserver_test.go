package kube

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/internal/proxyspec"
	"github.com/portico-dev/portico/internal/testenv"
)

// observations records what a provider reported to InfraObserve.
type observations struct {
	mu   sync.Mutex
	seen []string // "Kind ns/name"
}

func (o *observations) observe(obj client.Object) {
	kind := fmt.Sprintf("%T", obj)
	switch obj.(type) {
	case *policyv1.PodDisruptionBudget:
		kind = "PodDisruptionBudget"
	case *autoscalingv2.HorizontalPodAutoscaler:
		kind = "HorizontalPodAutoscaler"
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, kind+" "+obj.GetNamespace()+"/"+obj.GetName())
}

func (o *observations) count(what string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, s := range o.seen {
		if s == what {
			n++
		}
	}
	return n
}

func (o *observations) all() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.seen)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The provider caches the PodDisruptionBudgets and HorizontalPodAutoscalers
// Portico provisioned, and only those, and reports an edit of their spec
// or labels and their deletion (so that the leader restores them), not a
// change of their status.
func TestProvisionedBudgetsAndAutoscalersAreObserved(t *testing.T) {
	cfg, _ := testenv.StartAPIServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	scheme := NewScheme()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	var obs observations
	p, err := New(Config{RESTConfig: cfg, Scheme: scheme, InfraObserve: obs.observe})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("provider: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("provider did not stop")
		}
	})
	waitFor(t, 30*time.Second, "caches synced", func() (bool, string) { return p.Synced(), "not synced" })

	const ns = "apps"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	name := proxyspec.Name("edge")
	ours := proxyspec.Labels(ns, "edge")
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: ours},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: ours},
		},
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: ours},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinReplicas:    ptr.To[int32](2),
			MaxReplicas:    4,
		},
	}
	// Someone else's, of the same kinds: never cached.
	theirPDB := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1))},
	}
	theirHPA := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "app"},
			MaxReplicas:    3,
		},
	}
	for _, o := range []client.Object{pdb, hpa, theirPDB, theirHPA} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}

	cached := func() (bool, string) {
		var pdbs policyv1.PodDisruptionBudgetList
		var hpas autoscalingv2.HorizontalPodAutoscalerList
		if err := p.Cache().List(ctx, &pdbs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		if err := p.Cache().List(ctx, &hpas, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var names []string
		for _, x := range pdbs.Items {
			names = append(names, "PodDisruptionBudget "+x.Name)
		}
		for _, x := range hpas.Items {
			names = append(names, "HorizontalPodAutoscaler "+x.Name)
		}
		want := []string{"PodDisruptionBudget " + name, "HorizontalPodAutoscaler " + name}
		return slices.Equal(names, want), fmt.Sprintf("cached %v, want %v", names, want)
	}
	waitFor(t, 10*time.Second, "the provisioned budget and autoscaler in the cache, and no other", cached)
	if got := obs.all(); len(got) != 0 {
		t.Errorf("creations were reported as edits: %v", got)
	}

	// Status changes are not reported (the autoscaler and the disruption
	// controller write them all the time).
	var live autoscalingv2.HorizontalPodAutoscaler
	if err := c.Get(ctx, client.ObjectKeyFromObject(hpa), &live); err != nil {
		t.Fatal(err)
	}
	live.Status = autoscalingv2.HorizontalPodAutoscalerStatus{CurrentReplicas: 2, DesiredReplicas: 3}
	if err := c.Status().Update(ctx, &live); err != nil {
		t.Fatal(err)
	}
	var livePDB policyv1.PodDisruptionBudget
	if err := c.Get(ctx, client.ObjectKeyFromObject(pdb), &livePDB); err != nil {
		t.Fatal(err)
	}
	livePDB.Status = policyv1.PodDisruptionBudgetStatus{CurrentHealthy: 2, DesiredHealthy: 1, ExpectedPods: 2, DisruptionsAllowed: 1}
	if err := c.Status().Update(ctx, &livePDB); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the status updates in the cache", func() (bool, string) {
		var h autoscalingv2.HorizontalPodAutoscaler
		var b policyv1.PodDisruptionBudget
		if err := p.Cache().Get(ctx, client.ObjectKeyFromObject(hpa), &h); err != nil {
			return false, err.Error()
		}
		if err := p.Cache().Get(ctx, client.ObjectKeyFromObject(pdb), &b); err != nil {
			return false, err.Error()
		}
		return h.Status.DesiredReplicas == 3 && b.Status.DisruptionsAllowed == 1, fmt.Sprintf("%+v, %+v", h.Status, b.Status)
	})

	// Edits of the spec are.
	live.Status = autoscalingv2.HorizontalPodAutoscalerStatus{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(hpa), &live); err != nil {
		t.Fatal(err)
	}
	live.Spec.MaxReplicas = 40
	if err := c.Update(ctx, &live); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pdb), &livePDB); err != nil {
		t.Fatal(err)
	}
	livePDB.Spec.MaxUnavailable = ptr.To(intstr.FromString("100%"))
	if err := c.Update(ctx, &livePDB); err != nil {
		t.Fatal(err)
	}
	hpaKey, pdbKey := "HorizontalPodAutoscaler "+ns+"/"+name, "PodDisruptionBudget "+ns+"/"+name
	waitFor(t, 10*time.Second, "the spec edits reported", func() (bool, string) {
		return obs.count(hpaKey) == 1 && obs.count(pdbKey) == 1, fmt.Sprintf("reported %v", obs.all())
	})

	// Someone else's are not, even edited.
	var theirs autoscalingv2.HorizontalPodAutoscaler
	if err := c.Get(ctx, client.ObjectKeyFromObject(theirHPA), &theirs); err != nil {
		t.Fatal(err)
	}
	theirs.Spec.MaxReplicas = 30
	if err := c.Update(ctx, &theirs); err != nil {
		t.Fatal(err)
	}

	// Deletions are reported.
	for _, o := range []client.Object{&live, &livePDB} {
		if err := c.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "the deletions reported", func() (bool, string) {
		return obs.count(hpaKey) == 2 && obs.count(pdbKey) == 2, fmt.Sprintf("reported %v", obs.all())
	})
	for _, s := range obs.all() {
		if s != hpaKey && s != pdbKey {
			t.Errorf("reported %s, which Portico did not provision", s)
		}
	}
}

// infraChanged: of budgets and autoscalers, spec and metadata edits count,
// status changes do not.
func TestInfraChangedBudgetsAndAutoscalers(t *testing.T) {
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Generation: 1, Labels: map[string]string{"a": "b"}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 4}}
	status := hpa.DeepCopy()
	status.Status.DesiredReplicas = 3
	spec := hpa.DeepCopy()
	spec.Spec.MaxReplicas = 5
	labels := hpa.DeepCopy()
	labels.Labels["a"] = "c"
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Generation: 1},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))}}
	pdbStatus := pdb.DeepCopy()
	pdbStatus.Status.DisruptionsAllowed = 1
	pdbSpec := pdb.DeepCopy()
	pdbSpec.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	for _, tc := range []struct {
		name string
		a, b client.Object
		want bool
	}{
		{"autoscaler status", hpa, status, false},
		{"autoscaler spec", hpa, spec, true},
		{"autoscaler labels", hpa, labels, true},
		{"budget status", pdb, pdbStatus, false},
		{"budget spec", pdb, pdbSpec, true},
	} {
		if got := infraChanged(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: infraChanged = %v, want %v", tc.name, got, tc.want)
		}
	}
}
