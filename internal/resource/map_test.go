package resource

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// mapContents returns the entries All yields, failing on a key seen twice
// or a count that differs from Len.
func mapContents(t *testing.T, m Map[Key, int]) map[Key]int {
	t.Helper()
	got := map[Key]int{}
	for k, v := range m.All() {
		if _, dup := got[k]; dup {
			t.Fatalf("key %v yielded twice", k)
		}
		got[k] = v
	}
	if len(got) != m.Len() {
		t.Fatalf("All yields %d entries, Len is %d", len(got), m.Len())
	}
	return got
}

func testKeys(n int) []Key {
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = Key{Namespace: fmt.Sprintf("ns%d", i%7), Name: fmt.Sprintf("k%d", i)}
	}
	return keys
}

// TestMapBuilder: Set and Delete before Freeze change the map in place;
// after Freeze (or Clone) they copy, leaving every earlier frozen version
// as it was.
func TestMapBuilder(t *testing.T) {
	keys := testKeys(500)
	var m Map[Key, int]
	if m.Len() != 0 || m.Has(keys[0]) || m.Value(keys[0]) != 0 {
		t.Fatal("zero Map not empty")
	}
	for range m.All() {
		t.Fatal("zero Map yields")
	}
	m.Delete(keys[0]) // nothing to delete: no effect
	want := map[Key]int{}
	for i, k := range keys {
		m.Set(k, i)
		want[k] = i
	}
	root := m.e.m.root
	m.Set(keys[1], -1) // in place: the builder owns the root
	want[keys[1]] = -1
	if m.e.m.root != root {
		t.Error("Set before Freeze copied the root")
	}
	m.Delete(keys[2])
	delete(want, keys[2])
	if got := mapContents(t, m); !maps.Equal(got, want) {
		t.Fatalf("contents differ: %d entries, want %d", len(got), len(want))
	}

	frozen := m.Clone()
	frozenWant := maps.Clone(want)
	m.Set(keys[3], -3)
	want[keys[3]] = -3
	if m.e.m.root == frozen.e.m.root {
		t.Error("Set after Clone changed the shared root in place")
	}
	root = m.e.m.root
	m.Set(keys[4], -4) // a new edit: in place again
	want[keys[4]] = -4
	if m.e.m.root != root {
		t.Error("second Set after Clone copied the root again")
	}
	// The clone changes independently too.
	frozen.Delete(keys[5])
	cloneWant := maps.Clone(frozenWant)
	delete(cloneWant, keys[5])
	m.Freeze()
	if got := mapContents(t, m); !maps.Equal(got, want) {
		t.Fatal("builder contents differ")
	}
	if got := mapContents(t, frozen); !maps.Equal(got, cloneWant) {
		t.Fatal("clone contents differ")
	}
	for _, k := range keys {
		if v, ok := m.Get(k); v != want[k] || ok != (k != keys[2]) {
			t.Fatalf("Get(%v) = %d %v", k, v, ok)
		}
	}

	// MapOf is frozen.
	o := MapOf(want)
	if o.e.token != nil {
		t.Error("MapOf not frozen")
	}
	if got := mapContents(t, o); !maps.Equal(got, want) {
		t.Fatal("MapOf contents differ")
	}
}

// TestMapAllOrderVaries: iteration starts at a random place, so that code
// depending on an order fails in tests as it would with a Go map.
func TestMapAllOrderVaries(t *testing.T) {
	m := MapOf(map[string]int{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8})
	first := slices.Collect(m.Keys())
	for range 100 {
		if got := slices.Collect(m.Keys()); !slices.Equal(got, first) {
			return
		}
	}
	t.Errorf("100 iterations in the same order %v", first)
}

// TestMapAllStops: iteration stops when the loop breaks.
func TestMapAllStops(t *testing.T) {
	var m Map[Key, int]
	for i, k := range testKeys(1000) {
		m.Set(k, i)
	}
	n := 0
	for range m.All() {
		n++
		if n == 10 {
			break
		}
	}
	for range m.Keys() {
		n++
		if n == 20 {
			break
		}
	}
	if n != 20 {
		t.Errorf("%d iterations", n)
	}
}

func TestSortedKeysAndNames(t *testing.T) {
	var m Map[Key, int]
	keys := testKeys(100)
	for i, k := range keys {
		m.Set(k, i)
	}
	got := SortedKeys(m)
	want := slices.Clone(keys)
	slices.SortFunc(want, CompareKeys)
	if !slices.Equal(got, want) {
		t.Errorf("SortedKeys %v", got)
	}
	names := MapOf(map[string]bool{"b": true, "c": true, "a": true})
	if got := SortedNames(names); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("SortedNames %v", got)
	}
}

