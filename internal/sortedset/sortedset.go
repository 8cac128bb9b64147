// Package sortedset is a persistent sorted set: an immutable set of
// elements, at most one per key, in the order of their keys, whose versions
// share structure. It holds the desired statuses of a translation
// (gatewayapi.StatusSet), which the incremental engine edits a few at a
// time and the status writer compares version by version.
//
// Design. A Set is a B+tree: leaves hold up to leafMax pointers to
// elements, inner nodes up to innerMax children, and every leaf is at the
// same depth. Nodes are never modified once made (an empty node is never
// kept), so a Set is a small value (one pointer) that may be copied and
// read concurrently.
//
//   - Copy-on-write paths: an edit copies only the nodes on the paths from
//     the root to the elements it sets or removes (splitting, merging or
//     rebalancing only those); a version made from another by k edits
//     costs O(k log n) time and memory.
//   - Sharing between versions: every node off those paths is the same node
//     in both versions, and elements are never copied: an element carried
//     over from one version to the next is the same *T. Diff relies on
//     both: it skips, without looking into them, the subtrees two versions
//     share, and takes elements at one pointer for one key, so comparing a
//     version with the one it was made from costs O(k log n), not O(n).
//
// The order is a type parameter (an Order, usually an empty struct type
// with methods) rather than a function value kept in the set, so that the
// zero Set is a usable empty set of its type, and a Set is == to another
// only when both are empty or one is a copy of the other (an edit that
// changes nothing, such as removing an absent key, returns the set it was
// made from). The Order's methods are called through the instantiation's
// dictionary, never inlined: it has one method per kind of comparison so
// that none of them makes a key, searches are binary (in leaves and inner
// nodes alike), Diff compares no two elements at one pointer, and the code
// takes no address of a copy of an element or of a local cursor (either
// would be moved to the heap at every call).
//
// The elements a Set points to must not be modified.
package sortedset

import (
	"iter"
	"slices"
)

// Order orders the elements of a Set by their keys. Its comparisons must
// agree with each other (CompareKey(e, k) == CompareKeys(Key(e), k), and so
// on): there are several only so that none has to make a key to compare.
type Order[K, T any] interface {
	// Key returns the key of an element.
	Key(e *T) K
	// Compare orders two elements by key: negative when a's is before
	// b's, zero when they are equal, positive otherwise.
	Compare(a, b *T) int
	// CompareKey orders an element's key against k.
	CompareKey(e *T, k K) int
	// CompareKeys orders two keys.
	CompareKeys(a, b K) int
}

// Set is an immutable set of elements *T, at most one per key K, sorted
// by O. The zero Set is empty.
type Set[K, T any, O Order[K, T]] struct {
	root *node[T]
}

// Bounds of the nodes: a node that falls under the minimum after an edit
// is merged with a sibling (except the root).
const (
	leafMax  = 32
	leafMin  = leafMax / 4
	innerMax = 32
	innerMin = innerMax / 4
)

// node is a leaf (children == nil: items, sorted) or an inner node
// (children, sorted and not overlapping). Nodes are never modified once
// made; an empty node is never kept.
type node[T any] struct {
	items    []*T
	children []*node[T]
	first    *T  // the smallest element beneath
	n        int // the number of elements beneath
}

// New returns the set of elems, keeping, of several elements of one key,
// the last. The set points into the slice, which must not be modified
// afterwards; New does not reorder it (it sorts pointers to its elements,
// and only when they are not in order already).
func New[K, T any, O Order[K, T]](elems []T) Set[K, T, O] {
	return Set[K, T, O]{root: rootOf(appendLeaves(nil, sortedUnique[K, T, O](elems)))}
}

