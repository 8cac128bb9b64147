package resource

import (
	"fmt"
	"iter"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/portico-dev/portico/api/v1alpha1"
)

// Key identifies a namespaced object of a known kind.
type Key = types.NamespacedName

// Snapshot is every input object the translator reads, by kind, in
// persistent maps (Map). A Snapshot is not modified after Build (or
// Editor.Snapshot), so it may be read concurrently and kept while newer
// ones are made. Providers make a new one for every change: from scratch
// (New, Set on its maps, then Build), or from the previous one with Edit,
// which shares with it everything but the paths to the changed objects in
// the maps and indexes.
type Snapshot struct {
	GatewayClasses  Map[string, *gwv1.GatewayClass]
	Gateways        Map[Key, *gwv1.Gateway]
	ListenerSets    Map[Key, *gwv1.ListenerSet]
	HTTPRoutes      Map[Key, *gwv1.HTTPRoute]
	GRPCRoutes      Map[Key, *gwv1.GRPCRoute]
	TLSRoutes       Map[Key, *gwv1.TLSRoute]
	TCPRoutes       Map[Key, *gwv1.TCPRoute]
	UDPRoutes       Map[Key, *gwv1.UDPRoute]
	ReferenceGrants Map[Key, *gwv1beta1.ReferenceGrant]
	Services        Map[Key, *corev1.Service]
	EndpointSlices  Map[Key, *discoveryv1.EndpointSlice]
	Secrets         Map[Key, *corev1.Secret]
	Namespaces      Map[string, *corev1.Namespace]
	// ProxyConfigs are Portico's proxy parameters (GatewayClass and Gateway
	// parametersRefs).
	ProxyConfigs Map[Key, *v1alpha1.ProxyConfig]
	// Deployments are the Envoy Deployments Portico provisioned; with the
	// provisioned Services (in Services) they are inputs of Gateway status.
	// Empty in standalone mode, where no proxies are provisioned.
	Deployments Map[Key, *appsv1.Deployment]
	// ConfigMaps are those CA certificate references name (a
	// BackendTLSPolicy's, a Gateway's spec.tls.frontend): the kube
	// provider watches no others.
	ConfigMaps Map[Key, *corev1.ConfigMap]
	// ClusterTrustBundles are CA certificate bundles (certificates.k8s.io),
	// cluster-scoped.
	ClusterTrustBundles Map[string, *certificatesv1.ClusterTrustBundle]
	// BackendTLSPolicies say how the proxies connect to Services with TLS.
	BackendTLSPolicies Map[Key, *gwv1.BackendTLSPolicy]

	// Changes, when set by the provider that built the snapshot, lists the
	// objects that differ from the snapshot with ID Changes.Since. It lets
	// an incremental translation skip comparing the snapshots (Diff). It
	// may list more objects than changed, never fewer; status-only updates
	// of Gateway API objects may be left out.
	Changes *Changes

	// id is set by New (or Build) and never changed by a read.
	id uint64
	// slicesByService indexes EndpointSlices by the Service they belong
	// to, each list sorted by name. It is persistent: snapshots made with
	// Edit share it with their base except where slices changed. Build
	// and Editor.Snapshot set it (and indexed); reads never do.
	slicesByService pmap[Key, []*discoveryv1.EndpointSlice]
	indexed         bool
}

// New returns an empty snapshot with a new ID, to fill with Set on its
// maps (or with package load) and then Build.
func New() *Snapshot {
	return &Snapshot{id: snapshotIDs.Add(1)}
}

// Build freezes the snapshot's maps (see Map) and computes its indexes.
// Call it after the last object was added and before the snapshot is
// shared. Changing a built snapshot's maps and building it again is
// allowed (the maps copy what they change, so snapshots sharing their
// contents are unaffected), as long as nobody reads it meanwhile; the
// index is then computed again, from every EndpointSlice.
func (s *Snapshot) Build() *Snapshot {
	if s.id == 0 { // a zero Snapshot, not made by New
		s.id = snapshotIDs.Add(1)
	}
	s.freeze()
	s.slicesByService, s.indexed = indexSlices(s.EndpointSlices), true
	return s
}

// indexSlices groups EndpointSlices by the Service they belong to, each
// list sorted by name.
func indexSlices(slices Map[Key, *discoveryv1.EndpointSlice]) pmap[Key, []*discoveryv1.EndpointSlice] {
	groups := map[Key][]*discoveryv1.EndpointSlice{}
	for _, es := range slices.All() {
		if sk, ok := serviceOf(es); ok {
			groups[sk] = append(groups[sk], es)
		}
	}
	e := pmap[Key, []*discoveryv1.EndpointSlice]{}.edit()
	for sk, list := range groups {
		sortSlices(list)
		e.Set(sk, list)
	}
	return e.Done()
}

