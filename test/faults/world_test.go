package faults

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
)

// world is one test's namespace (also where the Lease lives), controller
// name and GatewayClass, so tests never see each other's objects as theirs.
type world struct {
	t          *testing.T
	ctx        context.Context
	ns         string
	class      string
	controller string
}

// newWorld creates a namespace, a ProxyConfig (one Envoy replica, ClusterIP
// address: kwok has no load balancer) and a GatewayClass of a fresh
// controller name.
func newWorld(t *testing.T) *world {
	t.Helper()
	trackResult(t)
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	w := &world{t: t, ctx: ctxT(t), class: "faults-" + id, controller: "portico.dev/faults-" + id}
	c := kubeClient()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "faults-",
		Labels:       map[string]string{"portico.dev/faults": "true"},
	}}
	if err := c.Create(w.ctx, ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	w.ns = ns.Name
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", ns.Name, err)
		}
	})
	eventually(t, 30*time.Second, "the default ServiceAccount of "+w.ns, func() error {
		return c.Get(w.ctx, client.ObjectKey{Namespace: w.ns, Name: "default"}, &corev1.ServiceAccount{})
	})
	w.create(&v1alpha1.ProxyConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "proxies"},
		Spec: v1alpha1.ProxyConfigSpec{
			Replicas: ptr.To[int32](1),
			Service:  v1alpha1.ProxyService{Type: corev1.ServiceTypeClusterIP, AddressFromClusterIP: true},
		},
	})
	gc := &gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: w.class},
		Spec: gwv1.GatewayClassSpec{
			ControllerName: gwv1.GatewayController(w.controller),
			ParametersRef: &gwv1.ParametersReference{
				Group: "portico.dev", Kind: v1alpha1.Kind, Name: "proxies", Namespace: ptr.To(gwv1.Namespace(w.ns)),
			},
		},
	}
	w.create(gc)
	t.Cleanup(func() { _ = c.Delete(context.Background(), gc) })
	return w
}

func (w *world) create(obj client.Object) {
	w.t.Helper()
	if err := kubeClient().Create(w.ctx, obj); err != nil {
		w.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func (w *world) key(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: w.ns, Name: name}
}

// gateway creates a Gateway with an HTTP listener on port 80; mutate (if
// not nil) changes it before it is created.
func (w *world) gateway(name string, mutate func(*gwv1.Gateway)) *gwv1.Gateway {
	w.t.Helper()
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: gwv1.ObjectName(w.class),
			Listeners:        []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}},
		},
	}
	if mutate != nil {
		mutate(gw)
	}
	w.create(gw)
	return gw
}

// service creates a selector-less Service (port 80 → "http") and its
// EndpointSlice with the given ready addresses on port 8080.
func (w *world) service(name string, addrs ...string) {
	w.t.Helper()
	w.create(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "http", Port: 80, TargetPort: intstr.FromString("http"),
		}}},
	})
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: w.ns, Name: name + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: name},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
	}
	setEndpoints(es, addrs)
	w.create(es)
}

func setEndpoints(es *discoveryv1.EndpointSlice, addrs []string) {
	es.Endpoints = nil
	for _, a := range addrs {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{a},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
}

// setEndpoints replaces the addresses of Service svc's EndpointSlice.
func (w *world) setEndpoints(svc string, addrs ...string) {
	w.t.Helper()
	w.update(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: svc + "-1"}},
		func(o client.Object) { setEndpoints(o.(*discoveryv1.EndpointSlice), addrs) })
}

// newRoute is an HTTPRoute attached to Gateway gw forwarding /<name> to
// svc:80.
func (w *world) newRoute(name, gw, svc string) *gwv1.HTTPRoute {
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: gwv1.ObjectName(gw)}}},
			Rules: []gwv1.HTTPRouteRule{{
				Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{
					Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To("/" + name),
				}}},
				BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
					BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(svc), Port: ptr.To[gwv1.PortNumber](80)},
				}}},
			}},
		},
	}
}

func (w *world) route(name, gw, svc string) *gwv1.HTTPRoute {
	w.t.Helper()
	r := w.newRoute(name, gw, svc)
	w.create(r)
	return r
}

// setPath changes route name's path prefix (a spec change: new generation).
func (w *world) setPath(name, path string) {
	w.t.Helper()
	w.update(&gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}, func(o client.Object) {
		o.(*gwv1.HTTPRoute).Spec.Rules[0].Matches[0].Path.Value = ptr.To(path)
	})
}

// update applies mutate to the live object and updates it, retrying on
// conflicts.
func (w *world) update(obj client.Object, mutate func(client.Object)) {
	w.t.Helper()
	if err := updateObject(w.ctx, obj, mutate); err != nil {
		w.t.Fatalf("update %T %s: %v", obj, obj.GetName(), err)
	}
}

