package resource

import (
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kind is the kind of an input object.
type Kind uint8

// Kinds of the objects of a Snapshot.
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
)

var kindNames = [...]string{"", "GatewayClass", "Gateway", "ListenerSet", "HTTPRoute", "GRPCRoute",
	"ReferenceGrant", "Service", "EndpointSlice", "Secret", "Namespace", "ProxyConfig", "Deployment",
	"TLSRoute", "TCPRoute", "UDPRoute"}

// RouteKinds are the kinds of routes, in the order translations take them.
// A route kind is registered here (and in the snapshot, the loader and the
// provider's watches, which hold its objects) for the kind-agnostic
// machinery: the incremental engine, the status writer; its semantics are
// one file of package gatewayapi and its entry in that package's table.
var RouteKinds = []Kind{KindHTTPRoute, KindGRPCRoute, KindTLSRoute, KindTCPRoute, KindUDPRoute}

// IsRoute reports whether k is a kind of route.
func (k Kind) IsRoute() bool {
	for _, r := range RouteKinds {
		if r == k {
			return true
		}
	}
	return false
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Unknown"
}

// Ref names one object. Cluster-scoped objects (GatewayClasses,
// Namespaces) have an empty Key.Namespace.
type Ref struct {
	Kind Kind
	Key  Key
}

// Changes lists the objects that differ between a snapshot and an earlier
// one: added, removed or modified. It may list more objects than changed
// (a provider that cannot tell lists them anyway), never fewer.
type Changes struct {
	// Since is the ID of the earlier snapshot.
	Since   uint64
	Objects map[Ref]struct{}
}

// NewChanges returns an empty change set relative to the snapshot with ID
// since.
func NewChanges(since uint64) *Changes {
	return &Changes{Since: since, Objects: map[Ref]struct{}{}}
}

// Add records that an object changed.
func (c *Changes) Add(kind Kind, key Key) { c.Objects[Ref{kind, key}] = struct{}{} }

// Has reports whether an object is listed.
func (c *Changes) Has(kind Kind, key Key) bool {
	_, ok := c.Objects[Ref{kind, key}]
	return ok
}

// Len is the number of objects listed.
func (c *Changes) Len() int { return len(c.Objects) }

// Only reports whether every listed object is of kind k (true when none
// is listed).
func (c *Changes) Only(k Kind) bool {
	for r := range c.Objects {
		if r.Kind != k {
			return false
		}
	}
	return true
}

// Merge adds the objects of o to c.
func (c *Changes) Merge(o *Changes) {
	for r := range o.Objects {
		c.Objects[r] = struct{}{}
	}
}

// snapshotIDs numbers built snapshots.
var snapshotIDs atomic.Uint64

// Diff lists the objects that differ between old and cur. Two objects are
// the same when they are the same pointer, or when both have the same UID
// and the same non-empty resourceVersion (objects read from the API server
// at the same version). The result is relative to old.ID(). The parts of
// the maps the two snapshots share (cur made from old with Edit, or the
// reverse) are not compared, so the cost is about the number of objects
// changed, not the size of the snapshots.
func Diff(old, cur *Snapshot) *Changes {
	c := NewChanges(old.ID())
	diffNames(c, KindGatewayClass, old.GatewayClasses, cur.GatewayClasses)
	diffKeys(c, KindGateway, old.Gateways, cur.Gateways)
	diffKeys(c, KindListenerSet, old.ListenerSets, cur.ListenerSets)
	diffKeys(c, KindHTTPRoute, old.HTTPRoutes, cur.HTTPRoutes)
	diffKeys(c, KindGRPCRoute, old.GRPCRoutes, cur.GRPCRoutes)
	diffKeys(c, KindTLSRoute, old.TLSRoutes, cur.TLSRoutes)
	diffKeys(c, KindTCPRoute, old.TCPRoutes, cur.TCPRoutes)
	diffKeys(c, KindUDPRoute, old.UDPRoutes, cur.UDPRoutes)
	diffKeys(c, KindReferenceGrant, old.ReferenceGrants, cur.ReferenceGrants)
	diffKeys(c, KindService, old.Services, cur.Services)
	diffKeys(c, KindEndpointSlice, old.EndpointSlices, cur.EndpointSlices)
	diffKeys(c, KindSecret, old.Secrets, cur.Secrets)
	diffNames(c, KindNamespace, old.Namespaces, cur.Namespaces)
	diffKeys(c, KindProxyConfig, old.ProxyConfigs, cur.ProxyConfigs)
	diffKeys(c, KindDeployment, old.Deployments, cur.Deployments)
	return c
}

// object is a pointer to an API object.
type object interface {
	comparable
	metav1.Object
}

// SameObject reports whether a and b are the same version of an object
// (see Diff).
func SameObject[T object](a, b T) bool {
	var zero T
	if a == b {
		return true
	}
	if a == zero || b == zero {
		return false
	}
	rv := a.GetResourceVersion()
	return rv != "" && rv == b.GetResourceVersion() && a.GetUID() == b.GetUID()
}

func diffKeys[T object](c *Changes, kind Kind, old, cur Map[Key, T]) {
	DiffMaps(old, cur, SameObject[T], func(k Key) { c.Add(kind, k) })
}

func diffNames[T object](c *Changes, kind Kind, old, cur Map[string, T]) {
	DiffMaps(old, cur, SameObject[T], func(k string) { c.Add(kind, Key{Name: k}) })
}
