package resource

import (
	"hash/maphash"
	"math/bits"
	"slices"
)

// pmap is a persistent (immutable) hash map: a hash array mapped trie with
// 32-way nodes. A pmap value is never modified; an edit (pmapEdit) copies
// only the nodes on the paths to the keys it changes (O(log32 n) each) and
// shares every other node with the map it started from, so any number of
// versions can be read concurrently while newer ones are made.
type pmap[K comparable, V any] struct {
	root *pnode[K, V]
	n    int
}

// pnode is one trie node: slots[i] holds the entries whose hash bits at
// this depth have the value of the i-th bit set in bitmap.
type pnode[K comparable, V any] struct {
	bitmap uint32
	slots  []pslot[K, V]
	// owner is the edit that created the node: only that edit may modify
	// it in place, and only until the edit is done.
	owner *editToken
}

// pslot is a sub-trie (node != nil) or the entries whose hashes share the
// path so far (usually one; more only for equal hashes).
type pslot[K comparable, V any] struct {
	node    *pnode[K, V]
	entries []pentry[K, V]
}

type pentry[K comparable, V any] struct {
	hash uint64
	key  K
	val  V
}

// editToken identifies one edit; it is never reused.
type editToken struct{ _ byte }

const (
	pbits    = 5
	pmask    = 1<<pbits - 1
	maxShift = 64 - pbits // the last depth whose hash bits are all used
)

var pseed = maphash.MakeSeed()

// phashMask is all ones; tests narrow it to force equal hashes and deep
// tries.
var phashMask = ^uint64(0)

func phash[K comparable](k K) uint64 { return maphash.Comparable(pseed, k) & phashMask }

// Len is the number of entries.
func (m pmap[K, V]) Len() int { return m.n }

// Get returns the value of k.
func (m pmap[K, V]) Get(k K) (V, bool) {
	var zero V
	h := phash(k)
	n := m.root
	for shift := uint(0); n != nil; shift += pbits {
		bit := uint32(1) << ((h >> shift) & pmask)
		if n.bitmap&bit == 0 {
			return zero, false
		}
		s := &n.slots[bits.OnesCount32(n.bitmap&(bit-1))]
		if s.node == nil {
			for _, e := range s.entries {
				if e.hash == h && e.key == k {
					return e.val, true
				}
			}
			return zero, false
		}
		n = s.node
	}
	return zero, false
}

// Range calls f for every entry, in no particular order, until f returns
// false.
func (m pmap[K, V]) Range(f func(K, V) bool) {
	if m.root != nil {
		m.root.each(f)
	}
}

func (n *pnode[K, V]) each(f func(K, V) bool) bool {
	for i := range n.slots {
		if !n.slots[i].each(f) {
			return false
		}
	}
	return true
}

func (s *pslot[K, V]) each(f func(K, V) bool) bool {
	if s.node != nil {
		return s.node.each(f)
	}
	for _, e := range s.entries {
		if !f(e.key, e.val) {
			return false
		}
	}
	return true
}

// diffNodes calls f for every key whose entry differs between the tries
// a and b (either may be nil), skipping the subtrees they share.
func diffNodes[K comparable, V any](a, b *pnode[K, V], same func(x, y V) bool, f func(K)) {
	if a == b {
		return
	}
	if a == nil || b == nil {
		if a == nil {
			a = b
		}
		a.each(func(k K, _ V) bool { f(k); return true })
		return
	}
	for union := a.bitmap | b.bitmap; union != 0; union &= union - 1 {
		bit := union & -union
		var x, y *pslot[K, V]
		if a.bitmap&bit != 0 {
			x = &a.slots[bits.OnesCount32(a.bitmap&(bit-1))]
		}
		if b.bitmap&bit != 0 {
			y = &b.slots[bits.OnesCount32(b.bitmap&(bit-1))]
		}
		diffSlots(x, y, same, f)
	}
}

func diffSlots[K comparable, V any](x, y *pslot[K, V], same func(x, y V) bool, f func(K)) {
	report := func(k K, _ V) bool { f(k); return true }
	switch {
	case x == nil:
		y.each(report)
	case y == nil:
		x.each(report)
	case x.node != nil && y.node != nil:
		diffNodes(x.node, y.node, same, f)
	case x.node == nil && y.node == nil && len(x.entries) == len(y.entries) && len(x.entries) > 0 && &x.entries[0] == &y.entries[0]:
		// The same entries (an edit copies the entries it changes).
	default:
		// A group of entries (usually one) against entries or a
		// subtree: the keys there share a hash prefix, so they are few.
		var xs, ys []pentry[K, V]
		collect := func(s *pslot[K, V], out *[]pentry[K, V]) {
			s.each(func(k K, v V) bool { *out = append(*out, pentry[K, V]{key: k, val: v}); return true })
		}
		collect(x, &xs)
		collect(y, &ys)
		for _, ex := range xs {
			found := false
			for _, ey := range ys {
				if ex.key == ey.key {
					found = true
					if !same(ex.val, ey.val) {
						f(ex.key)
					}
					break
				}
			}
			if !found {
				f(ex.key)
			}
		}
		for _, ey := range ys {
			if !slices.ContainsFunc(xs, func(ex pentry[K, V]) bool { return ex.key == ey.key }) {
				f(ey.key)
			}
		}
	}
}

// pmapEdit makes a new version of a pmap. Nodes it creates are modified in
// place by later calls of the same edit (so many changes in one edit copy
// each shared node once); Done ends the edit and returns the new version,
// whose nodes are then never modified again. The original map is never
// modified.
type pmapEdit[K comparable, V any] struct {
	m     pmap[K, V]
	token *editToken
}

