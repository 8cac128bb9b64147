package sortedset

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// elem is an element of the tests' sets: a key "<kind>/<namespace>/<name>"
// (as a status's) and a value that an edit changes.
type elem struct {
	Key string
	Gen int64
}

type byKey struct{}

func (byKey) Key(e *elem) string               { return e.Key }
func (byKey) Compare(a, b *elem) int           { return strings.Compare(a.Key, b.Key) }
func (byKey) CompareKey(e *elem, k string) int { return strings.Compare(e.Key, k) }
func (byKey) CompareKeys(a, b string) int      { return strings.Compare(a, b) }

type set = Set[string, elem, byKey]

func newSet(elems []elem) set { return New[string, elem, byKey](elems) }

var kinds = []string{"GRPCRoute", "Gateway", "GatewayClass", "HTTPRoute", "ListenerSet"}

// randomElem returns an element of a random key among about keys per kind
// and namespace.
func randomElem(rng *rand.Rand, keys int) elem {
	kind := kinds[rng.IntN(len(kinds))]
	return elem{Key: fmt.Sprintf("%s/ns%d/o%04d", kind, rng.IntN(4), rng.IntN(keys)), Gen: rng.Int64N(1 << 40)}
}

// model is what a set should hold, by key.
type model map[string]elem

func (m model) sorted() []elem {
	out := slices.Collect(maps.Values(m))
	slices.SortFunc(out, func(a, b elem) int { return strings.Compare(a.Key, b.Key) })
	return out
}

func list(s set) []elem {
	var out []elem
	for _, e := range s.All() {
		out = append(out, *e)
	}
	return out
}

// checkSet asserts that s holds exactly m, sorted, and that its tree is
// well formed.
func checkSet(t *testing.T, what string, s set, m model) {
	t.Helper()
	want := m.sorted()
	if got := list(s); !slices.Equal(got, want) {
		t.Fatalf("%s: set holds %d elements, want %d (or not in order)", what, len(got), len(want))
	}
	if s.Len() != len(want) {
		t.Fatalf("%s: Len = %d, want %d", what, s.Len(), len(want))
	}
	for i, e := range s.All() {
		if want[i] != *e {
			t.Fatalf("%s: index %d of %s", what, i, e.Key)
		}
		if got := s.Get(e.Key); got != e {
			t.Fatalf("%s: Get(%s) = %v", what, e.Key, got)
		}
	}
	if s.Get("HTTPRoute/ns0/absent") != nil {
		t.Fatalf("%s: Get of an absent key", what)
	}
	if s.root == nil {
		return
	}
	leaves := 0
	var walk func(n *node[elem], depth int, root bool) int // returns the height
	walk = func(n *node[elem], depth int, root bool) int {
		if n.children == nil {
			leaves++
			if len(n.items) == 0 || len(n.items) > leafMax || n.first != n.items[0] || n.n != len(n.items) {
				t.Fatalf("%s: bad leaf: %d items, n=%d", what, len(n.items), n.n)
			}
			return 0
		}
		if len(n.children) > innerMax || (root && len(n.children) < 2) || n.first != n.children[0].first {
			t.Fatalf("%s: bad inner node: %d children", what, len(n.children))
		}
		h, total := -1, 0
		for _, c := range n.children {
			ch := walk(c, depth+1, false)
			if h >= 0 && ch != h {
				t.Fatalf("%s: leaves at different depths", what)
			}
			h = ch
			total += c.n
		}
		if total != n.n {
			t.Fatalf("%s: inner node counts %d, holds %d", what, n.n, total)
		}
		return h + 1
	}
	walk(s.root, 0, true)
	// Deletions do not leave the tree full of small leaves.
	if limit := 2*len(want)/leafMin + 2; leaves > limit {
		t.Fatalf("%s: %d leaves for %d elements (limit %d)", what, leaves, len(want), limit)
	}
}

// naiveDiff is Diff by comparing every element (as values: the sets of
// the tests never hold two equal elements of one key under different
// pointers, except where fresh sets are built).
func naiveDiff(a, b model) []string {
	var out []string
	for k, ea := range a {
		if eb, ok := b[k]; !ok {
			out = append(out, "-"+k)
		} else if ea != eb {
			out = append(out, "~"+k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "+"+k)
		}
	}
	slices.Sort(out)
	return out
}

// diffOf is Diff(a, b) as naiveDiff writes it, leaving out the pairs of
// equal elements (Diff compares pointers, and reports them).
func diffOf(t *testing.T, a, b set) []string {
	t.Helper()
	var out []string
	var last *elem
	for old, cur := range Diff(a, b, nil) {
		e := cur
		switch {
		case cur == nil:
			e = old
			out = append(out, "-"+old.Key)
		case old == nil:
			out = append(out, "+"+cur.Key)
		default:
			if old.Key != cur.Key || old == cur {
				t.Fatalf("diff yielded %s (%p) / %s (%p)", old.Key, old, cur.Key, cur)
			}
			if *old != *cur {
				out = append(out, "~"+cur.Key)
			}
		}
		if last != nil && last.Key >= e.Key {
			t.Fatalf("diff not in order: %s after %s", e.Key, last.Key)
		}
		last = e
	}
	slices.Sort(out)
	return out
}

