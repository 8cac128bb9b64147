package gatewayapi

import (
	"iter"
	"slices"
	"sort"
	"strings"

	"github.com/portico-dev/portico/internal/resource"
)

// StatusSet is an immutable set of statuses, at most one per object,
// sorted by kind, namespace and name.
//
// Its versions share structure: it is a B+tree whose leaves hold up to
// leafMax pointers to statuses and whose inner nodes hold up to innerMax
// children, every leaf at the same depth. A version made from another by
// changing k statuses (an incremental translation) copies only the paths
// to those statuses: O(k log n) time and memory, the rest is shared. The
// statuses themselves are never copied: a status carried over from one
// version to the next is the same *Status. DiffStatuses skips the subtrees
// two versions share.
//
// The zero StatusSet is empty. A StatusSet is a small value that may be
// copied and read concurrently; the statuses it holds must not be
// modified.
type StatusSet struct {
	root *statusNode
}

// Bounds of the nodes: a node that falls under the minimum after an edit
// is merged with a sibling (except the root).
const (
	leafMax  = 32
	leafMin  = leafMax / 4
	innerMax = 32
	innerMin = innerMax / 4
)

// statusNode is a leaf (children == nil: items, sorted) or an inner node
// (children, sorted and not overlapping). Nodes are never modified once
// made; an empty node is never kept.
type statusNode struct {
	items    []*Status
	children []*statusNode
	first    *Status // the smallest status beneath
	n        int     // the number of statuses beneath
}

// NewStatusSet returns the set of statuses. It sorts the slice in place
// (when it is not sorted already) and keeps, of several statuses of one
// object, the last. The set points into the slice, which must not be
// modified afterwards.
func NewStatusSet(statuses []Status) StatusSet {
	return statusSetOf(sortedUnique(statuses))
}

// sortedUnique sorts statuses in place and returns pointers to them, the
// last of several statuses of one object only.
func sortedUnique(statuses []Status) []*Status {
	if !slices.IsSortedFunc(statuses, func(a, b Status) int { return compareStatuses(&a, &b) }) {
		slices.SortStableFunc(statuses, func(a, b Status) int { return compareStatuses(&a, &b) })
	}
	items := make([]*Status, 0, len(statuses))
	for i := range statuses {
		if i+1 < len(statuses) && compareStatuses(&statuses[i], &statuses[i+1]) == 0 {
			continue
		}
		items = append(items, &statuses[i])
	}
	return items
}

// statusSetOf builds a set of sorted, distinct statuses.
func statusSetOf(items []*Status) StatusSet {
	return StatusSet{root: rootOf(appendLeaves(nil, items))}
}

// Len is the number of statuses.
func (s StatusSet) Len() int {
	if s.root == nil {
		return 0
	}
	return s.root.n
}

// All yields the statuses in order, each with its index.
func (s StatusSet) All() iter.Seq2[int, *Status] {
	return func(yield func(int, *Status) bool) {
		i := 0
		s.root.each(func(st *Status) bool {
			ok := yield(i, st)
			i++
			return ok
		})
	}
}

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
func (s StatusSet) Replace(part []Status, scope []StatusKey) StatusSet {
	scope = slices.Clone(scope)
	slices.SortFunc(scope, CompareStatusKeys)
	return s.apply(statusEdits(part, slices.Compact(scope)))
}

// Get returns the status of an object (namespace "" when cluster-scoped),
// or nil.
func (s StatusSet) Get(kind resource.Kind, namespace, name string) *Status {
	k := StatusKey{kind, resource.Key{Namespace: namespace, Name: name}}
	n := s.root
	if n == nil {
		return nil
	}
	for n.children != nil {
		n = n.children[n.childFor(k)]
	}
	if i, ok := slices.BinarySearchFunc(n.items, k, compareKeyOf); ok {
		return n.items[i]
	}
	return nil
}

// OfKind yields the statuses of one kind, in order.
func (s StatusSet) OfKind(kind resource.Kind) iter.Seq[*Status] {
	return func(yield func(*Status) bool) {
		s.root.from(StatusKey{Kind: kind}, func(st *Status) bool {
			return st.Kind == kind && yield(st)
		})
	}
}

// With returns the set with statuses added, each replacing the status of
// its object if there is one; s is not changed. The statuses are copied.
func (s StatusSet) With(statuses ...Status) StatusSet {
	put := sortedUnique(slices.Clone(statuses))
	edits := make([]statusEdit, 0, len(put))
	for _, st := range put {
		edits = append(edits, statusEdit{KeyOf(st), st})
	}
	return s.apply(edits)
}

// Without returns the set without the status of an object; s is not
// changed.
func (s StatusSet) Without(kind resource.Kind, namespace, name string) StatusSet {
	if s.Get(kind, namespace, name) == nil {
		return s
	}
	return s.apply([]statusEdit{{key: StatusKey{kind, resource.Key{Namespace: namespace, Name: name}}}})
}