// TestDiffMaps compares DiffMaps with a comparison of plain maps, for
// versions made from each other by edits (sharing structure), unrelated
// versions built from scratch, and with narrow hash masks (deep tries and
// equal hashes).
func TestDiffMaps(t *testing.T) {
	for _, mask := range []uint64{^uint64(0), 0xff, 0xf000_0000_0000_000f, 0} {
		t.Run(fmt.Sprintf("mask=%x", mask), func(t *testing.T) {
			defer func(m uint64) { phashMask = m }(phashMask)
			phashMask = mask
			rng := rand.New(rand.NewPCG(3, mask))
			keys := testKeys(300)
			type version struct {
				m    Map[Key, int]
				want map[Key]int
			}
			var versions []version
			var cur Map[Key, int]
			want := map[Key]int{}
			for range 150 {
				for range rng.IntN(10) + 1 {
					k := keys[rng.IntN(len(keys))]
					if rng.IntN(3) == 0 {
						cur.Delete(k)
						delete(want, k)
					} else {
						v := rng.IntN(5)
						cur.Set(k, v)
						want[k] = v
					}
				}
				versions = append(versions, version{cur.Clone(), maps.Clone(want)})
			}
			// Versions as they would be built from scratch.
			versions = append(versions, version{MapOf(want), want}, version{MapOf(map[Key]int{}), map[Key]int{}})
			eq := func(a, b int) bool { return a == b }
			for range 400 {
				a, b := versions[rng.IntN(len(versions))], versions[rng.IntN(len(versions))]
				got := map[Key]int{}
				DiffMaps(a.m, b.m, eq, func(k Key) { got[k]++ })
				wantDiff := map[Key]int{}
				for _, k := range keys {
					va, oka := a.want[k]
					vb, okb := b.want[k]
					if oka != okb || va != vb {
						wantDiff[k] = 1
					}
				}
				if !maps.Equal(got, wantDiff) {
					t.Fatalf("DiffMaps reported %v, want %v", got, wantDiff)
				}
			}
		})
	}
}

// TestDiffSkipsShared: Diff of a snapshot and one edit of it compares the
// changed path only.
func TestDiffSkipsShared(t *testing.T) {
	var a Map[Key, int]
	for i, k := range testKeys(10000) {
		a.Set(k, i)
	}
	a.Freeze()
	b := a.Clone()
	b.Set(Key{Namespace: "ns1", Name: "k1"}, -1)
	b.Delete(Key{Namespace: "ns2", Name: "k2"})
	b.Set(Key{Namespace: "new", Name: "k"}, 1)
	calls := 0
	var got []Key
	DiffMaps(a, b, func(x, y int) bool { calls++; return x == y }, func(k Key) { got = append(got, k) })
	slices.SortFunc(got, CompareKeys)
	want := []Key{{Namespace: "new", Name: "k"}, {Namespace: "ns1", Name: "k1"}, {Namespace: "ns2", Name: "k2"}}
	if !slices.Equal(got, want) {
		t.Errorf("diff %v, want %v", got, want)
	}
	if calls > 10 {
		t.Errorf("%d values compared for 3 changes", calls)
	}
}

// BenchmarkMap compares reading a Map with reading a Go map of the same
// entries (lookups and a full iteration), the translator's use of the
// maps of a Snapshot.
func BenchmarkMap(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		keys := make([]Key, n)
		gm := map[Key]*int{}
		var pm Map[Key, *int]
		for i := range keys {
			keys[i] = Key{Namespace: fmt.Sprintf("ns%d", i%10), Name: fmt.Sprintf("route%d", i)}
			gm[keys[i]] = &i
			pm.Set(keys[i], &i)
		}
		pm.Freeze()
		b.Run(fmt.Sprintf("entries=%d/get/map", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				if gm[keys[i%n]] == nil {
					b.Fatal("missing")
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("entries=%d/get/pmap", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				if pm.Value(keys[i%n]) == nil {
					b.Fatal("missing")
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("entries=%d/all/map", n), func(b *testing.B) {
			for b.Loop() {
				c := 0
				for range gm {
					c++
				}
			}
		})
		b.Run(fmt.Sprintf("entries=%d/all/pmap", n), func(b *testing.B) {
			for b.Loop() {
				c := 0
				for range pm.All() {
					c++
				}
			}
		})
	}
}
