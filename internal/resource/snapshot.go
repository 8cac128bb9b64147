// Package resource holds the input of a translation: an immutable snapshot of
// Gateway API and core objects, the YAML loader that builds one from files,
// and the indexes the translator needs.
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
// modified after Build; providers make a new one (sharing unchanged objects)
// for every change.
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

	id              uint64
	slicesByService map[Key][]*discoveryv1.EndpointSlice
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
	s.slicesByService = map[Key][]*discoveryv1.EndpointSlice{}
	for _, k := range SortedKeys(s.EndpointSlices) {
		es := s.EndpointSlices[k]
		if es == nil {
			continue
		}
		svc := es.Labels[discoveryv1.LabelServiceName]
		if svc == "" {
			continue
		}
		sk := Key{Namespace: es.Namespace, Name: svc}
		s.slicesByService[sk] = append(s.slicesByService[sk], es)
	}
	return s
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
	if s.slicesByService == nil {
		s.Build()
	}
	return s.slicesByService[svc]
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