// DiffStatuses yields the statuses that differ between a and b, in order:
// (old, nil) for an object only a has, (nil, new) for one only b has, and
// (old, new) for one whose statuses are not equal (compared as values:
// the same Generation and content pointers are equal). Subtrees the two
// sets share are skipped without being looked at, so for b made from a by
// an edit of k statuses (or the reverse) the cost is O(k log n), not
// O(n); sets that share nothing are compared status by status.
func DiffStatuses(a, b StatusSet) iter.Seq2[*Status, *Status] {
	return func(yield func(*Status, *Status) bool) {
		if a.root == b.root {
			return
		}
		ca, cb := newStatusCursor(a.root), newStatusCursor(b.root)
		for ca.valid() && cb.valid() {
			sa, sb := ca.cur(), cb.cur()
			switch c := compareStatuses(sa, sb); {
			case c < 0:
				if !yield(sa, nil) {
					return
				}
				ca.next()
			case c > 0:
				if !yield(nil, sb) {
					return
				}
				cb.next()
			default:
				if da, db, ok := sharedHead(&ca, &cb); ok {
					ca.skip(da)
					cb.skip(db)
					continue
				}
				if sa != sb && *sa != *sb && !yield(sa, sb) {
					return
				}
				ca.next()
				cb.next()
			}
		}
		for ; ca.valid(); ca.next() {
			if !yield(ca.cur(), nil) {
				return
			}
		}
		for ; cb.valid(); cb.next() {
			if !yield(nil, cb.cur()) {
				return
			}
		}
	}
}

// statusEdit sets (st != nil) or removes (st == nil) the status of key.
type statusEdit struct {
	key StatusKey
	st  *Status
}

// statusEdits returns the edits that replace the statuses of scope by
// those of part (both sorted): a key of scope without a status in part is
// removed; a status of part outside scope is set too.
func statusEdits(part []Status, scope []StatusKey) []statusEdit {
	edits := make([]statusEdit, 0, len(scope)+1)
	add := func(e statusEdit) {
		if n := len(edits); n > 0 && CompareStatusKeys(edits[n-1].key, e.key) == 0 {
			edits[n-1] = e // a key twice: the last one wins
			return
		}
		edits = append(edits, e)
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
			c = compareKeyOf(&part[j], scope[i])
		}
		switch {
		case c > 0:
			add(statusEdit{key: scope[i]})
			i++
		case c < 0:
			add(statusEdit{KeyOf(&part[j]), &part[j]})
			j++
		default:
			add(statusEdit{scope[i], &part[j]})
			i++
			j++
		}
	}
	return edits
}

// apply returns s with the edits (sorted by key, distinct) made.
func (s StatusSet) apply(edits []statusEdit) StatusSet {
	if len(edits) == 0 {
		return s
	}
	if s.root == nil {
		items := make([]*Status, 0, len(edits))
		for _, e := range edits {
			if e.st != nil {
				items = append(items, e.st)
			}
		}
		return statusSetOf(items)
	}
	return StatusSet{root: rootOf(s.root.apply(edits, nil))}
}

// apply appends to out the nodes, of n's height, that replace n once the
// edits (sorted, distinct, all in n's part of the key space) are made: none
// when n becomes empty, several when it overflows.
func (n *statusNode) apply(edits []statusEdit, out []*statusNode) []*statusNode {
	if n.children == nil {
		items := make([]*Status, 0, len(n.items)+len(edits))
		i := 0
		for _, e := range edits {
			for i < len(n.items) && compareKeyOf(n.items[i], e.key) < 0 {
				items = append(items, n.items[i])
				i++
			}
			if i < len(n.items) && compareKeyOf(n.items[i], e.key) == 0 {
				i++ // replaced or removed
			}
			if e.st != nil {
				items = append(items, e.st)
			}
		}
		items = append(items, n.items[i:]...)
		return appendLeaves(out, items)
	}
	children := make([]*statusNode, 0, len(n.children)+1)
	i := 0
	for c, child := range n.children {
		// The edits of child: those before the next child's first status
		// (before the first child's: child 0's).
		j := len(edits)
		if c+1 < len(n.children) {
			next := n.children[c+1].first
			j = i + sort.Search(len(edits)-i, func(k int) bool { return compareKeyOf(next, edits[i+k].key) <= 0 })
		}
		if j == i {
			children = append(children, child)
			continue
		}
		children = child.apply(edits[i:j], children)
		i = j
	}
	return appendInners(out, rebalance(children))
}

func (n *statusNode) underfull() bool {
	if n.children == nil {
		return len(n.items) < leafMin
	}
	return len(n.children) < innerMin
}

