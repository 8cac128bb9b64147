package incremental

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/portico-dev/portico/internal/resource"
)

// setServices, which re-indexes only the middle part of a list that
// changed, keeps the same Service → Gateways index as indexing every
// Gateway's list afresh, over random edits (insertions, removals and
// Services listed twice).
func TestSetServicesMatchesRebuild(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	svc := func() resource.Key { return resource.Key{Namespace: "ns", Name: fmt.Sprintf("s%d", rnd.IntN(12))} }
	gws := []resource.Key{{Namespace: "ns", Name: "a"}, {Namespace: "ns", Name: "b"}}
	x := &index{gatewayServices: map[resource.Key][]resource.Key{}, serviceGateways: map[resource.Key]set[resource.Key]{}}
	lists := map[resource.Key][]resource.Key{}
	for step := range 2000 {
		gw := gws[rnd.IntN(len(gws))]
		l := slices.Clone(lists[gw])
		switch rnd.IntN(4) {
		case 0, 1:
			l = slices.Insert(l, rnd.IntN(len(l)+1), svc())
		case 2:
			if len(l) > 0 {
				i := rnd.IntN(len(l))
				l = slices.Delete(l, i, i+1)
			}
		case 3:
			if len(l) > 0 {
				l[rnd.IntN(len(l))] = svc()
			}
		}
		lists[gw] = l
		x.setServices(gw, l)

		want := map[resource.Key]set[resource.Key]{}
		for g, l := range lists {
			for _, s := range l {
				if want[s] == nil {
					want[s] = set[resource.Key]{}
				}
				want[s].add(g)
			}
		}
		if !maps.EqualFunc(x.serviceGateways, want, func(a, b set[resource.Key]) bool { return maps.Equal(a, b) }) {
			t.Fatalf("step %d: index %v, want %v", step, x.serviceGateways, want)
		}
	}
}
