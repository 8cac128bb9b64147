package kube

import (
	"context"
	"errors"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/resource"
)

// benchWorld fills a fake cluster the way test/bench does: n HTTPRoutes
// over 10 namespaces and 4 Gateways, each route with its own Service and
// EndpointSlice (two endpoints), and n TLS Secrets (one referenced).
func benchWorld(b *testing.B, n int) *fakeCluster {
	f := newFakeCluster(b)
	f.apply(b, &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "portico", ResourceVersion: "1"}})
	for i := range 10 {
		f.apply(b, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", i), ResourceVersion: "1"}})
	}
	for g := range 4 {
		f.apply(b, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "bench-0", Name: fmt.Sprintf("gw%d", g), ResourceVersion: "1"},
			Spec: gwv1.GatewaySpec{GatewayClassName: "portico", Listeners: []gwv1.Listener{{Name: "https", Port: 443,
				TLS: &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "secret0"}}}}}}})
	}
	for i := range n {
		ns := fmt.Sprintf("bench-%d", i%10)
		f.apply(b, benchRoute(ns, i, "1"))
		f.apply(b, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("svc%d", i), ResourceVersion: "1"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}}})
		f.apply(b, benchSlice(ns, i, "1"))
		f.apply(b, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("secret%d", i), ResourceVersion: "1"}})
	}
	return f
}

func benchRoute(ns string, i int, rv string) *gwv1.HTTPRoute {
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("route%d", i), ResourceVersion: rv, Generation: int64(len(rv))},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Namespace: ptr.To(gwv1.Namespace("bench-0")), Name: gwv1.ObjectName(fmt.Sprintf("gw%d", i%4))}}},
			Hostnames:       []gwv1.Hostname{gwv1.Hostname(fmt.Sprintf("h%d.example.com", i%100))},
			Rules: []gwv1.HTTPRouteRule{{
				Matches:     []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Value: ptr.To(fmt.Sprintf("/r%d", i))}}},
				BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(fmt.Sprintf("svc%d", i)), Port: ptr.To(gwv1.PortNumber(8080))}}}},
			}},
		},
	}
}

func benchSlice(ns string, i int, rv string) *discoveryv1.EndpointSlice {
	ready := rv != "2"
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("svc%d-1", i), ResourceVersion: rv, Labels: map[string]string{discoveryv1.LabelServiceName: fmt.Sprintf("svc%d", i)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
		},
	}
}

// BenchmarkSnapshot measures one Snapshot at 1,000 and 10,000 objects per
// kind (HTTPRoutes, Services, EndpointSlices, Secrets):
//
//   - legacy: the snapshot as built before the incremental provider (List
//     every kind from the cache, which copies every object into a typed
//     list; references and the EndpointSlice index computed again);
//   - full: a snapshot built from scratch from the stores (the first one,
//     or after an inconsistency);
//   - route, slice, status: the next snapshot after one HTTPRoute spec
//     change, one EndpointSlice change, one status-only route update
//     (the event is delivered to the handler inside the loop).
func BenchmarkSnapshot(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 10000} {
		f := benchWorld(b, n)
		b.Run(fmt.Sprintf("objects=%d/legacy", n), func(b *testing.B) {
			r := storeReader{f.stores}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := legacySnapshot(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("objects=%d/full", n), func(b *testing.B) {
			p := &Provider{stores: f.p.stores}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.full(); err != nil {
					b.Fatal(err)
				}
			}
		})
		if _, err := f.p.Snapshot(ctx); err != nil {
			b.Fatal(err)
		}
		// Each change flips an object between two prepared versions.
		flip := func(b *testing.B, name string, v1, v2 client.Object) {
			b.Run(fmt.Sprintf("objects=%d/%s", n, name), func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					i++
					if i%2 == 1 {
						f.apply(b, v2)
					} else {
						f.apply(b, v1)
					}
					s, err := f.p.Snapshot(ctx)
					if err != nil || s.Changes == nil {
						b.Fatal(err, "or not incremental")
					}
				}
			})
		}
		ns := fmt.Sprintf("bench-%d", 7%10)
		flip(b, "route", benchRoute(ns, 7, "1"), benchRoute(ns, 7, "22"))
		flip(b, "slice", benchSlice(ns, 7, "1"), benchSlice(ns, 7, "2"))
		withStatus := benchRoute(ns, 7, "1")
		withStatus.ResourceVersion = "3"
		withStatus.Status.Parents = []gwv1.RouteParentStatus{{ControllerName: "portico.dev/controller"}}
		flip(b, "status", benchRoute(ns, 7, "1"), withStatus)
	}
}

// storeReader lists from the fake stores the way controller-runtime's
// cache does with UnsafeDisableDeepCopy (internal/cache_reader.go): the
// objects are shared, then copied by value into the typed list's items.
type storeReader struct {
	stores map[resource.Kind]toolscache.Store
}

func (r storeReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("not supported")
}