func TestNewSortsAndKeepsTheLast(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 5, leafMax, leafMax + 1, 1000, 5000} {
		in := make([]elem, n)
		m := model{}
		for i := range in {
			in[i] = randomElem(rng, n/3+1)
			m[in[i].Key] = in[i] // the last one wins
		}
		checkSet(t, fmt.Sprintf("n=%d", n), newSet(in), m)
	}
	var zero set
	checkSet(t, "zero", zero, model{})
}

// TestEdits applies random edits, checking every version against a map,
// old versions after newer ones were made (they must not change), and Diff
// against a naive comparison.
func TestEdits(t *testing.T) {
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 7))
		keys := []int{40, 400, 2000}[seed%3]
		var sets []set
		var models []model
		m := model{}
		init := make([]elem, rng.IntN(2*keys))
		for i := range init {
			init[i] = randomElem(rng, keys)
			m[init[i].Key] = init[i]
		}
		cur := newSet(init)
		sets, models = append(sets, cur), append(models, maps.Clone(m))
		for step := range 150 {
			// Edits of a few elements, sometimes of many, sometimes
			// removals of every element of a kind (the tree shrinks).
			n := 1 + rng.IntN(4)
			var part []elem
			var scope []string
			switch rng.IntN(20) {
			case 0:
				n = rng.IntN(3 * leafMax * innerMax)
			case 1:
				n = len(m)
			case 2:
				kind := kinds[rng.IntN(len(kinds))]
				for k := range m {
					if strings.HasPrefix(k, kind+"/") {
						scope = append(scope, k)
						delete(m, k)
					}
				}
			}
			for range n {
				e := randomElem(rng, keys)
				if rng.IntN(3) == 0 || (len(m) > keys && rng.IntN(2) == 0) {
					scope = append(scope, e.Key) // removed
					delete(m, e.Key)
					continue
				}
				if rng.IntN(2) == 0 { // in scope, or not: both are set
					scope = append(scope, e.Key)
				}
				part = append(part, e)
			}
			// A key both removed and set is set: applied in that order
			// to the model.
			for _, e := range part {
				m[e.Key] = e
			}
			slices.SortStableFunc(part, func(a, b elem) int { return strings.Compare(a.Key, b.Key) })
			next := cur.Replace(part, scope)
			what := fmt.Sprintf("seed %d step %d", seed, step)
			checkSet(t, what, next, m)
			if got, want := diffOf(t, cur, next), naiveDiff(models[len(models)-1], m); !slices.Equal(got, want) {
				t.Fatalf("%s: diff %v, want %v", what, got, want)
			}
			cur = next
			sets, models = append(sets, cur), append(models, maps.Clone(m))
		}
		// Every version still holds what it held; diffs between any two
		// versions, and with sets built anew, are right.
		for i := range sets {
			if i%10 == 0 {
				checkSet(t, fmt.Sprintf("seed %d version %d", seed, i), sets[i], models[i])
			}
		}
		for range 20 {
			i, j := rng.IntN(len(sets)), rng.IntN(len(sets))
			if got, want := diffOf(t, sets[i], sets[j]), naiveDiff(models[i], models[j]); !slices.Equal(got, want) {
				t.Fatalf("seed %d: diff of versions %d and %d: %v, want %v", seed, i, j, got, want)
			}
			fresh := newSet(models[j].sorted())
			if got, want := diffOf(t, sets[i], fresh), naiveDiff(models[i], models[j]); !slices.Equal(got, want) {
				t.Fatalf("seed %d: diff of version %d and a fresh set: %v, want %v", seed, i, got, want)
			}
		}
	}
}

// Replace sorts and dedupes its scope, and keeps the last of several
// elements of one key of part.
func TestReplaceScopeAndDuplicates(t *testing.T) {
	s := newSet([]elem{{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}})
	got := s.Replace([]elem{{"b", 2}, {"b", 3}, {"e", 1}}, []string{"d", "a", "b", "a"})
	if want := []elem{{"b", 3}, {"c", 1}, {"e", 1}}; !slices.Equal(list(got), want) {
		t.Errorf("Replace: %v, want %v", list(got), want)
	}
	if got := s.Replace(nil, nil); got != s {
		t.Error("an empty Replace made a new set")
	}
	if want := []elem{{"a", 1}, {"b", 1}, {"c", 1}, {"d", 1}}; !slices.Equal(list(s), want) {
		t.Errorf("Replace changed the set it was made from: %v", list(s))
	}
}