func (m pmap[K, V]) edit() *pmapEdit[K, V] {
	return &pmapEdit[K, V]{m: m, token: &editToken{}}
}

// Done returns the edited map. The edit must not be used afterwards.
func (e *pmapEdit[K, V]) Done() pmap[K, V] {
	e.token = nil
	return e.m
}

// Get returns the value of k in the map being edited.
func (e *pmapEdit[K, V]) Get(k K) (V, bool) { return e.m.Get(k) }

// Set makes k map to v.
func (e *pmapEdit[K, V]) Set(k K, v V) {
	h := phash(k)
	if e.m.root == nil {
		e.m.root = &pnode[K, V]{owner: e.token}
	}
	var added bool
	e.m.root = e.set(e.m.root, 0, pentry[K, V]{hash: h, key: k, val: v}, &added)
	if added {
		e.m.n++
	}
}

// Delete removes k.
func (e *pmapEdit[K, V]) Delete(k K) {
	if e.m.root == nil {
		return
	}
	var removed bool
	e.m.root = e.del(e.m.root, 0, phash(k), k, &removed)
	if removed {
		e.m.n--
	}
}

// own returns n itself when this edit created it, else a copy the edit
// owns.
func (e *pmapEdit[K, V]) own(n *pnode[K, V]) *pnode[K, V] {
	if n.owner == e.token {
		return n
	}
	c := &pnode[K, V]{bitmap: n.bitmap, owner: e.token, slots: make([]pslot[K, V], len(n.slots), len(n.slots)+1)}
	copy(c.slots, n.slots)
	return c
}

func (e *pmapEdit[K, V]) set(n *pnode[K, V], shift uint, en pentry[K, V], added *bool) *pnode[K, V] {
	bit := uint32(1) << ((en.hash >> shift) & pmask)
	pos := bits.OnesCount32(n.bitmap & (bit - 1))
	if n.bitmap&bit == 0 {
		n = e.own(n)
		n.slots = append(n.slots, pslot[K, V]{})
		copy(n.slots[pos+1:], n.slots[pos:])
		n.slots[pos] = pslot[K, V]{entries: []pentry[K, V]{en}}
		n.bitmap |= bit
		*added = true
		return n
	}
	s := n.slots[pos]
	switch {
	case s.node != nil:
		child := e.set(s.node, shift+pbits, en, added)
		if child == s.node {
			return n
		}
		n = e.own(n)
		n.slots[pos].node = child
		return n
	default:
		for i, x := range s.entries {
			if x.hash == en.hash && x.key == en.key {
				entries := make([]pentry[K, V], len(s.entries))
				copy(entries, s.entries)
				entries[i] = en
				n = e.own(n)
				n.slots[pos].entries = entries
				return n
			}
		}
		*added = true
		n = e.own(n)
		if shift >= maxShift || s.entries[0].hash == en.hash {
			// Equal hashes (or no bits left): keep them together.
			entries := make([]pentry[K, V], len(s.entries), len(s.entries)+1)
			copy(entries, s.entries)
			n.slots[pos].entries = append(entries, en)
			return n
		}
		// Push the entries one level down. They share one hash (or
		// they would have been split before), so they stay together.
		child := &pnode[K, V]{owner: e.token}
		cbit := uint32(1) << ((s.entries[0].hash >> (shift + pbits)) & pmask)
		child.bitmap = cbit
		child.slots = []pslot[K, V]{{entries: s.entries}}
		var ignored bool
		child = e.set(child, shift+pbits, en, &ignored)
		n.slots[pos] = pslot[K, V]{node: child}
		return n
	}
}

func (e *pmapEdit[K, V]) del(n *pnode[K, V], shift uint, h uint64, k K, removed *bool) *pnode[K, V] {
	bit := uint32(1) << ((h >> shift) & pmask)
	if n.bitmap&bit == 0 {
		return n
	}
	pos := bits.OnesCount32(n.bitmap & (bit - 1))
	s := n.slots[pos]
	if s.node != nil {
		child := e.del(s.node, shift+pbits, h, k, removed)
		if !*removed {
			return n
		}
		// (child may be s.node itself, changed in place.)
		n = e.own(n)
		switch {
		case len(child.slots) == 0:
			return e.dropSlot(n, pos, bit)
		case len(child.slots) == 1 && child.slots[0].node == nil:
			// A lone group of entries moves up: lookups compare keys
			// wherever the entries are.
			n.slots[pos] = child.slots[0]
		default:
			n.slots[pos].node = child
		}
		return n
	}
	for i, x := range s.entries {
		if x.hash == h && x.key == k {
			*removed = true
			n = e.own(n)
			if len(s.entries) == 1 {
				return e.dropSlot(n, pos, bit)
			}
			entries := make([]pentry[K, V], 0, len(s.entries)-1)
			entries = append(entries, s.entries[:i]...)
			n.slots[pos].entries = append(entries, s.entries[i+1:]...)
			return n
		}
	}
	return n
}

// dropSlot removes slot pos from n, which the edit owns.
func (e *pmapEdit[K, V]) dropSlot(n *pnode[K, V], pos int, bit uint32) *pnode[K, V] {
	copy(n.slots[pos:], n.slots[pos+1:])
	n.slots[len(n.slots)-1] = pslot[K, V]{}
	n.slots = n.slots[:len(n.slots)-1]
	n.bitmap &^= bit
	return n
}