// rebalance merges every underfull node of a list of siblings with a
// neighbour (splitting the two again evenly when together they overflow).
// It reuses the list.
func rebalance(nodes []*statusNode) []*statusNode {
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
func appendMerged(out []*statusNode, a, b *statusNode) []*statusNode {
	if a.children == nil {
		return appendLeaves(out, slices.Concat(a.items, b.items))
	}
	return appendInners(out, slices.Concat(a.children, b.children))
}

// appendLeaves appends leaves holding items (sorted), split evenly in as
// few leaves as leafMax allows. The leaves share the array of items.
func appendLeaves(out []*statusNode, items []*Status) []*statusNode {
	k := parts(len(items), leafMax)
	for i := range k {
		lo, hi := i*len(items)/k, (i+1)*len(items)/k
		it := items[lo:hi:hi]
		out = append(out, &statusNode{items: it, first: it[0], n: len(it)})
	}
	return out
}

// appendInners appends inner nodes holding children (sorted, of one
// height), split evenly in as few nodes as innerMax allows.
func appendInners(out []*statusNode, children []*statusNode) []*statusNode {
	k := parts(len(children), innerMax)
	for i := range k {
		lo, hi := i*len(children)/k, (i+1)*len(children)/k
		ch := children[lo:hi:hi]
		n := &statusNode{children: ch, first: ch[0].first}
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
func rootOf(nodes []*statusNode) *statusNode {
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

// childFor is the index of the child whose part of the key space holds k.
func (n *statusNode) childFor(k StatusKey) int {
	i := sort.Search(len(n.children), func(i int) bool { return compareKeyOf(n.children[i].first, k) > 0 })
	return max(i-1, 0)
}

// each calls f with every status beneath n (nil: none), in order, until f
// returns false; it reports whether f never did.
func (n *statusNode) each(f func(*Status) bool) bool {
	if n == nil {
		return true
	}
	for _, st := range n.items {
		if !f(st) {
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

// from calls f with every status beneath n from the first not before k,
// in order, until f returns false; it reports whether f never did.
func (n *statusNode) from(k StatusKey, f func(*Status) bool) bool {
	if n == nil {
		return true
	}
	if n.children == nil {
		i, _ := slices.BinarySearchFunc(n.items, k, compareKeyOf)
		for _, st := range n.items[i:] {
			if !f(st) {
				return false
			}
		}
		return true
	}
	c := n.childFor(k)
	if !n.children[c].from(k, f) {
		return false
	}
	for _, child := range n.children[c+1:] {
		if !child.each(f) {
			return false
		}
	}
	return true
}

// statusCursor walks the statuses of a tree in order. path holds the
// nodes from the root to the current leaf, each with the index of the
// child (of the status, in the leaf) the walk is in.
type statusCursor struct {
	path []cursorFrame
}

type cursorFrame struct {
	n *statusNode
	i int
}

func newStatusCursor(root *statusNode) statusCursor {
	c := statusCursor{path: make([]cursorFrame, 0, 8)}
	if root != nil {
		c.descend(root)
	}
	return c
}

// descend goes down to the first status beneath n.
func (c *statusCursor) descend(n *statusNode) {
	for {
		c.path = append(c.path, cursorFrame{n, 0})
		if n.children == nil {
			return
		}
		n = n.children[0]
	}
}

func (c *statusCursor) valid() bool { return len(c.path) > 0 }

func (c *statusCursor) cur() *Status {
	f := c.path[len(c.path)-1]
	return f.n.items[f.i]
}

// next moves to the next status.
func (c *statusCursor) next() {
	f := &c.path[len(c.path)-1]
	if f.i++; f.i < len(f.n.items) {
		return
	}
	c.skip(len(c.path) - 1)
}

// skip moves past the node at depth d of the path, whose statuses have
// been walked or need not be.
func (c *statusCursor) skip(d int) {
	c.path = c.path[:d]
	for len(c.path) > 0 {
		f := &c.path[len(c.path)-1]
		if f.i++; f.i < len(f.n.children) {
			c.descend(f.n.children[f.i])
			return
		}
		c.path = c.path[:len(c.path)-1]
	}
}

// head is the smallest depth of the path whose node starts at the current
// status: the nodes at depths head and below all do.
func (c *statusCursor) head() int {
	d := len(c.path)
	for d > 0 && c.path[d-1].i == 0 {
		d--
	}
	return d
}

// sharedHead finds the largest node both cursors start at, and returns its
// depth in each.
func sharedHead(a, b *statusCursor) (int, int, bool) {
	ha, hb := a.head(), b.head()
	for da := ha; da < len(a.path); da++ {
		for db := hb; db < len(b.path); db++ {
			if a.path[da].n == b.path[db].n {
				return da, db, true
			}
		}
	}
	return 0, 0, false
}

// compareKeyOf orders a status and a key as compareStatuses orders
// statuses.
func compareKeyOf(s *Status, k StatusKey) int {
	if c := strings.Compare(s.Kind.String(), k.Kind.String()); c != 0 {
		return c
	}
	return compareNames(s.Namespace, s.Name, k.Key.Namespace, k.Key.Name)
}