func TestWithWithoutAndFrom(t *testing.T) {
	var s set
	for i := range 300 {
		s = s.With(elem{Key: fmt.Sprintf("HTTPRoute/apps/r%03d", i)})
	}
	s = s.With(elem{Key: "GatewayClass/b"}, elem{Key: "GatewayClass/a"}, elem{Key: "Gateway/infra/gw"})
	var classes []string
	for e := range s.From("GatewayClass/") {
		if !strings.HasPrefix(e.Key, "GatewayClass/") {
			break
		}
		classes = append(classes, e.Key)
	}
	if fmt.Sprint(classes) != "[GatewayClass/a GatewayClass/b]" {
		t.Errorf("GatewayClasses %v", classes)
	}
	for range s.From("ListenerSet/") {
		t.Error("an element after the last")
	}
	before := s
	changed := s.With(elem{Key: "HTTPRoute/apps/r150", Gen: 2}, elem{Key: "HTTPRoute/apps/r151", Gen: 1}, elem{Key: "HTTPRoute/apps/r151", Gen: 2})
	removed := changed.Without("HTTPRoute/apps/r007")
	if removed.Without("HTTPRoute/apps/nothing") != removed {
		t.Error("removing an absent element made a new set")
	}
	if got := diffOf(t, before, removed); fmt.Sprint(got) != "[-HTTPRoute/apps/r007 ~HTTPRoute/apps/r150 ~HTTPRoute/apps/r151]" {
		t.Errorf("diff %v", got)
	}
	if removed.Get("HTTPRoute/apps/r151").Gen != 2 {
		t.Error("With did not keep the last of two elements of one key")
	}
	if s.Len() != 303 || removed.Len() != 302 || before.Get("HTTPRoute/apps/r150").Gen != 0 {
		t.Error("an edit changed the set it was made from")
	}
	if diffOf(t, removed, removed) != nil {
		t.Error("a set differs from itself")
	}
}

// Without equal, Diff reports an element of one key under two pointers
// even when the values are equal; with it, only those it tells apart.
func TestDiffComparesPointersOrEqual(t *testing.T) {
	a := newSet([]elem{{"a", 1}, {"b", 1}, {"c", 1}})
	b := newSet([]elem{{"a", 1}, {"b", 2}, {"c", 1}})
	var got []string
	for old, cur := range Diff(a, b, nil) {
		if old == nil || cur == nil || old == cur {
			t.Errorf("diff yielded %v / %v", old, cur)
		}
		got = append(got, cur.Key)
	}
	if fmt.Sprint(got) != "[a b c]" {
		t.Errorf("diff without equal: %v, want every key", got)
	}
	got = nil
	for _, cur := range Diff(a, b, func(x, y *elem) bool { return *x == *y }) {
		got = append(got, cur.Key)
	}
	if fmt.Sprint(got) != "[b]" {
		t.Errorf("diff with equal: %v, want [b]", got)
	}
}

func TestIteratorsStop(t *testing.T) {
	var in []elem
	for i := range 200 {
		in = append(in, elem{Key: fmt.Sprintf("r%03d", i)})
	}
	a := newSet(in)
	b := a.With(elem{Key: "r100", Gen: 1}, elem{Key: "r150", Gen: 1})
	n := 0
	for range Diff(a, b, nil) {
		n++
		break
	}
	for range a.All() {
		n++
		break
	}
	for range a.From("r050") {
		n++
		break
	}
	if n != 3 {
		t.Errorf("%d iterations, want 3", n)
	}
}

// BenchmarkEdit: one element of n changes, as an incremental translation
// changes a status, and Diff finds it ("diff": the diff alone). B/op is
// what a change costs in nodes.
func BenchmarkEdit(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		in := make([]elem, n)
		for i := range in {
			in[i] = elem{Key: fmt.Sprintf("HTTPRoute/ns%d/r%06d", i%10, i)}
		}
		base := newSet(slices.Clone(in))
		edit := func(s set, i int) set {
			e := in[(i*7919)%n]
			e.Gen = int64(i + 1)
			return s.Replace([]elem{e}, []string{e.Key})
		}
		b.Run(fmt.Sprintf("elements=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			cur := base
			for i := 0; b.Loop(); i++ {
				next := edit(cur, i)
				changed := 0
				for range Diff(cur, next, nil) {
					changed++
				}
				if changed != 1 {
					b.Fatalf("%d changed", changed)
				}
				cur = next
			}
		})
		b.Run(fmt.Sprintf("elements=%d/diff", n), func(b *testing.B) {
			next := edit(base, 1)
			b.ReportAllocs()
			for b.Loop() {
				for range Diff(base, next, nil) {
				}
			}
		})
	}
}