// sortedUnique returns pointers to elems sorted by key (stably), the last
// of several elements of one key only. It compares pointers into elems,
// never copies of elements: a copy handed to O's methods would escape to
// the heap at every comparison.
func sortedUnique[K, T any, O Order[K, T]](elems []T) []*T {
	var o O
	items := make([]*T, len(elems))
	for i := range elems {
		items[i] = &elems[i]
	}
	if !slices.IsSortedFunc(items, o.Compare) {
		slices.SortStableFunc(items, o.Compare)
	}
	out := items[:0] // writes stay behind the reads
	for i, e := range items {
		if i+1 < len(items) && o.Compare(e, items[i+1]) == 0 {
			continue
		}
		out = append(out, e)
	}
	return out
}

// Len is the number of elements.
func (s Set[K, T, O]) Len() int {
	if s.root == nil {
		return 0
	}
	return s.root.n
}

// All yields the elements in order, each with its index.
func (s Set[K, T, O]) All() iter.Seq2[int, *T] {
	return func(yield func(int, *T) bool) {
		i := 0
		s.root.each(func(e *T) bool {
			ok := yield(i, e)
			i++
			return ok
		})
	}
}

// Get returns the element of key k, or nil.
func (s Set[K, T, O]) Get(k K) *T {
	n := s.root
	if n == nil {
		return nil
	}
	for n.children != nil {
		n = n.children[childFor[K, T, O](n, k)]
	}
	if i, ok := search[K, T, O](n.items, k); ok {
		return n.items[i]
	}
	return nil
}

// From yields, in order, the elements from the first whose key is not
// before k.
func (s Set[K, T, O]) From(k K) iter.Seq[*T] {
	return func(yield func(*T) bool) {
		from[K, T, O](s.root, k, yield)
	}
}

// With returns the set with elems added, each replacing the element of
// its key if there is one (of several elements of one key, the last);
// s is not changed. The elements are copied.
func (s Set[K, T, O]) With(elems ...T) Set[K, T, O] {
	put := sortedUnique[K, T, O](slices.Clone(elems))
	var o O
	edits := make([]edit[K, T], 0, len(put))
	for _, e := range put {
		edits = append(edits, edit[K, T]{o.Key(e), e})
	}
	return s.apply(edits)
}

// Without returns the set without the element of key k; s is not changed
// (and is returned when it holds no such element).
func (s Set[K, T, O]) Without(k K) Set[K, T, O] {
	if s.Get(k) == nil {
		return s
	}
	return s.apply([]edit[K, T]{{key: k}})
}

// Replace returns s with the elements of the keys of scope replaced by
// those of part, which must be sorted (as New sorts; of several elements
// of one key, the last is kept): a key of scope without an element in part
// is removed, an element of part outside scope is set too. Part is not
// copied: the set points into it, and it must not be modified afterwards.
// Scope need not be sorted. The elements of s outside scope are shared,
// not copied: the cost is O((len(scope)+len(part)) · log n).
func (s Set[K, T, O]) Replace(part []T, scope []K) Set[K, T, O] {
	var o O
	scope = slices.Clone(scope)
	slices.SortFunc(scope, o.CompareKeys)
	scope = slices.CompactFunc(scope, func(a, b K) bool { return o.CompareKeys(a, b) == 0 })
	return s.apply(edits[K, T, O](part, scope))
}

