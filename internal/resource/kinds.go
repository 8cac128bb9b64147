package resource

import (
	"iter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kind is the kind of an input object.
type Kind uint8

// Kinds of the objects of a Snapshot. A kind is one constant here, one
// entry of descriptors below, one map of Snapshot, and its Descriptor:
// in descriptors.go for the kinds Portico does not route, in a file of
// its own for a kind of route (httproute.go, grpcroute.go, ...).
const (
	KindGatewayClass Kind = iota + 1
	KindGateway
	KindListenerSet
	KindHTTPRoute
	KindGRPCRoute
	KindReferenceGrant
	KindService
	KindEndpointSlice
	KindSecret
	KindNamespace
	KindProxyConfig
	KindDeployment
	KindTLSRoute
	KindTCPRoute
	KindUDPRoute
	KindConfigMap
	KindClusterTrustBundle
	KindBackendTLSPolicy
)

// descriptors is the registry: every kind's Descriptor, by Kind.
var descriptors = [...]*Descriptor{
	KindGatewayClass:       gatewayClassKind,
	KindGateway:            gatewayKind,
	KindListenerSet:        listenerSetKind,
	KindHTTPRoute:          httpRouteKind,
	KindGRPCRoute:          grpcRouteKind,
	KindReferenceGrant:     referenceGrantKind,
	KindService:            serviceKind,
	KindEndpointSlice:      endpointSliceKind,
	KindSecret:             secretKind,
	KindNamespace:          namespaceKind,
	KindProxyConfig:        proxyConfigKind,
	KindDeployment:         deploymentKind,
	KindTLSRoute:           tlsRouteKind,
	KindTCPRoute:           tcpRouteKind,
	KindUDPRoute:           udpRouteKind,
	KindConfigMap:          configMapKind,
	KindClusterTrustBundle: clusterTrustBundleKind,
	KindBackendTLSPolicy:   backendTLSPolicyKind,
}

// Object is an API object of a kind of a Snapshot (every pointer to a
// Kubernetes API type is one; controller-runtime's client.Object is the
// same interface).
type Object interface {
	metav1.Object
	runtime.Object
}

// Descriptor is what the kind-agnostic machinery knows of one kind: the
// loader (which kinds and versions it reads), the snapshot, its Editor
// and Diff (where the kind's objects are kept), the kube provider (what it
// watches), the status writer (the objects and lists it reads and
// writes) and, for a route, its parentRefs, status and backends.
//
// Descriptors are values of this package, made once; read them with
// KindOf, Kinds and RouteKinds. Nothing here uses reflection: each
// descriptor's functions are written for its Go type.
type Descriptor struct {
	Kind Kind
	// GVK is the group, version and kind Portico watches and writes.
	GVK schema.GroupVersionKind
	// LoadVersions are the versions of GVK's group the file loader reads
	// (their schemas are the same as GVK's, so GVK's type decodes them);
	// none for a kind that is never in files (Deployments).
	LoadVersions []string
	// ClusterScoped kinds are keyed by name alone.
	ClusterScoped bool
	// HasStatus: Portico is this kind's controller and writes its status.
	HasStatus bool
	// ByReference: the kube provider watches only the objects of this
	// kind that the snapshot's objects reference (CA ConfigMaps), one
	// watch per object, instead of every object of the kind.
	ByReference bool
	// New returns an empty object of the kind; NewList an empty list.
	New     func() Object
	NewList func() runtime.Object
	// Route describes a kind of route; nil for other kinds.
	Route *RouteDescriptor

	store store
}

func (d *Descriptor) String() string { return d.GVK.Kind }

// KindOf returns the descriptor of k, or nil for a value that is no kind.
func KindOf(k Kind) *Descriptor {
	if int(k) < len(descriptors) {
		return descriptors[k]
	}
	return nil
}

// Kinds yields every kind's descriptor, in Kind order.
func Kinds() iter.Seq[*Descriptor] {
	return func(yield func(*Descriptor) bool) {
		for _, d := range descriptors {
			if d != nil && !yield(d) {
				return
			}
		}
	}
}

// KindNamed returns the kind of group named name (its GVK's Kind), if a
// snapshot holds that kind.
func KindNamed(group, name string) (Kind, bool) {
	for d := range Kinds() {
		if d.GVK.Group == group && d.GVK.Kind == name {
			return d.Kind, true
		}
	}
	return 0, false
}

// RouteKinds are the kinds of routes, in the order translations take them
// (Kind order): the kinds whose Descriptor has a Route.
var RouteKinds = func() []Kind {
	var out []Kind
	for d := range Kinds() {
		if d.Route != nil {
			out = append(out, d.Kind)
		}
	}
	return out
}()

// IsRoute reports whether k is a kind of route.
func (k Kind) IsRoute() bool {
	d := KindOf(k)
	return d != nil && d.Route != nil
}

func (k Kind) String() string {
	if d := KindOf(k); d != nil {
		return d.GVK.Kind
	}
	return "Unknown"
}

// store is how a kind's objects are kept in a Snapshot: its map there.
type store interface {
	// set puts obj under k, reporting false when obj is not of the kind's
	// Go type.
	set(s *Snapshot, k Key, obj any) bool
	// del deletes k, reporting whether it was present.
	del(s *Snapshot, k Key) bool
	get(s *Snapshot, k Key) (Object, bool)
	all(s *Snapshot) iter.Seq2[Key, Object]
	keys(s *Snapshot) []Key
	len(s *Snapshot) int
	freeze(s *Snapshot)
	diff(c *Changes, kind Kind, old, cur *Snapshot)
}

// keyed stores a namespaced kind: the function returns its map.
type keyed[T stored] func(*Snapshot) *Map[Key, T]

func (m keyed[T]) set(s *Snapshot, k Key, obj any) bool {
	v, ok := obj.(T)
	if ok {
		m(s).Set(k, v)
	}
	return ok
}

func (m keyed[T]) del(s *Snapshot, k Key) bool {
	mm := m(s)
	if !mm.Has(k) {
		return false
	}
	mm.Delete(k)
	return true
}

func (m keyed[T]) get(s *Snapshot, k Key) (Object, bool) {
	if v, ok := m(s).Get(k); ok {
		return v, true
	}
	return nil, false
}

func (m keyed[T]) all(s *Snapshot) iter.Seq2[Key, Object] {
	mm := *m(s)
	return func(yield func(Key, Object) bool) {
		for k, v := range mm.All() {
			if !yield(k, v) {
				return
			}
		}
	}
}

func (m keyed[T]) keys(s *Snapshot) []Key { return SortedKeys(*m(s)) }
func (m keyed[T]) len(s *Snapshot) int    { return m(s).Len() }
func (m keyed[T]) freeze(s *Snapshot)     { m(s).Freeze() }

func (m keyed[T]) diff(c *Changes, kind Kind, old, cur *Snapshot) {
	DiffMaps(*m(old), *m(cur), SameObject[T], func(k Key) { c.Add(kind, k) })
}

// named stores a cluster-scoped kind, keyed by name (Key.Name).
type named[T stored] func(*Snapshot) *Map[string, T]

func (m named[T]) set(s *Snapshot, k Key, obj any) bool {
	v, ok := obj.(T)
	if ok {
		m(s).Set(k.Name, v)
	}
	return ok
}

func (m named[T]) del(s *Snapshot, k Key) bool {
	mm := m(s)
	if !mm.Has(k.Name) {
		return false
	}
	mm.Delete(k.Name)
	return true
}

func (m named[T]) get(s *Snapshot, k Key) (Object, bool) {
	if v, ok := m(s).Get(k.Name); ok {
		return v, true
	}
	return nil, false
}

func (m named[T]) all(s *Snapshot) iter.Seq2[Key, Object] {
	mm := *m(s)
	return func(yield func(Key, Object) bool) {
		for k, v := range mm.All() {
			if !yield(Key{Name: k}, v) {
				return
			}
		}
	}
}

func (m named[T]) keys(s *Snapshot) []Key {
	names := SortedNames(*m(s))
	out := make([]Key, len(names))
	for i, n := range names {
		out[i] = Key{Name: n}
	}
	return out
}

func (m named[T]) len(s *Snapshot) int { return m(s).Len() }
func (m named[T]) freeze(s *Snapshot)  { m(s).Freeze() }

func (m named[T]) diff(c *Changes, kind Kind, old, cur *Snapshot) {
	DiffMaps(*m(old), *m(cur), SameObject[T], func(k string) { c.Add(kind, Key{Name: k}) })
}

// stored is the type of a kind's objects in its map: a pointer to an API
// type.
type stored interface {
	comparable
	Object
}
