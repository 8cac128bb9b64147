package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
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
)

// fixture is one test's world: its own namespace, GatewayClass and
// controller name, so tests do not see each other's objects as theirs.
type fixture struct {
	t          *testing.T
	ctx        context.Context
	ns         string
	class      string
	controller string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	f := &fixture{
		t:          t,
		ctx:        ctxT(t),
		ns:         "t-" + id,
		class:      "portico-" + id,
		controller: "portico.dev/test-" + id,
	}
	f.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}})
	f.create(&gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: f.class},
		Spec:       gwv1.GatewayClassSpec{ControllerName: gwv1.GatewayController(f.controller)},
	})
	return f
}

func (f *fixture) create(obj client.Object) {
	f.t.Helper()
	if err := k8s.Create(f.ctx, obj); err != nil {
		f.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func (f *fixture) key(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: f.ns, Name: name}
}

// gateway creates a Gateway with one HTTP listener on port 80 that accepts
// routes and ListenerSets from all namespaces.
func (f *fixture) gateway(name string) *gwv1.Gateway {
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: gwv1.ObjectName(f.class),
			Listeners: []gwv1.Listener{{
				Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType,
				AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: ptr.To(gwv1.NamespacesFromAll)}},
			}},
			AllowedListeners: &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: ptr.To(gwv1.NamespacesFromAll)}},
		},
	}
	f.create(gw)
	return gw
}

// service creates a Service with port 80 → named target "http" and an
// EndpointSlice with the given ready addresses on port 8080.
func (f *fixture) service(name string, addrs ...string) {
	f.create(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "http", Port: 80, TargetPort: intstr.FromString("http"),
		}}},
	})
	f.create(f.slice(name, addrs...))
}

func (f *fixture) slice(svc string, addrs ...string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: f.ns, Name: svc + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: svc},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
	}
	for _, a := range addrs {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{a},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	return es
}

// route creates an HTTPRoute attached to gateway gw forwarding /<name> to svc.
func (f *fixture) route(name, gw, svc string) *gwv1.HTTPRoute {
	r := &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
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
	f.create(r)
	return r
}

// ourParent returns this fixture's controller's status.parents entry of a
// route, or nil.
func (f *fixture) ourParent(rs gwv1.RouteStatus) *gwv1.RouteParentStatus {
	for i := range rs.Parents {
		if string(rs.Parents[i].ControllerName) == f.controller {
			return &rs.Parents[i]
		}
	}
	return nil
}

// routeAccepted reports whether route name has our Accepted=True and
// ResolvedRefs=True at its current generation.
func (f *fixture) routeAccepted(name string) bool {
	var r gwv1.HTTPRoute
	if err := k8s.Get(f.ctx, f.key(name), &r); err != nil {
		return false
	}
	p := f.ourParent(r.Status.RouteStatus)
	if p == nil {
		return false
	}
	return condIs(p.Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, r.Generation) &&
		condIs(p.Conditions, string(gwv1.RouteConditionResolvedRefs), metav1.ConditionTrue, r.Generation)
}

// gatewayProgrammed reports whether gateway name is Accepted and Programmed
// at its current generation with attachedRoutes on its first listener.
func (f *fixture) gatewayProgrammed(name string, attached int32) bool {
	var gw gwv1.Gateway
	if err := k8s.Get(f.ctx, f.key(name), &gw); err != nil {
		return false
	}
	if !condIs(gw.Status.Conditions, string(gwv1.GatewayConditionAccepted), metav1.ConditionTrue, gw.Generation) ||
		!condIs(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed), metav1.ConditionTrue, gw.Generation) {
		return false
	}
	return len(gw.Status.Listeners) > 0 && gw.Status.Listeners[0].AttachedRoutes == attached
}

func condIs(conds []metav1.Condition, typ string, st metav1.ConditionStatus, gen int64) bool {
	c := meta.FindStatusCondition(conds, typ)
	return c != nil && c.Status == st && c.ObservedGeneration == gen
}

// update applies mutate to the live object and updates it, retrying on
// conflicts.
func update[T client.Object](f *fixture, obj T, mutate func(T)) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			f.t.Fatal(err)
		}
		mutate(obj)
		err := k8s.Update(f.ctx, obj)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) || time.Now().After(deadline) {
			f.t.Fatalf("update %s: %v", obj.GetName(), err)
		}
	}
}

// updateStatus is update for the status subresource.
func updateStatus[T client.Object](f *fixture, obj T, mutate func(T)) {
	f.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			f.t.Fatal(err)
		}
		mutate(obj)
		err := k8s.Status().Update(f.ctx, obj)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) || time.Now().After(deadline) {
			f.t.Fatalf("update status of %s: %v", obj.GetName(), err)
		}
	}
}

func (f *fixture) String() string { return fmt.Sprintf("fixture(%s)", f.ns) }