// freeze freezes every map.
func (s *Snapshot) freeze() {
	for d := range Kinds() {
		d.store.freeze(s)
	}
}

// serviceOf returns the Service an EndpointSlice belongs to.
func serviceOf(es *discoveryv1.EndpointSlice) (Key, bool) {
	if es == nil {
		return Key{}, false
	}
	svc := es.Labels[discoveryv1.LabelServiceName]
	if svc == "" {
		return Key{}, false
	}
	return Key{Namespace: es.Namespace, Name: svc}, true
}

// sortSlices sorts the EndpointSlices of one Service (one namespace) by
// name.
func sortSlices(list []*discoveryv1.EndpointSlice) {
	slices.SortFunc(list, func(a, b *discoveryv1.EndpointSlice) int {
		return CompareKeys(Key{Namespace: a.Namespace, Name: a.Name}, Key{Namespace: b.Namespace, Name: b.Name})
	})
}

// ID identifies the snapshot among those made by this process: New,
// Editor.Snapshot (and Build, for a zero Snapshot) give every snapshot a
// distinct, non-zero ID, which Build keeps. It is 0 only for a zero
// Snapshot never built.
func (s *Snapshot) ID() uint64 { return s.id }

// EndpointSlicesFor returns the EndpointSlices of a Service, sorted by
// name. The caller must not modify the list. On a snapshot not built yet
// it scans the EndpointSlices (and keeps nothing: reads never write).
func (s *Snapshot) EndpointSlicesFor(svc Key) []*discoveryv1.EndpointSlice {
	if s.indexed {
		list, _ := s.slicesByService.Get(svc)
		return list
	}
	var list []*discoveryv1.EndpointSlice
	for _, es := range s.EndpointSlices.All() {
		if sk, ok := serviceOf(es); ok && sk == svc {
			list = append(list, es)
		}
	}
	sortSlices(list)
	return list
}

// Len is the number of objects in the snapshot.
func (s *Snapshot) Len() int {
	n := 0
	for d := range Kinds() {
		n += d.store.len(s)
	}
	return n
}

// CompareKeys orders keys by namespace, then name.
func CompareKeys(a, b Key) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// Keys lists the keys of the objects of kind k, sorted (by name alone for
// a cluster-scoped kind; nil for a value that is no kind).
func (s *Snapshot) Keys(k Kind) []Key {
	if d := KindOf(k); d != nil {
		return d.store.keys(s)
	}
	return nil
}

// Get returns the object of kind k under key (key.Name alone for a
// cluster-scoped kind), if any.
func (s *Snapshot) Get(k Kind, key Key) (Object, bool) {
	if d := KindOf(k); d != nil {
		return d.store.get(s, key)
	}
	return nil, false
}

// Objects yields the objects of kind k, in no particular order.
func (s *Snapshot) Objects(k Kind) iter.Seq2[Key, Object] {
	if d := KindOf(k); d != nil {
		return d.store.all(s)
	}
	return func(func(Key, Object) bool) {}
}

// Put adds obj under key (key.Name alone for a cluster-scoped kind) to a
// snapshot being filled, before Build; a built snapshot is changed with
// Edit. It fails when obj is not of kind k's type.
func (s *Snapshot) Put(k Kind, key Key, obj Object) error {
	d := KindOf(k)
	if d == nil {
		return fmt.Errorf("resource: unknown kind %d", k)
	}
	if !d.store.set(s, key, obj) {
		return fmt.Errorf("resource: %T is not a %s", obj, k)
	}
	return nil
}

// Route returns the shared part of the route ref, and whether it exists.
func (s *Snapshot) Route(ref Ref) (RouteView, bool) {
	d := KindOf(ref.Kind)
	if d == nil || d.Route == nil {
		return RouteView{}, false
	}
	obj, ok := d.store.get(s, ref.Key)
	if !ok {
		return RouteView{}, false
	}
	return d.Route.View(obj)
}

// RouteParentRefs returns the namespace and parentRefs of a route, and
// whether it exists.
func (s *Snapshot) RouteParentRefs(route Ref) (string, []gwv1.ParentReference, bool) {
	v, ok := s.Route(route)
	if !ok {
		return "", nil, false
	}
	return v.Meta.Namespace, v.Spec.ParentRefs, true
}
