package kube

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/internal/resource"
)

// allServices are the Service keys a world can name.
func (w *world) allServices() []resource.Key {
	var keys []resource.Key
	for n := range w.namespaces {
		for i := range w.size {
			keys = append(keys, resource.Key{Namespace: fmt.Sprintf("ns%d", n), Name: fmt.Sprintf("svc%d", i)})
		}
	}
	return keys
}

// step applies one random event: a create or update (most often), a
// delete, or an update that does not matter for translation (status
// only; Namespace labels kept), whose object it returns.
func (w *world) step(f *fakeCluster) (refreshed *resource.Ref, err error) {
	k := resource.Kind(w.rng.IntN(int(resource.KindDeployment)) + 1)
	obj := w.object(k)
	key := resource.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	ref := &resource.Ref{Kind: k, Key: key}
	old, exists, err := f.stores[k].GetByKey(storeKey(key))
	if err != nil {
		return nil, err
	}
	switch w.rng.IntN(6) {
	case 0:
		return nil, f.del(k, key)
	case 1:
		if !exists {
			break
		}
		if n := w.statusOnly(old.(client.Object)); n != nil {
			return ref, f.put(n)
		}
	}
	if exists && k == resource.KindNamespace && maps.Equal(old.(client.Object).GetLabels(), obj.GetLabels()) {
		return ref, f.put(obj) // labels kept: does not matter
	}
	if exists && k == resource.KindDeployment && !deploymentMatters(old.(client.Object), obj) {
		return ref, f.put(obj) // still available (or not): does not matter
	}
	return nil, f.put(obj)
}

// checkSnapshot compares snap, made after prev, with a full rebuild of the
// stores, and the provider's references with those of the rebuild.
// refreshed are the objects whose updates since prev need not be in
// snap.Changes.
func checkSnapshot(t *testing.T, f *fakeCluster, w *world, prev, snap *resource.Snapshot, refreshed map[resource.Ref]bool) {
	t.Helper()
	svcs := w.allServices()
	want := f.full(t)
	if d := contentsOf(snap, svcs...).diff(contentsOf(want, svcs...)); d != "" {
		t.Fatalf("%s differ from a full rebuild", d)
	}
	wantRefs := collectRefs(want)
	f.p.mu.Lock()
	got := f.p.refs
	okRefs := maps.Equal(got.services, wantRefs.services) && maps.Equal(got.secrets, wantRefs.secrets)
	f.p.mu.Unlock()
	if !okRefs {
		t.Fatalf("references %v, want %v", got, wantRefs)
	}
	if prev == nil {
		return
	}
	c := snap.Changes
	if c == nil || c.Since != prev.ID() {
		t.Fatalf("changes %+v, want some since %d", c, prev.ID())
	}
	// Never fewer than changed: whatever differs is listed, but for
	// updates that do not matter.
	for r := range resource.Diff(prev, snap).Objects {
		if !c.Has(r.Kind, r.Key) && !refreshed[r] {
			t.Fatalf("%s %s changed but is not listed in %v", r.Kind, r.Key, c.Objects)
		}
	}
}

// TestIncrementalSnapshotsMatchFullRebuilds drives random events of every
// kind (creations, updates that change references, labels and
// provisioning, deletions, status-only updates) through the handlers and
// checks every snapshot against a rebuild from scratch; every snapshot
// must keep its contents after later ones were made.
func TestIncrementalSnapshotsMatchFullRebuilds(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			w := &world{rng: rand.New(rand.NewPCG(seed, 42)), size: 6, namespaces: 3}
			f := newFakeCluster(t)
			type version struct {
				s *resource.Snapshot
				c contents
			}
			var versions []version
			var prev *resource.Snapshot
			for batch := range 200 {
				refreshed := map[resource.Ref]bool{}
				n := w.rng.IntN(12)
				if batch == 0 {
					n = 200
				}
				for range n {
					r, err := w.step(f)
					if err != nil {
						t.Fatal(err)
					}
					if r != nil {
						refreshed[*r] = true
					}
				}
				snap, err := f.p.Snapshot(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if batch == 0 && snap.Changes != nil {
					t.Fatal("first snapshot has changes")
				}
				checkSnapshot(t, f, w, prev, snap, refreshed)
				versions = append(versions, version{snap, contentsOf(snap, w.allServices()...)})
				prev = snap
			}
			for i, v := range versions {
				if d := contentsOf(v.s, w.allServices()...).diff(v.c); d != "" {
					t.Fatalf("snapshot %d: %s changed after later snapshots", i, d)
				}
			}
		})
	}
}

// TestSnapshotsWhileEventsArrive makes snapshots while events arrive
// (run it with -race); once the events stop, the next snapshot equals a
// full rebuild.
func TestSnapshotsWhileEventsArrive(t *testing.T) {
	w := &world{rng: rand.New(rand.NewPCG(3, 3)), size: 8, namespaces: 3}
	f := newFakeCluster(t)
	ctx := context.Background()
	if _, err := f.p.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	wg.Go(func() {
		for range 3000 {
			if _, err := w.step(f); err != nil {
				errc <- err
				return
			}
		}
	})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var prev *resource.Snapshot
	snaps := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		snap, err := f.p.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if prev != nil && (snap.Changes == nil || snap.Changes.Since != prev.ID()) {
			t.Fatalf("changes %+v not relative to the previous snapshot %d", snap.Changes, prev.ID())
		}
		prev = snap
		snaps++
	}
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}
	snap, err := f.p.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Status-only updates are not listed: any object may have had one.
	all := map[resource.Ref]bool{}
	for r := range resource.Diff(prev, snap).Objects {
		all[r] = true
	}
	checkSnapshot(t, f, w, prev, snap, all)
	t.Logf("%d snapshots during 3000 events", snaps)
}

// TestInconsistentStoreRebuilds: an object that is not what the events
// said makes the next snapshot a full rebuild, without Changes.
func TestInconsistentStoreRebuilds(t *testing.T) {
	w := &world{rng: rand.New(rand.NewPCG(5, 5)), size: 4, namespaces: 2}
	f := newFakeCluster(t)
	for range 50 {
		if _, err := w.step(f); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	first, err := f.p.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A route stored under another route's key.
	r := w.httpRoute("ns0", "r0")
	if err := f.stores[resource.KindHTTPRoute].Add(r); err != nil {
		t.Fatal(err)
	}
	wrong := w.httpRoute("ns0", "r1")
	f.p.stores[resource.KindHTTPRoute] = keyedStore{f.stores[resource.KindHTTPRoute], map[string]any{"ns0/r0": wrong}}
	f.handlers[resource.KindHTTPRoute].OnAdd(r, false)
	snap, err := f.p.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Changes != nil {
		t.Errorf("rebuilt snapshot has changes %v", snap.Changes.Objects)
	}
	if snap.ID() == first.ID() {
		t.Error("no new snapshot")
	}
}

// keyedStore answers some keys with other objects.
type keyedStore struct {
	store
	override map[string]any
}

func (s keyedStore) GetByKey(k string) (any, bool, error) {
	if o, ok := s.override[k]; ok {
		return o, true, nil
	}
	return s.store.GetByKey(k)
}