func (r storeReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	var k resource.Kind
	switch list.(type) {
	case *gwv1.GatewayClassList:
		k = resource.KindGatewayClass
	case *gwv1.GatewayList:
		k = resource.KindGateway
	case *gwv1.ListenerSetList:
		k = resource.KindListenerSet
	case *gwv1.HTTPRouteList:
		k = resource.KindHTTPRoute
	case *gwv1.GRPCRouteList:
		k = resource.KindGRPCRoute
	case *gwv1beta1.ReferenceGrantList:
		k = resource.KindReferenceGrant
	case *corev1.NamespaceList:
		k = resource.KindNamespace
	case *corev1.ServiceList:
		k = resource.KindService
	case *discoveryv1.EndpointSliceList:
		k = resource.KindEndpointSlice
	case *corev1.SecretList:
		k = resource.KindSecret
	case *v1alpha1.ProxyConfigList:
		k = resource.KindProxyConfig
	case *appsv1.DeploymentList:
		k = resource.KindDeployment
	default:
		return fmt.Errorf("list %T", list)
	}
	items := r.stores[k].List()
	objs := make([]runtime.Object, 0, len(items))
	for _, it := range items {
		objs = append(objs, it.(runtime.Object))
	}
	return apimeta.SetList(list, objs)
}

// legacySnapshot is the provider's Snapshot before it became incremental
// (changes bookkeeping left out): every object of every kind listed, only
// referenced Services, EndpointSlices and Secrets kept.
func legacySnapshot(ctx context.Context, c client.Reader) (*resource.Snapshot, error) {
	s := resource.New()
	key := func(o metav1.Object) resource.Key {
		return resource.Key{Namespace: o.GetNamespace(), Name: o.GetName()}
	}
	if err := listInto(ctx, c, &gwv1.GatewayClassList{}, func(o *gwv1.GatewayClass) { s.GatewayClasses.Set(o.Name, o) }); err != nil {
		return nil, err
	}
	if err := listInto(ctx, c, &gwv1.GatewayList{}, func(o *gwv1.Gateway) { s.Gateways.Set(key(o), o) }); err != nil {
		return nil, err
	}
	if err := listInto(ctx, c, &gwv1.ListenerSetList{}, func(o *gwv1.ListenerSet) { s.ListenerSets.Set(key(o), o) }); err != nil {
		return nil, err
	}
	if err := listInto(ctx, c, &gwv1.HTTPRouteList{}, func(o *gwv1.HTTPRoute) { s.HTTPRoutes.Set(key(o), o) }); err != nil {
		return nil, err
	}
	if err := listInto(ctx, c, &gwv1.GRPCRouteList{}, func(o *gwv1.GRPCRoute) { s.GRPCRoutes.Set(key(o), o) }); err != nil {
		return nil, err
	}
	if err := listInto(ctx, c, &gwv1beta1.ReferenceGrantList{}, func(o *gwv1beta1.ReferenceGrant) { s.ReferenceGrants.Set(key(o), o) }); err != nil {
		return nil, err
	}
	if err := listInto(ctx, c, &corev1.NamespaceList{}, func(o *corev1.Namespace) { s.Namespaces.Set(o.Name, o) }); err != nil {
		return nil, err
	}
	r := collectRefs(s)
	if err := listInto(ctx, c, &corev1.ServiceList{}, func(o *corev1.Service) {
		if r.service(key(o)) || isProvisioned(o) {
			s.Services.Set(key(o), o)
		}
	}); err != nil {
		return nil, err
	}
	if err := listInto(ctx, c, &discoveryv1.EndpointSliceList{}, func(o *discoveryv1.EndpointSlice) {
		if r.service(types.NamespacedName{Namespace: o.Namespace, Name: o.Labels[discoveryv1.LabelServiceName]}) {
			s.EndpointSlices.Set(key(o), o)
		}
	}); err != nil {
		return nil, err
	}
	if err := listInto(ctx, c, &corev1.SecretList{}, func(o *corev1.Secret) {
		if r.secret(key(o)) {
			s.Secrets.Set(key(o), o)
		}
	}); err != nil {
		return nil, err
	}
	if err := listInto(ctx, c, &v1alpha1.ProxyConfigList{}, func(o *v1alpha1.ProxyConfig) { s.ProxyConfigs.Set(key(o), o) }); err != nil {
		return nil, err
	}
	if err := listInto(ctx, c, &appsv1.DeploymentList{}, func(o *appsv1.Deployment) {
		if isProvisioned(o) {
			s.Deployments.Set(key(o), o)
		}
	}); err != nil {
		return nil, err
	}
	return s.Build(), nil
}

func listInto[L client.ObjectList, T any](ctx context.Context, c client.Reader, list L, add func(T)) error {
	if err := c.List(ctx, list); err != nil {
		return err
	}
	return apimeta.EachListItem(list, func(o runtime.Object) error {
		if t, ok := o.(T); ok {
			add(t)
		}
		return nil
	})
}
