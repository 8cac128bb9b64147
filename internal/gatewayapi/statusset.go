package gatewayapi

import (
	"iter"
	"strings"

	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/sortedset"
)

// StatusSet is an immutable set of statuses, at most one per object,
// sorted by kind, namespace and name.
//
// It is a persistent sorted set (package sortedset): its versions share
// structure, so that a version made from another by changing k statuses
// (an incremental translation) costs O(k log n) time and memory, the rest
// shared. The statuses themselves are never copied: a status carried over
// from one version to the next is the same *Status. DiffStatuses skips the
// parts two versions share.
//
// The zero StatusSet is empty. A StatusSet is a small value that may be
// copied and read concurrently; it is == to another only when both are
// empty or one is a copy of the other. The statuses it holds must not be
// modified.
type StatusSet struct {
	set sortedset.Set[StatusKey, Status, statusOrder]
}

// statusOrder orders statuses as CompareStatusKeys orders their keys.
type statusOrder struct{}

func (statusOrder) Key(s *Status) StatusKey               { return KeyOf(s) }
func (statusOrder) Compare(a, b *Status) int              { return compareStatuses(a, b) }
func (statusOrder) CompareKey(s *Status, k StatusKey) int { return compareKeyOf(s, k) }
func (statusOrder) CompareKeys(a, b StatusKey) int        { return CompareStatusKeys(a, b) }

// NewStatusSet returns the set of statuses, keeping, of several statuses
// of one object, the last. The set points into the slice, which must not
// be modified afterwards (it is not reordered: the set sorts pointers).
func NewStatusSet(statuses []Status) StatusSet {
	return StatusSet{sortedset.New[StatusKey, Status, statusOrder](statuses)}
}

// Len is the number of statuses.
func (s StatusSet) Len() int { return s.set.Len() }

// All yields the statuses in order, each with its index.
func (s StatusSet) All() iter.Seq2[int, *Status] { return s.set.All() }

// StatusKey identifies the status of one object.
type StatusKey struct {
	Kind resource.Kind
	Key  resource.Key
}

// CompareStatusKeys orders keys as a StatusSet does: by kind name, then
// namespace/name.
func CompareStatusKeys(a, b StatusKey) int {
	if c := strings.Compare(a.Kind.String(), b.Kind.String()); c != 0 {
		return c
	}
	return resource.CompareKeys(a.Key, b.Key)
}

// KeyOf returns the key of a status.
func KeyOf(s *Status) StatusKey {
	return StatusKey{s.Kind, resource.Key{Namespace: s.Namespace, Name: s.Name}}
}

// Replace returns s with the statuses of the keys of scope replaced by
// those of part (sorted): a key of scope without a status in part is
// removed, a status of part outside scope is set too. The statuses of s
// outside scope are shared, not copied: the cost is O(len(scope) · log n).
// The set points into part, which must not be modified afterwards.
func (s StatusSet) Replace(part []Status, scope []StatusKey) StatusSet {
	return StatusSet{s.set.Replace(part, scope)}
}

// Get returns the status of an object (namespace "" when cluster-scoped),
// or nil.
func (s StatusSet) Get(kind resource.Kind, namespace, name string) *Status {
	return s.set.Get(StatusKey{kind, resource.Key{Namespace: namespace, Name: name}})
}

// OfKind yields the statuses of one kind, in order.
func (s StatusSet) OfKind(kind resource.Kind) iter.Seq[*Status] {
	return func(yield func(*Status) bool) {
		for st := range s.set.From(StatusKey{Kind: kind}) {
			if st.Kind != kind || !yield(st) {
				return
			}
		}
	}
}

// With returns the set with statuses added, each replacing the status of
// its object if there is one; s is not changed. The statuses are copied.
func (s StatusSet) With(statuses ...Status) StatusSet {
	return StatusSet{s.set.With(statuses...)}
}

// Without returns the set without the status of an object; s is not
// changed.
func (s StatusSet) Without(kind resource.Kind, namespace, name string) StatusSet {
	return StatusSet{s.set.Without(StatusKey{kind, resource.Key{Namespace: namespace, Name: name}})}
}

// DiffStatuses yields the statuses that differ between a and b, in order:
// (old, nil) for an object only a has, (nil, new) for one only b has, and
// (old, new) for one whose statuses are not equal (compared as values:
// the same Generation and content pointers are equal). Subtrees the two
// sets share are skipped without being looked at, so for b made from a by
// an edit of k statuses (or the reverse) the cost is O(k log n), not
// O(n); sets that share nothing are compared status by status.
func DiffStatuses(a, b StatusSet) iter.Seq2[*Status, *Status] {
	return sortedset.Diff(a.set, b.set, equalStatuses)
}

func equalStatuses(a, b *Status) bool { return *a == *b }

// compareKeyOf orders a status and a key as compareStatuses orders
// statuses.
func compareKeyOf(s *Status, k StatusKey) int {
	if c := strings.Compare(s.Kind.String(), k.Kind.String()); c != 0 {
		return c
	}
	return compareNames(s.Namespace, s.Name, k.Key.Namespace, k.Key.Name)
}
