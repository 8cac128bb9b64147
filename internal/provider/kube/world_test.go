package kube

import (
	"fmt"
	"math/rand/v2"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/proxyspec"
	"github.com/portico-dev/portico/internal/resource"
)

// world makes random objects of every input kind over a small universe of
// names, so that random operations collide: updates, label changes,
// deletions and re-creations of the same objects.
type world struct {
	rng *rand.Rand
	rv  int
	// size is the number of names per kind and namespace.
	size, namespaces int
}

func (w *world) meta(ns, name string) metav1.ObjectMeta {
	w.rv++
	return metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: fmt.Sprint(w.rv), Generation: int64(w.rv)}
}

func (w *world) ns() string           { return fmt.Sprintf("ns%d", w.rng.IntN(w.namespaces)) }
func (w *world) name(p string) string { return fmt.Sprintf("%s%d", p, w.rng.IntN(w.size)) }

func (w *world) backend() gwv1.BackendObjectReference {
	ref := gwv1.BackendObjectReference{Name: gwv1.ObjectName(w.name("svc"))}
	switch w.rng.IntN(6) {
	case 0:
		ref.Namespace = ptr.To(gwv1.Namespace(w.ns()))
	case 1:
		ref.Kind = ptr.To(gwv1.Kind("Other"))
	case 2:
		ref.Group = ptr.To(gwv1.Group("example.com"))
	}
	return ref
}

func (w *world) tls() *gwv1.ListenerTLSConfig {
	if w.rng.IntN(3) == 0 {
		return nil
	}
	t := &gwv1.ListenerTLSConfig{}
	for range w.rng.IntN(3) {
		ref := gwv1.SecretObjectReference{Name: gwv1.ObjectName(w.name("sec"))}
		if w.rng.IntN(4) == 0 {
			ref.Namespace = ptr.To(gwv1.Namespace(w.ns()))
		}
		t.CertificateRefs = append(t.CertificateRefs, ref)
	}
	return t
}

func (w *world) httpRoute(ns, name string) *gwv1.HTTPRoute {
	r := &gwv1.HTTPRoute{ObjectMeta: w.meta(ns, name)}
	for range w.rng.IntN(3) {
		rule := gwv1.HTTPRouteRule{}
		for range w.rng.IntN(3) {
			rule.BackendRefs = append(rule.BackendRefs, gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: w.backend()}})
		}
		if w.rng.IntN(4) == 0 {
			rule.Filters = append(rule.Filters, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestMirror,
				RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: w.backend()}})
		}
		r.Spec.Rules = append(r.Spec.Rules, rule)
	}
	return r
}

func (w *world) grpcRoute(ns, name string) *gwv1.GRPCRoute {
	r := &gwv1.GRPCRoute{ObjectMeta: w.meta(ns, name)}
	rule := gwv1.GRPCRouteRule{}
	for range w.rng.IntN(3) {
		rule.BackendRefs = append(rule.BackendRefs, gwv1.GRPCBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: w.backend()}})
	}
	r.Spec.Rules = append(r.Spec.Rules, rule)
	return r
}

func (w *world) slice(ns, name string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{ObjectMeta: w.meta(ns, name)}
	if w.rng.IntN(5) > 0 {
		es.Labels = map[string]string{discoveryv1.LabelServiceName: w.name("svc")}
	}
	return es
}

func (w *world) provisioned(m *metav1.ObjectMeta) {
	if w.rng.IntN(2) == 0 {
		m.Labels = map[string]string{proxyspec.LabelManagedBy: proxyspec.ManagedByValue, proxyspec.LabelGatewayName: "gw"}
	}
}

// object returns a new version of a random object of kind k (a new object
// or the next version of an existing one: names collide).
func (w *world) object(k resource.Kind) client.Object {
	ns := w.ns()
	switch k {
	case resource.KindGatewayClass:
		return &gwv1.GatewayClass{ObjectMeta: w.meta("", w.name("gc"))}
	case resource.KindGateway:
		g := &gwv1.Gateway{ObjectMeta: w.meta(ns, w.name("gw"))}
		for range w.rng.IntN(3) {
			g.Spec.Listeners = append(g.Spec.Listeners, gwv1.Listener{TLS: w.tls()})
		}
		return g
	case resource.KindListenerSet:
		l := &gwv1.ListenerSet{ObjectMeta: w.meta(ns, w.name("ls"))}
		for range w.rng.IntN(3) {
			l.Spec.Listeners = append(l.Spec.Listeners, gwv1.ListenerEntry{TLS: w.tls()})
		}
		return l
	case resource.KindHTTPRoute:
		return w.httpRoute(ns, w.name("r"))
	case resource.KindGRPCRoute:
		return w.grpcRoute(ns, w.name("g"))
	case resource.KindReferenceGrant:
		return &gwv1beta1.ReferenceGrant{ObjectMeta: w.meta(ns, w.name("rg"))}
	case resource.KindService:
		s := &corev1.Service{ObjectMeta: w.meta(ns, w.name("svc"))}
		w.provisioned(&s.ObjectMeta)
		return s
	case resource.KindEndpointSlice:
		return w.slice(ns, w.name("es"))
	case resource.KindSecret:
		return &corev1.Secret{ObjectMeta: w.meta(ns, w.name("sec"))}
	case resource.KindNamespace:
		n := &corev1.Namespace{ObjectMeta: w.meta("", ns)}
		n.Labels = map[string]string{"team": fmt.Sprint(w.rng.IntN(2))}
		return n
	case resource.KindProxyConfig:
		return &v1alpha1.ProxyConfig{ObjectMeta: w.meta(ns, w.name("pc"))}
	case resource.KindDeployment:
		d := &appsv1.Deployment{ObjectMeta: w.meta(ns, w.name("envoy"))}
		w.provisioned(&d.ObjectMeta)
		d.Status.AvailableReplicas = int32(w.rng.IntN(3))
		return d
	}
	panic(k)
}

// statusOnly returns old with a new resourceVersion and status and
// everything else kept, for kinds with status (others: nil).
func (w *world) statusOnly(old client.Object) client.Object {
	w.rv++
	rv := fmt.Sprint(w.rv)
	switch o := old.(type) {
	case *gwv1.HTTPRoute:
		n := o.DeepCopy()
		n.ResourceVersion = rv
		n.Status.Parents = []gwv1.RouteParentStatus{{ControllerName: gwv1.GatewayController(rv)}}
		return n
	case *gwv1.Gateway:
		n := o.DeepCopy()
		n.ResourceVersion = rv
		n.Status.Conditions = []metav1.Condition{{Type: rv}}
		return n
	case *corev1.Namespace:
		// Labels kept: the update does not matter.
		n := o.DeepCopy()
		n.ResourceVersion = rv
		n.Annotations = map[string]string{"rv": rv}
		return n
	}
	return nil
}
