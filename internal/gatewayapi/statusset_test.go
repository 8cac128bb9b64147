package gatewayapi

import (
	"fmt"
	"github.com/portico-dev/portico/internal/resource"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

var setKinds = []resource.Kind{resource.KindGRPCRoute, resource.KindGateway, resource.KindGatewayClass, resource.KindHTTPRoute, resource.KindListenerSet}

// randomStatus returns a status of a random object among about keys.
func randomStatus(rng *rand.Rand, keys int) Status {
	kind := setKinds[rng.IntN(len(setKinds))]
	ns := fmt.Sprintf("ns%d", rng.IntN(4))
	if kind == resource.KindGatewayClass {
		ns = ""
	}
	return Status{Kind: kind, Namespace: ns, Name: fmt.Sprintf("o%04d", rng.IntN(keys)), Generation: rng.Int64N(1 << 40)}
}

// model is what a set should hold, by key.
type model map[string]Status

func (m model) sorted() []Status {
	out := slices.Collect(maps.Values(m))
	slices.SortFunc(out, func(a, b Status) int { return compareStatuses(&a, &b) })
	return out
}

func setList(s StatusSet) []Status {
	var out []Status
	for _, st := range s.All() {
		out = append(out, *st)
	}
	return out
}

// checkSet asserts that s holds exactly m, sorted, and that its tree is
// well formed.
func checkSet(t *testing.T, what string, s StatusSet, m model) {
	t.Helper()
	want := m.sorted()
	if got := setList(s); !slices.Equal(got, want) {
		t.Fatalf("%s: set holds %d statuses, want %d (or not in order)", what, len(got), len(want))
	}
	if s.Len() != len(want) {
		t.Fatalf("%s: Len = %d, want %d", what, s.Len(), len(want))
	}
	for i, st := range s.All() {
		if want[i] != *st {
			t.Fatalf("%s: index %d of %s", what, i, st.Key())
		}
		if got := s.Get(st.Kind, st.Namespace, st.Name); got != st {
			t.Fatalf("%s: Get(%s) = %v", what, st.Key(), got)
		}
	}
	if s.Get(resource.KindHTTPRoute, "ns0", "absent") != nil {
		t.Fatalf("%s: Get of an absent object", what)
	}
	if s.root == nil {
		return
	}
	leaves := 0
	var walk func(n *statusNode, depth int, root bool) int // returns the height
	walk = func(n *statusNode, depth int, root bool) int {
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
		t.Fatalf("%s: %d leaves for %d statuses (limit %d)", what, leaves, len(want), limit)
	}
}

// naiveDiff is DiffStatuses by comparing every status.
func naiveDiff(a, b model) []string {
	var out []string
	for k, sa := range a {
		if sb, ok := b[k]; !ok {
			out = append(out, "-"+k)
		} else if sa != sb {
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

func diffOf(t *testing.T, a, b StatusSet) []string {
	t.Helper()
	var out []string
	var last *Status
	for old, cur := range DiffStatuses(a, b) {
		st := cur
		switch {
		case cur == nil:
			st = old
			out = append(out, "-"+old.Key())
		case old == nil:
			out = append(out, "+"+cur.Key())
		default:
			if compareStatuses(old, cur) != 0 || *old == *cur {
				t.Fatalf("diff yielded %s / %s", old.Key(), cur.Key())
			}
			out = append(out, "~"+cur.Key())
		}
		if last != nil && compareStatuses(last, st) >= 0 {
			t.Fatalf("diff not in order: %s after %s", st.Key(), last.Key())
		}
		last = st
	}
	slices.Sort(out)
	return out
}

func TestNewStatusSetSortsAndKeepsTheLast(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 5, leafMax, leafMax + 1, 1000, 5000} {
		in := make([]Status, n)
		m := model{}
		for i := range in {
			in[i] = randomStatus(rng, n/3+1)
			m[in[i].Key()] = in[i] // the last one wins
		}
		checkSet(t, fmt.Sprintf("n=%d", n), NewStatusSet(in), m)
	}
	var zero StatusSet
	checkSet(t, "zero", zero, model{})
}

// TestStatusSetEdits applies random edits, checking every version against
// a map, old versions after newer ones were made (they must not change),
// and DiffStatuses against a naive comparison.
func TestStatusSetEdits(t *testing.T) {
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 7))
		keys := []int{40, 400, 2000}[seed%3]
		var sets []StatusSet
		var models []model
		m := model{}
		init := make([]Status, rng.IntN(2*keys))
		for i := range init {
			init[i] = randomStatus(rng, keys)
			m[init[i].Key()] = init[i]
		}
		cur := NewStatusSet(init)
		sets, models = append(sets, cur), append(models, maps.Clone(m))
		for step := range 150 {
			// Edits of a few statuses, sometimes of many, sometimes
			// removals of every status of a kind (the tree shrinks).
			n := 1 + rng.IntN(4)
			var part []Status
			var scope []StatusKey
			switch rng.IntN(20) {
			case 0:
				n = rng.IntN(3 * leafMax * innerMax)
			case 1:
				n = len(m)
			case 2:
				kind := setKinds[rng.IntN(len(setKinds))]
				for k, st := range m {
					if st.Kind == kind {
						scope = append(scope, KeyOf(&st))
						delete(m, k)
					}
				}
			}
			for range n {
				st := randomStatus(rng, keys)
				if rng.IntN(3) == 0 || (len(m) > keys && rng.IntN(2) == 0) {
					scope = append(scope, KeyOf(&st)) // removed
					delete(m, st.Key())
					continue
				}
				if rng.IntN(2) == 0 { // in scope, or not: both are set
					scope = append(scope, KeyOf(&st))
				}
				part = append(part, st)
			}
			// A key both removed and set is set: applied in that order
			// to the model.
			for _, st := range part {
				m[st.Key()] = st
			}
			slices.SortStableFunc(part, func(a, b Status) int { return compareStatuses(&a, &b) })
			slices.SortFunc(scope, CompareStatusKeys)
			next := cur.apply(statusEdits(part, slices.Compact(scope)))
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
			fresh := NewStatusSet(models[j].sorted())
			if got, want := diffOf(t, sets[i], fresh), naiveDiff(models[i], models[j]); !slices.Equal(got, want) {
				t.Fatalf("seed %d: diff of version %d and a fresh set: %v, want %v", seed, i, got, want)
			}
		}
	}
}