// Diff yields the elements that differ between a and b, in order: (old,
// nil) for a key only a holds, (nil, new) for one only b holds, and (old,
// new) for a key both hold with different elements: different pointers,
// unless equal (which may be nil) reports the two equal. Subtrees the two
// sets share are skipped without being looked at, so for b made from a by
// k edits (or the reverse) the cost is O(k log n), not O(n); sets that
// share nothing are compared element by element.
func Diff[K, T any, O Order[K, T]](a, b Set[K, T, O], equal func(old, new *T) bool) iter.Seq2[*T, *T] {
	return func(yield func(*T, *T) bool) {
		if a.root == b.root {
			return
		}
		var o O
		ca, cb := newCursor(a.root), newCursor(b.root)
		for ca.valid() && cb.valid() {
			ea, eb := ca.cur(), cb.cur()
			c := 0 // one element (as when a shared node starts here): one key
			if ea != eb {
				c = o.Compare(ea, eb)
			}
			switch {
			case c < 0:
				if !yield(ea, nil) {
					return
				}
				ca = ca.next()
			case c > 0:
				if !yield(nil, eb) {
					return
				}
				cb = cb.next()
			default:
				if da, db, ok := sharedHead(ca, cb); ok {
					ca, cb = ca.skip(da), cb.skip(db)
					continue
				}
				if ea != eb && (equal == nil || !equal(ea, eb)) && !yield(ea, eb) {
					return
				}
				ca, cb = ca.next(), cb.next()
			}
		}
		for ; ca.valid(); ca = ca.next() {
			if !yield(ca.cur(), nil) {
				return
			}
		}
		for ; cb.valid(); cb = cb.next() {
			if !yield(nil, cb.cur()) {
				return
			}
		}
	}
}

// edit sets (e != nil) or removes (e == nil) the element of key.
type edit[K, T any] struct {
	key K
	e   *T
}

// edits returns the edits that replace the elements of scope by those of
// part (both sorted, scope distinct): a key of scope without an element in
// part is removed; an element of part outside scope is set too.
func edits[K, T any, O Order[K, T]](part []T, scope []K) []edit[K, T] {
	var o O
	out := make([]edit[K, T], 0, len(scope)+1)
	add := func(e edit[K, T]) {
		if n := len(out); n > 0 && o.CompareKeys(out[n-1].key, e.key) == 0 {
			out[n-1] = e // a key twice: the last one wins
			return
		}
		out = append(out, e)
	}
	i, j := 0, 0
	for i < len(scope) || j < len(part) {
		c := 0
		switch {
		case j == len(part):
			c = 1
		case i == len(scope):
			c = -1
		default:
			c = o.CompareKey(&part[j], scope[i])
		}
		switch {
		case c > 0:
			add(edit[K, T]{key: scope[i]})
			i++
		case c < 0:
			add(edit[K, T]{o.Key(&part[j]), &part[j]})
			j++
		default:
			add(edit[K, T]{scope[i], &part[j]})
			i++
			j++
		}
	}
	return out
}

// apply returns s with the edits (sorted by key, distinct) made.
func (s Set[K, T, O]) apply(edits []edit[K, T]) Set[K, T, O] {
	if len(edits) == 0 {
		return s
	}
	if s.root == nil {
		items := make([]*T, 0, len(edits))
		for _, e := range edits {
			if e.e != nil {
				items = append(items, e.e)
			}
		}
		return Set[K, T, O]{root: rootOf(appendLeaves(nil, items))}
	}
	return Set[K, T, O]{root: rootOf(applyTo[K, T, O](s.root, edits, nil))}
}

// applyTo appends to out the nodes, of n's height, that replace n once the
// edits (sorted, distinct, all in n's part of the key space) are made:
// none when n becomes empty, several when it overflows.
func applyTo[K, T any, O Order[K, T]](n *node[T], edits []edit[K, T], out []*node[T]) []*node[T] {
	var o O
	if n.children == nil {
		// The items between edits are copied in runs, each found by
		// binary search.
		items := make([]*T, 0, len(n.items)+len(edits))
		i := 0
		for _, e := range edits {
			k, found := search[K, T, O](n.items[i:], e.key)
			items = append(items, n.items[i:i+k]...)
			i += k
			if found {
				i++ // replaced or removed
			}
			if e.e != nil {
				items = append(items, e.e)
			}
		}
		items = append(items, n.items[i:]...)
		return appendLeaves(out, items)
	}
	// The children without edits are kept as they are; the child of an
	// edit is found by binary search, so that a few edits cost O(log
	// innerMax) comparisons per level, not one per child.
	children := make([]*node[T], 0, len(n.children)+1)
	c := 0 // the children before c are done
	for i := 0; i < len(edits); {
		k := childFrom[K, T, O](n, c, edits[i].key)
		children = append(children, n.children[c:k]...)
		// The edits of child k: those before the next child's first
		// element.
		j := len(edits)
		if k+1 < len(n.children) {
			next := n.children[k+1].first
			lo, hi := i+1, len(edits) // the first edit at or after next
			for lo < hi {
				m := int(uint(lo+hi) >> 1)
				if o.CompareKey(next, edits[m].key) > 0 {
					lo = m + 1
				} else {
					hi = m
				}
			}
			j = lo
		}
		children = applyTo[K, T, O](n.children[k], edits[i:j], children)
		i, c = j, k+1
	}
	children = append(children, n.children[c:]...)
	return appendInners(out, rebalance(children))
}

