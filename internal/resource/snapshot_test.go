package resource

import (
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

const (
	readers  = 16 // goroutines reading one snapshot at once
	services = 20
	perSvc   = 3 // EndpointSlices per Service
)

// slicesSnapshot returns a snapshot, not built, with Services, their
// EndpointSlices (added in reverse name order, so that an index must sort
// them) and some routes.
func slicesSnapshot() *Snapshot {
	s := New()
	for i := range services {
		svc := fmt.Sprintf("svc%d", i)
		s.Services.Set(Key{Namespace: "ns", Name: svc}, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: svc}})
		for j := perSvc - 1; j >= 0; j-- {
			name := fmt.Sprintf("%s-%d", svc, j)
			s.EndpointSlices.Set(Key{Namespace: "ns", Name: name}, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{
				Namespace: "ns", Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}}})
		}
		s.HTTPRoutes.Set(Key{Namespace: "ns", Name: svc}, &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: svc}})
	}
	return s
}

// checkSlices reports whether s's EndpointSlicesFor answers every Service
// with its slices in name order.
func checkSlices(s *Snapshot) error {
	for i := range services {
		svc := fmt.Sprintf("svc%d", i)
		got := s.EndpointSlicesFor(Key{Namespace: "ns", Name: svc})
		if len(got) != perSvc {
			return fmt.Errorf("%s: %d slices, want %d", svc, len(got), perSvc)
		}
		for j, es := range got {
			if want := fmt.Sprintf("%s-%d", svc, j); es.Name != want {
				return fmt.Errorf("%s: slice %d is %s, want %s", svc, j, es.Name, want)
			}
		}
	}
	if got := s.EndpointSlicesFor(Key{Namespace: "ns", Name: "absent"}); got != nil {
		return fmt.Errorf("absent Service: %d slices", len(got))
	}
	return nil
}

// readConcurrently runs read from many goroutines that start together and
// returns the first error.
func readConcurrently(read func() error) error {
	var (
		start = make(chan struct{})
		wg    sync.WaitGroup
		errs  = make(chan error, readers)
	)
	for range readers {
		wg.Go(func() {
			<-start
			if err := read(); err != nil {
				errs <- err
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	return <-errs
}

// TestConcurrentFirstReads reads snapshots, built and not, from many
// goroutines at once, with their very first reads racing: the reads must
// agree, and (run with -race, as `make test-race` does for this package's
// callers and `go test -race ./internal/resource/` for it) must not race,
// because no read writes. Before reads stopped building lazily, the first
// ID or EndpointSlicesFor of a snapshot not built wrote its ID and index.
func TestConcurrentFirstReads(t *testing.T) {
	for _, built := range []bool{true, false} {
		t.Run(fmt.Sprintf("built=%v", built), func(t *testing.T) {
			s := slicesSnapshot()
			if built {
				s.Build()
			}
			before := *s
			other := New().Build()
			var ids sync.Map // the IDs the readers saw
			err := readConcurrently(func() error {
				ids.Store(s.ID(), true)
				if err := checkSlices(s); err != nil {
					return err
				}
				if n := s.Len(); n != services*(2+perSvc) {
					return fmt.Errorf("Len %d", n)
				}
				// Diff, and an Edit from the shared base, are reads of it.
				if c := Diff(other, s); c.Len() != s.Len() || c.Since != other.ID() {
					return fmt.Errorf("Diff: %d objects since %d", c.Len(), c.Since)
				}
				e := s.Edit()
				if err := e.Delete(KindEndpointSlice, Key{Namespace: "ns", Name: "svc3-1"}); err != nil {
					return err
				}
				n := e.Snapshot()
				if got := len(n.EndpointSlicesFor(Key{Namespace: "ns", Name: "svc3"})); got != perSvc-1 {
					return fmt.Errorf("edited snapshot: %d slices of svc3", got)
				}
				if c := Diff(s, n); c.Len() != 1 || !c.Has(KindEndpointSlice, Key{Namespace: "ns", Name: "svc3-1"}) {
					return fmt.Errorf("Diff of the edit: %v", c.Objects)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if *s != before {
				t.Error("reading the snapshot changed it")
			}
			id := s.ID()
			ids.Range(func(seen, _ any) bool {
				if seen != id || id == 0 {
					t.Errorf("a reader saw ID %d, the snapshot has %d", seen, id)
				}
				return true
			})
			if err := checkSlices(s.Build()); err != nil {
				t.Errorf("after Build: %v", err)
			}
			if s.ID() != id {
				t.Errorf("Build changed the ID from %d to %d", id, s.ID())
			}
		})
	}
}

// TestIDs: every snapshot made gets a distinct ID; a zero Snapshot gets
// one from Build.
func TestIDs(t *testing.T) {
	seen := map[uint64]bool{}
	add := func(what string, s *Snapshot) {
		t.Helper()
		if s.ID() == 0 || seen[s.ID()] {
			t.Errorf("%s: ID %d is zero or taken", what, s.ID())
		}
		seen[s.ID()] = true
	}
	a := New()
	add("New", a)
	add("Edit of a snapshot not built", a.Edit().Snapshot())
	add("Edit of a built one", a.Build().Edit().Snapshot())
	var z Snapshot
	if z.ID() != 0 {
		t.Errorf("zero Snapshot: ID %d", z.ID())
	}
	add("zero Snapshot, built", z.Build())
}

// TestEditorAfterSnapshot: Set and Delete after Snapshot are errors, and
// Snapshot again returns the same snapshot.
func TestEditorAfterSnapshot(t *testing.T) {
	e := New().Edit()
	s := e.Snapshot()
	r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r"}}
	if err := e.Set(KindHTTPRoute, Key{Namespace: "ns", Name: "r"}, r); err == nil {
		t.Error("Set after Snapshot")
	}
	if err := e.Delete(KindHTTPRoute, Key{Namespace: "ns", Name: "r"}); err == nil {
		t.Error("Delete after Snapshot")
	}
	if e.Snapshot() != s || s.HTTPRoutes.Len() != 0 {
		t.Error("Snapshot again")
	}
}
