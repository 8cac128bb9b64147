package resource

import (
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
	for d := range Kinds() {
		d.store.diff(c, d.Kind, old, cur)
	}
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
