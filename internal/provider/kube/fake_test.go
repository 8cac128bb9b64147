package kube

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/resource"
)

// fakeCluster stands in for the informers: a store per input kind and the
// provider's handlers, called the way an informer calls them (store
// first, then the handler).
type fakeCluster struct {
	p        *Provider
	stores   map[resource.Kind]toolscache.Store
	handlers map[resource.Kind]toolscache.ResourceEventHandler
	notified atomic.Int64
	observed atomic.Int64
}

// newFakeCluster returns a synced provider over empty stores.
func newFakeCluster(t testing.TB) *fakeCluster {
	t.Helper()
	f := &fakeCluster{stores: map[resource.Kind]toolscache.Store{}, handlers: map[resource.Kind]toolscache.ResourceEventHandler{}}
	p := &Provider{
		cfg: Config{
			Notify:       func() { f.notified.Add(1) },
			Observe:      func(resource.Kind, types.NamespacedName) { f.observed.Add(1) },
			InfraObserve: func(client.Object) {},
			Log:          slog.New(slog.DiscardHandler),
		},
		syncedC: make(chan struct{}),
		refs:    newRefs(),
		stores:  map[resource.Kind]store{},
	}
	for _, w := range p.kinds() {
		if w.input == 0 {
			continue
		}
		st := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
		f.stores[w.input], p.stores[w.input] = st, st
		f.handlers[w.input] = p.handler(w)
	}
	p.markSynced()
	f.p = p
	return f
}

// kindOf returns the input kind of obj.
func kindOf(obj client.Object) resource.Kind {
	switch obj.(type) {
	case *gwv1.GatewayClass:
		return resource.KindGatewayClass
	case *gwv1.Gateway:
		return resource.KindGateway
	case *gwv1.ListenerSet:
		return resource.KindListenerSet
	case *gwv1.HTTPRoute:
		return resource.KindHTTPRoute
	case *gwv1.GRPCRoute:
		return resource.KindGRPCRoute
	case *gwv1beta1.ReferenceGrant:
		return resource.KindReferenceGrant
	case *corev1.Service:
		return resource.KindService
	case *discoveryv1.EndpointSlice:
		return resource.KindEndpointSlice
	case *corev1.Secret:
		return resource.KindSecret
	case *corev1.Namespace:
		return resource.KindNamespace
	case *v1alpha1.ProxyConfig:
		return resource.KindProxyConfig
	case *appsv1.Deployment:
		return resource.KindDeployment
	}
	panic(fmt.Sprintf("no input kind for %T", obj))
}

// apply creates or updates obj.
func (f *fakeCluster) apply(t testing.TB, obj client.Object) {
	t.Helper()
	if err := f.put(obj); err != nil {
		t.Fatal(err)
	}
}

// remove deletes the object of kind k under key, if any.
func (f *fakeCluster) remove(t testing.TB, k resource.Kind, key resource.Key) {
	t.Helper()
	if err := f.del(k, key); err != nil {
		t.Fatal(err)
	}
}

func (f *fakeCluster) put(obj client.Object) error {
	k := kindOf(obj)
	st := f.stores[k]
	old, exists, err := st.Get(obj)
	if err != nil {
		return err
	}
	if !exists {
		if err := st.Add(obj); err != nil {
			return err
		}
		f.handlers[k].OnAdd(obj, false)
		return nil
	}
	if err := st.Update(obj); err != nil {
		return err
	}
	f.handlers[k].OnUpdate(old, obj)
	return nil
}

func (f *fakeCluster) del(k resource.Kind, key resource.Key) error {
	st := f.stores[k]
	old, exists, err := st.GetByKey(storeKey(key))
	if err != nil || !exists {
		return err
	}
	if err := st.Delete(old); err != nil {
		return err
	}
	f.handlers[k].OnDelete(old)
	return nil
}

// full builds a snapshot of the stores from scratch, with a provider of
// its own.
func (f *fakeCluster) full(t testing.TB) *resource.Snapshot {
	t.Helper()
	p := &Provider{stores: f.p.stores}
	s, err := p.full()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// contents is what a snapshot holds, as copies of its maps and the
// EndpointSlices of every Service it indexes.
type contents struct {
	classes  map[string]*gwv1.GatewayClass
	gateways map[resource.Key]*gwv1.Gateway
	sets     map[resource.Key]*gwv1.ListenerSet
	http     map[resource.Key]*gwv1.HTTPRoute
	grpc     map[resource.Key]*gwv1.GRPCRoute
	grants   map[resource.Key]*gwv1beta1.ReferenceGrant
	services map[resource.Key]*corev1.Service
	slices   map[resource.Key]*discoveryv1.EndpointSlice
	secrets  map[resource.Key]*corev1.Secret
	ns       map[string]*corev1.Namespace
	configs  map[resource.Key]*v1alpha1.ProxyConfig
	deploys  map[resource.Key]*appsv1.Deployment
	bySvc    map[resource.Key][]*discoveryv1.EndpointSlice
}

// contentsOf copies what s holds; svcs are Services whose slices to look
// up (besides those of s's own slices).
func contentsOf(s *resource.Snapshot, svcs ...resource.Key) contents {
	c := contents{
		classes: maps.Collect(s.GatewayClasses.All()), gateways: maps.Collect(s.Gateways.All()), sets: maps.Collect(s.ListenerSets.All()),
		http: maps.Collect(s.HTTPRoutes.All()), grpc: maps.Collect(s.GRPCRoutes.All()), grants: maps.Collect(s.ReferenceGrants.All()),
		services: maps.Collect(s.Services.All()), slices: maps.Collect(s.EndpointSlices.All()), secrets: maps.Collect(s.Secrets.All()),
		ns: maps.Collect(s.Namespaces.All()), configs: maps.Collect(s.ProxyConfigs.All()), deploys: maps.Collect(s.Deployments.All()),
		bySvc: map[resource.Key][]*discoveryv1.EndpointSlice{},
	}
	for _, es := range s.EndpointSlices.All() {
		svcs = append(svcs, resource.Key{Namespace: es.Namespace, Name: es.Labels[discoveryv1.LabelServiceName]})
	}
	for _, k := range svcs {
		if l := s.EndpointSlicesFor(k); len(l) > 0 {
			c.bySvc[k] = slices.Clone(l)
		}
	}
	return c
}

func (c contents) diff(o contents) string {
	switch {
	case !maps.Equal(c.classes, o.classes):
		return "GatewayClasses"
	case !maps.Equal(c.gateways, o.gateways):
		return "Gateways"
	case !maps.Equal(c.sets, o.sets):
		return "ListenerSets"
	case !maps.Equal(c.http, o.http):
		return "HTTPRoutes"
	case !maps.Equal(c.grpc, o.grpc):
		return "GRPCRoutes"
	case !maps.Equal(c.grants, o.grants):
		return "ReferenceGrants"
	case !maps.Equal(c.services, o.services):
		return "Services"
	case !maps.Equal(c.slices, o.slices):
		return "EndpointSlices"
	case !maps.Equal(c.secrets, o.secrets):
		return "Secrets"
	case !maps.Equal(c.ns, o.ns):
		return "Namespaces"
	case !maps.Equal(c.configs, o.configs):
		return "ProxyConfigs"
	case !maps.Equal(c.deploys, o.deploys):
		return "Deployments"
	case !maps.EqualFunc(c.bySvc, o.bySvc, slices.Equal):
		return "EndpointSlices by Service"
	}
	return ""
}