func updateObject(ctx context.Context, obj client.Object, mutate func(client.Object)) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := kubeClient().Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if err == nil {
			mutate(obj)
			err = kubeClient().Update(ctx, obj)
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		// Conflicts, and errors while the API server restarts, are retried.
		time.Sleep(20 * time.Millisecond)
	}
}

// ourParent is w's controller's status.parents entry of a route, or nil.
func (w *world) ourParent(rs gwv1.RouteStatus) *gwv1.RouteParentStatus {
	for i := range rs.Parents {
		if string(rs.Parents[i].ControllerName) == w.controller {
			return &rs.Parents[i]
		}
	}
	return nil
}

// routeProblem says what is wrong with a route's status: correct is our
// entry with Accepted=True and ResolvedRefs=True at the route's generation.
func (w *world) routeProblem(r *gwv1.HTTPRoute) string {
	p := w.ourParent(r.Status.RouteStatus)
	if p == nil {
		return "no status of ours"
	}
	for _, typ := range []string{string(gwv1.RouteConditionAccepted), string(gwv1.RouteConditionResolvedRefs)} {
		c := meta.FindStatusCondition(p.Conditions, typ)
		switch {
		case c == nil:
			return typ + " missing"
		case c.Status != metav1.ConditionTrue:
			return fmt.Sprintf("%s=%s (%s)", typ, c.Status, c.Reason)
		case c.ObservedGeneration != r.Generation:
			return fmt.Sprintf("%s observedGeneration %d, generation %d", typ, c.ObservedGeneration, r.Generation)
		}
	}
	return ""
}

// routesCorrect lists the namespace's HTTPRoutes and returns an error
// naming those (of want, or all if want is empty) whose status is not
// correct, with the count.
func (w *world) routesCorrect(want ...string) error {
	bad, err := w.badRoutes(want...)
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d routes not correct, e.g. %s", len(bad), bad[0])
	}
	return nil
}

// badRoutes returns "name: problem" for each route (of want, or all) whose
// status is not correct.
func (w *world) badRoutes(want ...string) ([]string, error) {
	var list gwv1.HTTPRouteList
	if err := kubeClient().List(w.ctx, &list, client.InNamespace(w.ns)); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var bad []string
	for i := range list.Items {
		r := &list.Items[i]
		if len(want) > 0 && !slices.Contains(want, r.Name) {
			continue
		}
		seen[r.Name] = true
		if p := w.routeProblem(r); p != "" {
			bad = append(bad, r.Name+": "+p)
		}
	}
	for _, n := range want {
		if !seen[n] {
			bad = append(bad, n+": not found")
		}
	}
	slices.Sort(bad)
	return bad, nil
}

// gatewayProgrammed checks that Gateway name is Accepted and Programmed at
// its generation, has an address and, if attached >= 0, that many routes
// on its first listener.
func (w *world) gatewayProgrammed(name string, attached int32) error {
	var gw gwv1.Gateway
	if err := kubeClient().Get(w.ctx, w.key(name), &gw); err != nil {
		return err
	}
	for _, typ := range []string{string(gwv1.GatewayConditionAccepted), string(gwv1.GatewayConditionProgrammed)} {
		c := meta.FindStatusCondition(gw.Status.Conditions, typ)
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != gw.Generation {
			return fmt.Errorf("%s = %+v (generation %d)", typ, c, gw.Generation)
		}
	}
	if len(gw.Status.Addresses) == 0 {
		return errors.New("no address")
	}
	if attached >= 0 && (len(gw.Status.Listeners) == 0 || gw.Status.Listeners[0].AttachedRoutes != attached) {
		return fmt.Errorf("listeners %+v, want %d attached routes", gw.Status.Listeners, attached)
	}
	return nil
}

// clientSecret waits for the xDS client certificate Secret of Gateway gw
// (portico-<gw>-xds, see proxyspec.ClientCertSecretName; our names are short).
func (w *world) clientSecret(gw string) *corev1.Secret {
	w.t.Helper()
	var s corev1.Secret
	eventually(w.t, 60*time.Second, "xDS client certificate of "+gw, func() error {
		if err := kubeClient().Get(w.ctx, w.key("portico-"+gw+"-xds"), &s); err != nil {
			return err
		}
		for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
			if len(s.Data[k]) == 0 {
				return fmt.Errorf("no %s", k)
			}
		}
		return nil
	})
	return &s
}

// names returns prefix0 … prefix<n-1>.
func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

func join(xs []string, max int) string {
	if len(xs) > max {
		return strings.Join(xs[:max], "; ") + fmt.Sprintf("; … (%d more)", len(xs)-max)
	}
	return strings.Join(xs, "; ")
}