func TestStatusSetWithWithoutAndKinds(t *testing.T) {
	var s StatusSet
	for i := range 300 {
		s = s.With(Status{Kind: resource.KindHTTPRoute, Namespace: "apps", Name: fmt.Sprintf("r%03d", i)})
	}
	s = s.With(Status{Kind: resource.KindGatewayClass, Name: "b"}, Status{Kind: resource.KindGatewayClass, Name: "a"},
		Status{Kind: resource.KindGateway, Namespace: "infra", Name: "gw"})
	var classes []string
	for st := range s.OfKind(resource.KindGatewayClass) {
		classes = append(classes, st.Name)
	}
	if fmt.Sprint(classes) != "[a b]" {
		t.Errorf("GatewayClasses %v", classes)
	}
	for range s.OfKind(resource.KindListenerSet) {
		t.Error("a ListenerSet in a set of none")
	}
	before := s
	changed := s.With(Status{Kind: resource.KindHTTPRoute, Namespace: "apps", Name: "r150", Generation: 2})
	removed := changed.Without(resource.KindHTTPRoute, "apps", "r007")
	if removed.Without(resource.KindHTTPRoute, "apps", "nothing") != removed {
		t.Error("removing an absent status made a new set")
	}
	if got := diffOf(t, before, removed); fmt.Sprint(got) != "[-HTTPRoute/apps/r007 ~HTTPRoute/apps/r150]" {
		t.Errorf("diff %v", got)
	}
	if s.Len() != 303 || removed.Len() != 302 || before.Get(resource.KindHTTPRoute, "apps", "r150").Generation != 0 {
		t.Error("an edit changed the set it was made from")
	}
	if diffOf(t, removed, removed) != nil {
		t.Error("a set differs from itself")
	}
}

func statusEqualIgnoringPointers(a, b *Status) bool {
	return a.Generation == b.Generation && reflect.DeepEqual(deref(a), deref(b))
}

func deref(s *Status) any {
	switch {
	case s.Route != nil:
		return *s.Route
	case s.Gateway != nil:
		return *s.Gateway
	case s.ListenerSet != nil:
		return *s.ListenerSet
	case s.GatewayClass != nil:
		return *s.GatewayClass
	}
	return nil
}

func TestStatusSetIteratorsStop(t *testing.T) {
	var in []Status
	for i := range 200 {
		in = append(in, Status{Kind: resource.KindHTTPRoute, Namespace: "a", Name: fmt.Sprintf("r%03d", i)})
	}
	a := NewStatusSet(in)
	b := a.With(Status{Kind: resource.KindHTTPRoute, Namespace: "a", Name: "r100", Generation: 1},
		Status{Kind: resource.KindHTTPRoute, Namespace: "a", Name: "r150", Generation: 1})
	n := 0
	for range DiffStatuses(a, b) {
		n++
		break
	}
	for range a.All() {
		n++
		break
	}
	for range a.OfKind(resource.KindHTTPRoute) {
		n++
		break
	}
	if n != 3 {
		t.Errorf("%d iterations, want 3", n)
	}
}

// BenchmarkStatusSetEdit: one status of n changes, as an incremental
// translation changes it, and DiffStatuses finds it ("diff": the diff
// alone). B/op is what a change costs in statuses.
func BenchmarkStatusSetEdit(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		in := make([]Status, n)
		for i := range in {
			in[i] = Status{Kind: resource.KindHTTPRoute, Namespace: fmt.Sprintf("ns%d", i%10), Name: fmt.Sprintf("r%06d", i)}
		}
		base := NewStatusSet(in)
		edit := func(s StatusSet, i int) StatusSet {
			st := in[(i*7919)%n]
			st.Generation = int64(i + 1)
			return s.apply([]statusEdit{{KeyOf(&st), &st}})
		}
		b.Run(fmt.Sprintf("statuses=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			cur := base
			for i := 0; b.Loop(); i++ {
				next := edit(cur, i)
				changed := 0
				for range DiffStatuses(cur, next) {
					changed++
				}
				if changed != 1 {
					b.Fatalf("%d changed", changed)
				}
				cur = next
			}
		})
		b.Run(fmt.Sprintf("statuses=%d/diff", n), func(b *testing.B) {
			next := edit(base, 1)
			b.ReportAllocs()
			for b.Loop() {
				for range DiffStatuses(base, next) {
				}
			}
		})
	}
}
