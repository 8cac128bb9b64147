package e2e

import (
	"errors"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/proxyspec"
)

// createGateway creates the world's GatewayClass, a ProxyConfig (one
// replica, ClusterIP address: kwok has no load balancer) and a Gateway
// with an HTTP listener and an infrastructure label.
func createGateway(t *testing.T, w world, name string) *gwv1.Gateway {
	t.Helper()
	return createGatewayWith(t, w, name, v1alpha1.ProxyConfigSpec{
		Replicas: ptr.To[int32](1),
		Service:  v1alpha1.ProxyService{Type: corev1.ServiceTypeClusterIP, AddressFromClusterIP: true},
	}, &gwv1.GatewayInfrastructure{Labels: map[gwv1.LabelKey]gwv1.LabelValue{"team": "edge"}})
}

// createGatewayWith creates the world's GatewayClass (if absent), its
// ProxyConfig "proxies" with spec (if absent) and a Gateway with an HTTP
// listener and infrastructure inf.
func createGatewayWith(t *testing.T, w world, name string, spec v1alpha1.ProxyConfigSpec, inf *gwv1.GatewayInfrastructure) *gwv1.Gateway {
	t.Helper()
	ctx := ctxT(t)
	c := kubeClient()
	gc := &gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: w.class},
		Spec: gwv1.GatewayClassSpec{
			ControllerName: gwv1.GatewayController(w.controller),
			ParametersRef: &gwv1.ParametersReference{
				Group: "portico.dev", Kind: v1alpha1.Kind, Name: "proxies", Namespace: ptr.To(gwv1.Namespace(w.ns)),
			},
		},
	}
	if err := c.Create(ctx, gc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, gc) })
	pc := &v1alpha1.ProxyConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "proxies"},
		Spec:       spec,
	}
	if err := c.Create(ctx, pc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: gwv1.ObjectName(w.class),
			Listeners:        []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}},
			Infrastructure:   inf,
		},
	}
	if err := c.Create(ctx, gw); err != nil {
		t.Fatal(err)
	}
	return gw
}

// provisioned returns the four objects of Gateway ns/gw, or an error
// saying which is missing.
func provisioned(t *testing.T, ns, gw string) ([]client.Object, error) {
	ctx := ctxT(t)
	key := types.NamespacedName{Namespace: ns, Name: proxyspec.Name(gw)}
	objs := []client.Object{&corev1.ServiceAccount{}, &corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}}
	for _, o := range objs {
		if err := kubeClient().Get(ctx, key, o); err != nil {
			return nil, fmt.Errorf("%T %s: %w", o, key, err)
		}
	}
	return objs, nil
}

func gatewayProgrammed(t *testing.T, ns, name string) error {
	var gw gwv1.Gateway
	if err := kubeClient().Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: name}, &gw); err != nil {
		return err
	}
	c := meta.FindStatusCondition(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed))
	if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != gw.Generation {
		return fmt.Errorf("Programmed = %+v", c)
	}
	if len(gw.Status.Addresses) == 0 {
		return errors.New("no address")
	}
	return nil
}