func (n *node[T]) underfull() bool {
	if n.children == nil {
		return len(n.items) < leafMin
	}
	return len(n.children) < innerMin
}

// rebalance merges every underfull node of a list of siblings with a
// neighbour (splitting the two again evenly when together they overflow).
// It reuses the list.
func rebalance[T any](nodes []*node[T]) []*node[T] {
	if len(nodes) < 2 {
		return nodes
	}
	out := nodes[:0] // writes stay at or behind the reads
	for k := 0; k < len(nodes); k++ {
		n := nodes[k]
		switch {
		case !n.underfull():
			out = append(out, n)
		case len(out) > 0:
			prev := out[len(out)-1]
			out = appendMerged(out[:len(out)-1], prev, n)
		case k+1 < len(nodes):
			next := nodes[k+1]
			k++
			out = appendMerged(out, n, next)
		default:
			out = append(out, n)
		}
	}
	return out
}

// appendMerged appends the nodes holding what siblings a and b (in order)
// hold.
func appendMerged[T any](out []*node[T], a, b *node[T]) []*node[T] {
	if a.children == nil {
		return appendLeaves(out, slices.Concat(a.items, b.items))
	}
	return appendInners(out, slices.Concat(a.children, b.children))
}

// appendLeaves appends leaves holding items (sorted), split evenly in as
// few leaves as leafMax allows. The leaves share the array of items.
func appendLeaves[T any](out []*node[T], items []*T) []*node[T] {
	k := parts(len(items), leafMax)
	for i := range k {
		lo, hi := i*len(items)/k, (i+1)*len(items)/k
		it := items[lo:hi:hi]
		out = append(out, &node[T]{items: it, first: it[0], n: len(it)})
	}
	return out
}

// appendInners appends inner nodes holding children (sorted, of one
// height), split evenly in as few nodes as innerMax allows.
func appendInners[T any](out []*node[T], children []*node[T]) []*node[T] {
	k := parts(len(children), innerMax)
	for i := range k {
		lo, hi := i*len(children)/k, (i+1)*len(children)/k
		ch := children[lo:hi:hi]
		n := &node[T]{children: ch, first: ch[0].first}
		for _, c := range ch {
			n.n += c.n
		}
		out = append(out, n)
	}
	return out
}

// parts is the fewest number of parts of n elements of at most limit
// each; part i of k holds the elements i*n/k to (i+1)*n/k.
func parts(n, limit int) int { return (n + limit - 1) / limit }

// rootOf returns the root of a tree whose top level is nodes (of one
// height): nodes grouped under inner nodes until one is left, and a root
// with one child replaced by that child.
func rootOf[T any](nodes []*node[T]) *node[T] {
	for len(nodes) > 1 {
		nodes = appendInners(nil, nodes)
	}
	if len(nodes) == 0 {
		return nil
	}
	n := nodes[0]
	for len(n.children) == 1 {
		n = n.children[0]
	}
	return n
}

// childFor is the index of the child of n whose part of the key space
// holds k: the last whose first element is not after k (the first child
// when none is).
func childFor[K, T any, O Order[K, T]](n *node[T], k K) int { return childFrom[K, T, O](n, 0, k) }

