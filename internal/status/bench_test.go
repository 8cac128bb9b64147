package status

import (
	"slices"
	"testing"

	"k8s.io/utils/clock"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/testenv/workload"
)

func genSnapshot(routes int) *resource.Snapshot { return workload.Snapshot(routes) }

// BenchmarkPublish publishes 10,000 route statuses (and their Gateway's)
// again with one route's status changed, as the incremental translator
// hands them over: a set made from the previous one by an edit, sharing
// the rest. "all new" recomputes every status (equal contents, new
// pointers) in a new set, as a full translation does: every status is
// compared.
func BenchmarkPublish(b *testing.B) {
	const n = 10_000
	for _, bc := range []struct {
		name   string
		allNew bool
	}{{"routes=10000/one-changed", false}, {"routes=10000/all-new", true}} {
		b.Run(bc.name, func(b *testing.B) {
			w := newWriter(Config{}, clock.RealClock{})
			defer w.queue.ShutDown()
			base := world(n)
			prev := setOf(slices.Clone(base)...)
			w.Publish(prev)
			drain(w)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				// One route's status changes generation every time.
				changed := routeStatus("apps", base[1+n/2].Name, int64(i+2), "Accepted")
				var next gatewayapi.StatusSet
				if bc.allNew {
					all := world(n)
					all[1+n/2] = changed
					next = setOf(all...)
				} else {
					next = prev.With(changed)
				}
				prev = next
				b.StartTimer()
				w.Publish(next)
				b.StopTimer()
				drain(w)
				b.StartTimer()
			}
		})
	}
}
