package resource

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// pmapContents returns the entries of m, failing on a key seen twice.
func pmapContents(t *testing.T, m pmap[Key, int]) map[Key]int {
	t.Helper()
	got := map[Key]int{}
	m.Range(func(k Key, v int) bool {
		if _, dup := got[k]; dup {
			t.Fatalf("key %v listed twice", k)
		}
		got[k] = v
		return true
	})
	return got
}

// checkPmap compares m with the map it should hold.
func checkPmap(t *testing.T, m pmap[Key, int], want map[Key]int, probes []Key) {
	t.Helper()
	if m.Len() != len(want) {
		t.Fatalf("Len %d, want %d", m.Len(), len(want))
	}
	if got := pmapContents(t, m); !maps.Equal(got, want) {
		t.Fatalf("contents differ: %d entries, want %d", len(got), len(want))
	}
	for _, k := range probes {
		v, ok := m.Get(k)
		w, wok := want[k]
		if ok != wok || v != w {
			t.Fatalf("Get(%v) = %d %v, want %d %v", k, v, ok, w, wok)
		}
	}
}

// TestPmapMatchesMap applies random sets and deletes, in edits of random
// size, and checks every version ever made against a plain map, also
// after later edits (versions are immutable). A narrow hash mask forces
// equal hashes and the deepest levels of the trie.
func TestPmapMatchesMap(t *testing.T) {
	for _, mask := range []uint64{^uint64(0), 0xff, 0xf000_0000_0000_000f, 0} {
		t.Run(fmt.Sprintf("mask=%x", mask), func(t *testing.T) {
			defer func(m uint64) { phashMask = m }(phashMask)
			phashMask = mask
			rng := rand.New(rand.NewPCG(1, mask))
			keys := make([]Key, 300)
			for i := range keys {
				keys[i] = Key{Namespace: fmt.Sprintf("ns%d", i%7), Name: fmt.Sprintf("k%d", i)}
			}
			type version struct {
				m    pmap[Key, int]
				want map[Key]int
			}
			var versions []version
			cur, want := pmap[Key, int]{}, map[Key]int{}
			for step := range 400 {
				e := cur.edit()
				for range rng.IntN(20) + 1 {
					k := keys[rng.IntN(len(keys))]
					if rng.IntN(3) == 0 {
						e.Delete(k)
						delete(want, k)
					} else {
						v := rng.IntN(1000)
						e.Set(k, v)
						want[k] = v
					}
					v, ok := e.Get(k)
					if w, wok := want[k]; ok != wok || v != w {
						t.Fatalf("step %d: Get(%v) during the edit = %d %v, want %d %v", step, k, v, ok, w, wok)
					}
				}
				cur = e.Done()
				versions = append(versions, version{cur, maps.Clone(want)})
				if step%50 == 49 {
					for _, v := range versions {
						checkPmap(t, v.m, v.want, keys)
					}
				}
			}
			// Delete everything: the trie collapses to nothing.
			e := cur.edit()
			for _, k := range keys {
				e.Delete(k)
			}
			cur = e.Done()
			checkPmap(t, cur, map[Key]int{}, keys)
			if cur.root != nil && len(cur.root.slots) != 0 {
				t.Errorf("empty map keeps %d slots", len(cur.root.slots))
			}
			for _, v := range versions {
				checkPmap(t, v.m, v.want, keys)
			}
		})
	}
}

// TestPmapEditSharesNodes: a one-key edit of a large map copies a path, not
// the map.
func TestPmapEditSharesNodes(t *testing.T) {
	e := pmap[Key, int]{}.edit()
	for i := range 10000 {
		e.Set(Key{Namespace: "ns", Name: fmt.Sprint(i)}, i)
	}
	base := e.Done()
	allocs := testing.AllocsPerRun(100, func() {
		e := base.edit()
		e.Set(Key{Namespace: "ns", Name: "42"}, -1)
		e.Done()
	})
	// The edit, the token, and per level a node with its slots and the
	// new entry slice: about 3 levels at 10,000 keys.
	if allocs > 12 {
		t.Errorf("one-key edit of 10,000 keys: %.0f allocations", allocs)
	}
	if v, _ := base.Get(Key{Namespace: "ns", Name: "42"}); v != 42 {
		t.Errorf("base changed: %d", v)
	}
}

// BenchmarkOneChange compares the two ways of making a new version of a
// map of n entries with one entry changed: copying a Go map (what Editor
// did for the maps of a Snapshot when they were Go maps) and editing a
// pmap (what it does now, for the maps (Map) and the EndpointSlice index).
func BenchmarkOneChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		m := map[Key]*int{}
		e := pmap[Key, *int]{}.edit()
		for i := range n {
			k := Key{Namespace: fmt.Sprintf("ns%d", i%10), Name: fmt.Sprintf("route%d", i)}
			m[k] = &i
			e.Set(k, &i)
		}
		p := e.Done()
		k, v := Key{Namespace: "ns7", Name: "route7"}, new(int)
		b.Run(fmt.Sprintf("entries=%d/map-copy", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c := maps.Clone(m)
				c[k] = v
			}
		})
		b.Run(fmt.Sprintf("entries=%d/pmap-edit", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e := p.edit()
				e.Set(k, v)
				e.Done()
			}
		})
	}
}