// A Gateway gets its ServiceAccount, ConfigMap, Deployment and Service,
// owned by the Gateway and written by field manager portico; its pods
// become Ready and the Gateway Programmed with an address; a deleted
// Deployment is restored; a deleted Gateway's objects are removed.
func TestGatewayProxiesLifecycle(t *testing.T) {
	w := newWorld(t)
	startReplica(t, w, "solo")
	gw := createGateway(t, w, "edge")
	ctx := ctxT(t)
	c := kubeClient()

	var objs []client.Object
	eventually(t, 60*time.Second, "provisioned objects", func() (err error) {
		objs, err = provisioned(t, w.ns, gw.Name)
		return err
	})
	var live gwv1.Gateway
	if err := c.Get(ctx, client.ObjectKeyFromObject(gw), &live); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		refs := o.GetOwnerReferences()
		if len(refs) != 1 || refs[0].Kind != "Gateway" || refs[0].UID != live.UID || refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("%T owner references = %+v", o, refs)
		}
		managers := map[string]metav1.ManagedFieldsOperationType{}
		for _, mf := range o.GetManagedFields() {
			if mf.Subresource == "" {
				managers[mf.Manager] = mf.Operation
			}
		}
		if managers[proxyspec.FieldManager] != metav1.ManagedFieldsOperationApply || len(managers) != 1 {
			t.Errorf("%T spec managers = %v, want only %q (Apply)", o, managers, proxyspec.FieldManager)
		}
		if o.GetLabels()["team"] != "edge" {
			t.Errorf("%T did not get spec.infrastructure labels: %v", o, o.GetLabels())
		}
	}

	eventually(t, 60*time.Second, "Envoy pods ready and the Gateway programmed", func() error {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(w.ns), client.MatchingLabels{proxyspec.LabelGatewayName: gw.Name}); err != nil {
			return err
		}
		ready := 0
		for _, p := range pods.Items {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready == 0 {
			return fmt.Errorf("%d pods, none ready", len(pods.Items))
		}
		return gatewayProgrammed(t, w.ns, gw.Name)
	})

	// A deleted Deployment is restored.
	dep := objs[2].(*appsv1.Deployment)
	if err := c.Delete(ctx, dep); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "Deployment restored", func() error {
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKeyFromObject(dep), &d); err != nil {
			return err
		}
		if d.UID == dep.UID {
			return errors.New("still the deleted one")
		}
		return nil
	})
	// An edited field of ours is restored too.
	eventually(t, 10*time.Second, "scaling the Deployment by hand", func() error {
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKeyFromObject(dep), &d); err != nil {
			return err
		}
		d.Spec.Replicas = ptr.To[int32](5)
		return c.Update(ctx, &d) // a conflict with the controllers is retried
	})
	eventually(t, 30*time.Second, "Deployment replicas restored", func() error {
		var x appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKeyFromObject(dep), &x); err != nil {
			return err
		}
		if *x.Spec.Replicas != 1 {
			return fmt.Errorf("replicas = %d", *x.Spec.Replicas)
		}
		return nil
	})

	// Deleting the Gateway removes its objects (Portico deletes them; the
	// garbage collector would too, later).
	if err := c.Delete(ctx, &live); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "objects of the deleted Gateway removed", func() error {
		_, err := provisioned(t, w.ns, gw.Name)
		if err == nil {
			return errors.New("objects still exist")
		}
		if !apierrors.IsNotFound(errors.Unwrap(err)) {
			return err
		}
		return nil
	})
}

// Two replicas: only the leader writes provisioned objects. When the
// leader stops, an orphan left behind is removed, and an object Portico
// does not control is never deleted.
func TestOnlyLeaderProvisions(t *testing.T) {
	w := newWorld(t)
	a, b := startReplica(t, w, "a"), startReplica(t, w, "b")
	gw := createGateway(t, w, "edge")
	eventually(t, 60*time.Second, "Gateway programmed", func() error { return gatewayProgrammed(t, w.ns, gw.Name) })
	var leader, follower *replica
	switch {
	case a.c.IsLeader():
		leader, follower = a, b
	case b.c.IsLeader():
		leader, follower = b, a
	default:
		t.Fatal("no leader")
	}
	if n := follower.writes.infraWrites(); n != 0 {
		t.Errorf("follower %s wrote %d provisioned objects", follower.name, n)
	}
	if n := leader.writes.infraWrites(); n < 4 {
		t.Errorf("leader %s wrote %d provisioned objects, want at least 4", leader.name, n)
	}
	t.Logf("writes: leader %v, follower %v", leader.writes.counts, follower.writes.counts)

	// An orphan: an object provisioned for a Gateway that no longer exists
	// (controlled by Gateway "ghost"), left behind when the leader stops;
	// it must be gone once the successor leads (its sweep, or the garbage
	// collector, removes it). And a look-alike: an object with the same
	// labels that no Gateway controls (anyone may label an object); Portico
	// never deletes what it does not control, so it stays. Both are
	// created before the leader stops: a follower takes a released Lease
	// over within milliseconds, and the sweep runs when a term starts.
	ctx := ctxT(t)
	orphan := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: w.ns, Name: proxyspec.Name("ghost"), Labels: proxyspec.Labels(w.ns, "ghost"),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway", Name: "ghost",
			UID: types.UID("00000000-0000-0000-0000-00000000dead"), Controller: ptr.To(true)}},
	}}
	lookalike := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace: w.ns, Name: proxyspec.Name("phantom"), Labels: proxyspec.Labels(w.ns, "phantom"),
	}}
	for _, o := range []*corev1.ConfigMap{orphan, lookalike} {
		if err := kubeClient().Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	leader.stop(t)
	eventually(t, 15*time.Second, "successor leads", func() error {
		if !follower.c.IsLeader() {
			return errors.New("not leader yet")
		}
		return nil
	})
	eventually(t, 30*time.Second, "orphan removed once the successor leads", func() error {
		err := kubeClient().Get(ctx, client.ObjectKeyFromObject(orphan), &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("orphan still there (err %v)", err)
	})
	if err := kubeClient().Get(ctx, client.ObjectKeyFromObject(lookalike), &corev1.ConfigMap{}); err != nil {
		t.Errorf("an object no Gateway controls was deleted: %v", err)
	}
	if _, err := provisioned(t, w.ns, gw.Name); err != nil {
		t.Errorf("the live Gateway's objects were swept: %v", err)
	}
}
