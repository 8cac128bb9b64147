package resource

import (
	"iter"
	"math/rand/v2"
	"slices"
	"sort"
)

// Map is a persistent map: the objects of one kind in a Snapshot. Its
// versions share structure (a hash array mapped trie, see pmap), so a
// version that differs from another by one entry costs O(log n) time and
// memory to make, not a copy of the map.
//
// The zero Map is empty and ready to use. A Map is built with Set and
// Delete, which change the parts of the trie they created in place (so
// filling a map costs about what filling a Go map does), until Freeze;
// after that the Map's trie is never modified again: a later Set or Delete
// copies the path to the entry it changes and leaves the rest shared with
// the frozen version. Snapshot.Build and Editor.Snapshot freeze the maps
// of the snapshot they return; a frozen Map may be read concurrently and
// copied freely (Map is a small value).
//
// A Map changed since it was last frozen must not be copied (a copy would
// share the nodes its later changes modify in place): use Clone.
//
// Iteration order is unspecified and, like a Go map's, varies from one
// iteration to the next: code that needs an order sorts the keys
// (SortedKeys, SortedNames).
type Map[K comparable, V any] struct {
	// e.token is nil when the map is frozen.
	e pmapEdit[K, V]
}

// Len is the number of entries.
func (m Map[K, V]) Len() int { return m.e.m.n }

// Get returns the value of k, and whether k is present.
func (m Map[K, V]) Get(k K) (V, bool) { return m.e.m.Get(k) }

// Value returns the value of k, or the zero value (nil, for the objects of
// a Snapshot) when k is absent.
func (m Map[K, V]) Value(k K) V {
	v, _ := m.e.m.Get(k)
	return v
}

// Has reports whether k is present.
func (m Map[K, V]) Has(k K) bool {
	_, ok := m.e.m.Get(k)
	return ok
}

// All yields every entry once, in no particular order. The map must not be
// changed during the iteration unless it is frozen (the iteration then
// covers the version it started with).
func (m Map[K, V]) All() iter.Seq2[K, V] {
	root := m.e.m.root
	return func(yield func(K, V) bool) {
		if root == nil {
			return
		}
		// Start at a random slot of the root, so that nothing comes to
		// depend on an order that differs from process to process (the
		// hash seed is random).
		n, start := len(root.slots), 0
		if n > 1 {
			start = rand.IntN(n)
		}
		for i := range n {
			if !root.slots[(start+i)%n].each(yield) {
				return
			}
		}
	}
}

// Keys yields every key once, in no particular order (see All).
func (m Map[K, V]) Keys() iter.Seq[K] {
	return func(yield func(K) bool) {
		for k := range m.All() {
			if !yield(k) {
				return
			}
		}
	}
}

// Set makes k map to v.
func (m *Map[K, V]) Set(k K, v V) {
	if m.e.token == nil {
		m.e.token = &editToken{}
	}
	m.e.Set(k, v)
}

// Delete removes k, if present.
func (m *Map[K, V]) Delete(k K) {
	if !m.Has(k) {
		return // nothing to copy
	}
	if m.e.token == nil {
		m.e.token = &editToken{}
	}
	m.e.Delete(k)
}

// Freeze ends the in-place changes: the current version is never modified
// again, and later changes copy what they change.
func (m *Map[K, V]) Freeze() {
	if m.e.token != nil { // no write to a frozen map: others may read it
		m.e.token = nil
	}
}

// Clone freezes m and returns it: the two maps then share every entry, and
// changes of either do not show in the other. It costs O(1).
func (m *Map[K, V]) Clone() Map[K, V] {
	m.Freeze()
	return *m
}

// MapOf returns a Map, frozen, with the entries of a Go map.
func MapOf[K comparable, V any](src map[K]V) Map[K, V] {
	var m Map[K, V]
	for k, v := range src {
		m.Set(k, v)
	}
	m.Freeze()
	return m
}

// DiffMaps calls f for every key whose entry differs between a and b:
// present in one only, or with values that are not same. Subtrees a and b
// share (b made from a by Set and Delete, or the reverse) are skipped, so
// the cost is about the number of entries changed times the depth of the
// trie, not the size of the maps. Each key is reported once, in no
// particular order.
func DiffMaps[K comparable, V any](a, b Map[K, V], same func(x, y V) bool, f func(K)) {
	diffNodes(a.e.m.root, b.e.m.root, same, f)
}

// SortedKeys returns the keys of a map keyed by Key, in namespace/name order.
func SortedKeys[V any](m Map[Key, V]) []Key {
	keys := make([]Key, 0, m.Len())
	for k := range m.All() {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, CompareKeys)
	return keys
}

// SortedNames returns the keys of a map keyed by name, sorted.
func SortedNames[V any](m Map[string, V]) []string {
	keys := make([]string, 0, m.Len())
	for k := range m.All() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
