package gatewayapi

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/portico-dev/portico/internal/resource"
)

// The set itself is tested in package sortedset; these tests check what
// StatusSet adds: the order of statuses (by kind name, then namespace and
// name), lookups by object, OfKind, and DiffStatuses comparing contents.

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

func TestNewStatusSetSortsAndKeepsTheLast(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 5, 33, 1000, 5000} {
		in := make([]Status, n)
		want := map[string]Status{}
		for i := range in {
			in[i] = randomStatus(rng, n/3+1)
			want[in[i].Key()] = in[i] // the last one wins
		}
		s := NewStatusSet(in)
		if s.Len() != len(want) {
			t.Fatalf("n=%d: Len = %d, want %d", n, s.Len(), len(want))
		}
		var last *Status
		for i, st := range s.All() {
			if want[st.Key()] != *st {
				t.Fatalf("n=%d: index %d: %s is not the last status of its object", n, i, st.Key())
			}
			if last != nil && compareStatuses(last, st) >= 0 {
				t.Fatalf("n=%d: %s after %s", n, st.Key(), last.Key())
			}
			if got := s.Get(st.Kind, st.Namespace, st.Name); got != st {
				t.Fatalf("n=%d: Get(%s) = %v", n, st.Key(), got)
			}
			last = st
		}
		if s.Get(resource.KindHTTPRoute, "ns0", "absent") != nil {
			t.Fatalf("n=%d: Get of an absent object", n)
		}
	}
}

// The order is by kind name, not by the number of the kind.
func TestStatusSetOrdersByKindName(t *testing.T) {
	s := NewStatusSet([]Status{
		{Kind: resource.KindHTTPRoute, Namespace: "a", Name: "r"},
		{Kind: resource.KindGatewayClass, Name: "c"},
		{Kind: resource.KindGateway, Namespace: "b", Name: "g"},
		{Kind: resource.KindGRPCRoute, Namespace: "a", Name: "r"},
	})
	var got []string
	for _, st := range s.All() {
		got = append(got, st.Key())
	}
	if want := []string{"GRPCRoute/a/r", "Gateway/b/g", "GatewayClass/c", "HTTPRoute/a/r"}; !slices.Equal(got, want) {
		t.Errorf("order %q, want %q", got, want)
	}
}

func diffOf(a, b StatusSet) []string {
	var out []string
	for old, cur := range DiffStatuses(a, b) {
		switch {
		case cur == nil:
			out = append(out, "-"+old.Key())
		case old == nil:
			out = append(out, "+"+cur.Key())
		default:
			out = append(out, "~"+cur.Key())
		}
	}
	return out
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
	if got := diffOf(before, removed); fmt.Sprint(got) != "[-HTTPRoute/apps/r007 ~HTTPRoute/apps/r150]" {
		t.Errorf("diff %v", got)
	}
	if s.Len() != 303 || removed.Len() != 302 || before.Get(resource.KindHTTPRoute, "apps", "r150").Generation != 0 {
		t.Error("an edit changed the set it was made from")
	}
	if diffOf(removed, removed) != nil {
		t.Error("a set differs from itself")
	}
}

// DiffStatuses compares statuses as values: the same status computed
// anew (a new pointer, equal contents) is not a difference.
func TestDiffStatusesComparesContents(t *testing.T) {
	route := func(gen int64) Status {
		return Status{Kind: resource.KindHTTPRoute, Namespace: "a", Name: "r", Generation: gen}
	}
	a := NewStatusSet([]Status{route(1), {Kind: resource.KindGateway, Namespace: "a", Name: "gw"}})
	b := NewStatusSet([]Status{route(1), {Kind: resource.KindGateway, Namespace: "a", Name: "gw"}})
	if got := diffOf(a, b); got != nil {
		t.Errorf("equal sets built apart differ: %v", got)
	}
	c := a.Replace([]Status{route(2)}, []StatusKey{{Kind: resource.KindHTTPRoute, Key: resource.Key{Namespace: "a", Name: "r"}}})
	if got := diffOf(b, c); fmt.Sprint(got) != "[~HTTPRoute/a/r]" {
		t.Errorf("diff %v", got)
	}
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

// BenchmarkStatusSet: a set of n route statuses. "edit": one status
// changes through Replace, as the incremental engine's merge changes it,
// and DiffStatuses finds it, as the status writer does (B/op is what a
// change costs); "diff": the diff alone; "get": a lookup; "new": the set
// built anew from statuses out of order, "new-sorted" from statuses in
// order, as a full translation hands them over.
func BenchmarkStatusSet(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		in := make([]Status, n)
		for i := range in {
			in[i] = Status{Kind: resource.KindHTTPRoute, Namespace: fmt.Sprintf("ns%d", i%10), Name: fmt.Sprintf("r%06d", i)}
		}
		base := NewStatusSet(slices.Clone(in))
		edit := func(s StatusSet, i int) StatusSet {
			st := in[(i*7919)%n]
			st.Generation = int64(i + 1)
			return s.Replace([]Status{st}, []StatusKey{KeyOf(&st)})
		}
		b.Run(fmt.Sprintf("statuses=%d/edit", n), func(b *testing.B) {
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
		b.Run(fmt.Sprintf("statuses=%d/get", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				st := &in[(i*7919)%n]
				if base.Get(st.Kind, st.Namespace, st.Name) == nil {
					b.Fatal("missing")
				}
			}
		})
		b.Run(fmt.Sprintf("statuses=%d/new", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				NewStatusSet(slices.Clone(in))
			}
		})
		sorted := slices.Clone(in)
		slices.SortFunc(sorted, func(a, b Status) int { return compareStatuses(&a, &b) })
		b.Run(fmt.Sprintf("statuses=%d/new-sorted", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				NewStatusSet(sorted) // in order already: not reordered
			}
		})
	}
}
