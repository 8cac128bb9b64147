// Package resource holds the input of a translation: an immutable snapshot of
// Gateway API and core objects, the YAML loader that builds one from files,
// the indexes the translator needs, and the Editor that derives a snapshot
// from the previous one at the cost of what changed (persistent indexes,
// copy-on-write maps).
package resource

import (
	"slices"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/portico-dev/portico/api/v1alpha1"
)

// Key identifies a namespaced object of a known kind.
type Key = types.NamespacedName

// Snapshot is every input object the translator reads. A Snapshot is not
// modified after Build (or Editor.Snapshot), so it may be read
// concurrently and kept while newer ones are made. Providers make a new
// one for every change: from scratch (New, then Build), or from the
// previous one with Edit, which shares the unchanged objects, maps and
// indexes.
type Snapshot struct {
	GatewayClasses  map[string]*gwv1.GatewayClass
	Gateways        map[Key]*gwv1.Gateway
	ListenerSets    map[Key]*gwv1.ListenerSet
	HTTPRoutes      map[Key]*gwv1.HTTPRoute
	GRPCRoutes      map[Key]*gwv1.GRPCRoute
	ReferenceGrants map[Key]*gwv1beta1.ReferenceGrant
	Services        map[Key]*corev1.Service
	EndpointSlices  map[Key]*discoveryv1.EndpointSlice
	Secrets         map[Key]*corev1.Secret
	Namespaces      map[string]*corev1.Namespace
	// ProxyConfigs are Portico's proxy parameters (GatewayClass and Gateway
	// parametersRefs).
	ProxyConfigs map[Key]*v1alpha1.ProxyConfig
	// Deployments are the Envoy Deployments Portico provisioned; with the
	// provisioned Services (in Services) they are inputs of Gateway status.
	// Empty in standalone mode, where no proxies are provisioned.
	Deployments map[Key]*appsv1.Deployment

	// Changes, when set by the provider that built the snapshot, lists the
	// objects that differ from the snapshot with ID Changes.Since. It lets
	// an incremental translation skip comparing the snapshots (Diff). It
	// may list more objects than changed, never fewer; status-only updates
	// of Gateway API objects may be left out.
	Changes *Changes

	id uint64
	// slicesByService indexes EndpointSlices by the Service they belong
	// to, each list sorted by name. It is persistent: snapshots made with
	// Edit share it with their base except where slices changed.
	slicesByService pmap[Key, []*discoveryv1.EndpointSlice]
	indexed         bool
}

// New returns an empty snapshot with every map allocated.
func New() *Snapshot {
	return &Snapshot{
		GatewayClasses:  map[string]*gwv1.GatewayClass{},
		Gateways:        map[Key]*gwv1.Gateway{},
		ListenerSets:    map[Key]*gwv1.ListenerSet{},
		HTTPRoutes:      map[Key]*gwv1.HTTPRoute{},
		GRPCRoutes:      map[Key]*gwv1.GRPCRoute{},
		ReferenceGrants: map[Key]*gwv1beta1.ReferenceGrant{},
		Services:        map[Key]*corev1.Service{},
		EndpointSlices:  map[Key]*discoveryv1.EndpointSlice{},
		Secrets:         map[Key]*corev1.Secret{},
		Namespaces:      map[string]*corev1.Namespace{},
		ProxyConfigs:    map[Key]*v1alpha1.ProxyConfig{},
		Deployments:     map[Key]*appsv1.Deployment{},
	}
}

// Build computes the snapshot's indexes. Call it once, after the last object
// was added and before the snapshot is shared.
func (s *Snapshot) Build() *Snapshot {
	if s.id == 0 {
		s.id = snapshotIDs.Add(1)
	}
	groups := map[Key][]*discoveryv1.EndpointSlice{}
	for _, es := range s.EndpointSlices {
		if sk, ok := serviceOf(es); ok {
			groups[sk] = append(groups[sk], es)
		}
	}
	e := pmap[Key, []*discoveryv1.EndpointSlice]{}.edit()
	for sk, list := range groups {
		sortSlices(list)
		e.Set(sk, list)
	}
	s.slicesByService, s.indexed = e.Done(), true
	return s
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

// ID identifies the snapshot among those built by this process: Build
// gives every snapshot a distinct, non-zero ID.
func (s *Snapshot) ID() uint64 {
	if s.id == 0 {
		s.Build()
	}
	return s.id
}

// EndpointSlicesFor returns the EndpointSlices of a Service, sorted by name.
func (s *Snapshot) EndpointSlicesFor(svc Key) []*discoveryv1.EndpointSlice {
	if !s.indexed {
		s.Build()
	}
	list, _ := s.slicesByService.Get(svc)
	return list
}

// Len is the number of objects in the snapshot.
func (s *Snapshot) Len() int {
	return len(s.GatewayClasses) + len(s.Gateways) + len(s.ListenerSets) + len(s.HTTPRoutes) +
		len(s.GRPCRoutes) + len(s.ReferenceGrants) + len(s.Services) + len(s.EndpointSlices) +
		len(s.Secrets) + len(s.Namespaces) + len(s.ProxyConfigs) + len(s.Deployments)
}

// SortedKeys returns the keys of a map keyed by Key, in namespace/name order.
func SortedKeys[V any](m map[Key]V) []Key {
	keys := make([]Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, CompareKeys)
	return keys
}

// CompareKeys orders keys by namespace, then name.
func CompareKeys(a, b Key) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// SortedNames returns the keys of a map keyed by name, sorted.
func SortedNames[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