// childFrom is childFor among the children from c on: the last of them
// whose first element is not after k (child c when none is).
func childFrom[K, T any, O Order[K, T]](n *node[T], c int, k K) int {
	var o O
	lo, hi := c, len(n.children) // the first child whose first is after k
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if o.CompareKey(n.children[m].first, k) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return max(lo-1, c)
}

// search is the index of the first of items (sorted) not before k, and
// whether its key is k.
func search[K, T any, O Order[K, T]](items []*T, k K) (int, bool) {
	var o O
	lo, hi := 0, len(items)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if o.CompareKey(items[m], k) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(items) && o.CompareKey(items[lo], k) == 0
}

// each calls f with every element beneath n (nil: none), in order, until
// f returns false; it reports whether f never did.
func (n *node[T]) each(f func(*T) bool) bool {
	if n == nil {
		return true
	}
	for _, e := range n.items {
		if !f(e) {
			return false
		}
	}
	for _, c := range n.children {
		if !c.each(f) {
			return false
		}
	}
	return true
}

// from calls f with every element beneath n from the first not before k,
// in order, until f returns false; it reports whether f never did.
func from[K, T any, O Order[K, T]](n *node[T], k K, f func(*T) bool) bool {
	if n == nil {
		return true
	}
	if n.children == nil {
		i, _ := search[K, T, O](n.items, k)
		for _, e := range n.items[i:] {
			if !f(e) {
				return false
			}
		}
		return true
	}
	c := childFor[K, T, O](n, k)
	if !from[K, T, O](n.children[c], k, f) {
		return false
	}
	for _, child := range n.children[c+1:] {
		if !child.each(f) {
			return false
		}
	}
	return true
}

// cursor walks the elements of a tree in order: it holds the nodes from
// the root to the current leaf, each with the index of the child (of the
// element, in the leaf) the walk is in. Its methods take and return it by
// value, so that the cursors of Diff stay on the stack (only their arrays
// are allocated) even where Diff is inlined.
type cursor[T any] []frame[T]

type frame[T any] struct {
	n *node[T]
	i int
}

func newCursor[T any](root *node[T]) cursor[T] {
	c := make(cursor[T], 0, 8)
	if root != nil {
		c = c.descend(root)
	}
	return c
}

// descend goes down to the first element beneath n.
func (c cursor[T]) descend(n *node[T]) cursor[T] {
	for {
		c = append(c, frame[T]{n, 0})
		if n.children == nil {
			return c
		}
		n = n.children[0]
	}
}

func (c cursor[T]) valid() bool { return len(c) > 0 }

func (c cursor[T]) cur() *T {
	f := c[len(c)-1]
	return f.n.items[f.i]
}

// next moves to the next element.
func (c cursor[T]) next() cursor[T] {
	f := &c[len(c)-1]
	if f.i++; f.i < len(f.n.items) {
		return c
	}
	return c.skip(len(c) - 1)
}

// skip moves past the node at depth d, whose elements have been walked or
// need not be.
func (c cursor[T]) skip(d int) cursor[T] {
	c = c[:d]
	for len(c) > 0 {
		f := &c[len(c)-1]
		if f.i++; f.i < len(f.n.children) {
			return c.descend(f.n.children[f.i])
		}
		c = c[:len(c)-1]
	}
	return c
}

// head is the smallest depth whose node starts at the current element:
// the nodes at depths head and below all do.
func (c cursor[T]) head() int {
	d := len(c)
	for d > 0 && c[d-1].i == 0 {
		d--
	}
	return d
}

// sharedHead finds the largest node both cursors start at, and returns its
// depth in each.
func sharedHead[T any](a, b cursor[T]) (int, int, bool) {
	ha, hb := a.head(), b.head()
	for da := ha; da < len(a); da++ {
		for db := hb; db < len(b); db++ {
			if a[da].n == b[db].n {
				return da, db, true
			}
		}
	}
	return 0, 0, false
}
