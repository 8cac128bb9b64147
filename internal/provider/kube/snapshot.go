package kube

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/internal/resource"
)

// Snapshot returns a snapshot of every input object in the cache and
// records what it references, for the event filter. It waits until the
// caches synced. Called by the pipeline's goroutine; concurrent calls are
// serialised.
//
// Every Service, EndpointSlice and Secret of the cache is in the snapshot
// (referenced or not); of Deployments, those Portico provisioned.
//
// The snapshot lists the objects changed since the previous snapshot
// (resource.Snapshot.Changes), from the informer events: every add, delete
// and update of an input kind, referenced or not, except status-only
// updates of Gateway API objects and updates of Namespaces that keep
// their labels (the snapshot has their new versions all the same). The
// first snapshot, and one rebuilt from scratch, has no Changes.
func (p *Provider) Snapshot(ctx context.Context) (*resource.Snapshot, error) {
	select {
	case <-p.syncedC:
	case <-ctx.Done():
		return nil, fmt.Errorf("kube provider: caches not synced: %w", ctx.Err())
	}
	p.snapMu.Lock()
	defer p.snapMu.Unlock()
	// The changes are taken before the stores are read: an event arriving
	// from now on is in the stores read below, or not, and in the changes
	// of the next snapshot either way (an informer updates its store
	// before it calls the handlers).
	p.mu.Lock()
	changes, refresh := p.changes, p.refresh
	p.changes, p.refresh = nil, nil
	p.mu.Unlock()

	if p.base != nil {
		snap, owners, err := p.incremental(changes, refresh)
		if err == nil {
			p.commit(snap, owners, false)
			return snap, nil
		}
		p.cfg.Log.Warn("incremental snapshot failed; rebuilding it from the cache", "error", err)
	}
	snap, err := p.full()
	if err != nil {
		p.keep(changes, refresh)
		return nil, err
	}
	p.commit(snap, nil, true)
	return snap, nil
}

// keep puts back changes and refreshes a failed snapshot took, for the
// next one.
func (p *Provider) keep(changes *resource.Changes, refresh map[resource.Ref]struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if changes != nil {
		if p.changes == nil {
			p.changes = resource.NewChanges(0)
		}
		p.changes.Merge(changes)
	}
	for r := range refresh {
		if p.refresh == nil {
			p.refresh = map[resource.Ref]struct{}{}
		}
		p.refresh[r] = struct{}{}
	}
}

// commit makes snap the base of the next snapshot and updates the
// references: those of the routes, Gateways and ListenerSets in owners
// (the changed ones; an empty contrib for one that is gone), or, after a
// full build, those of all of them.
func (p *Provider) commit(snap *resource.Snapshot, owners map[resource.Ref]contrib, full bool) {
	if full {
		owners = map[resource.Ref]contrib{}
		for _, k := range refOwnerKinds() {
			for key, o := range snap.Objects(k) {
				if c := contribOf(k, o); !c.empty() {
					owners[resource.Ref{Kind: k, Key: key}] = c
				}
			}
		}
	}
	p.mu.Lock()
	defer func() {
		cms := p.refs.configMapKeys()
		p.mu.Unlock()
		if p.byRef != nil {
			p.byRef.set(cms) // outside mu: its events take it
		}
	}()
	if full {
		p.owners, p.refs = owners, newRefs()
		for _, c := range owners {
			p.refs.add(c, 1)
		}
	} else {
		for r, c := range owners {
			p.refs.add(p.owners[r], -1)
			p.refs.add(c, 1)
			if c.empty() {
				delete(p.owners, r)
			} else {
				p.owners[r] = c
			}
		}
	}
	p.base = snap
}

// storeKey is the key of an object in an informer's store.
func storeKey(k resource.Key) string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

// inSnapshot reports whether an object of an input kind belongs in
// snapshots: of Deployments (the cache has those labelled as Portico's),
// only the ones provisioned for a Gateway.
func inSnapshot(k resource.Kind, o client.Object) bool {
	return k != resource.KindDeployment || isProvisioned(o)
}

// incremental makes the next snapshot from the base and the objects
// changed and refreshed since, read from the stores. It returns the
// references of the changed routes, Gateways and ListenerSets.
func (p *Provider) incremental(changes *resource.Changes, refresh map[resource.Ref]struct{}) (*resource.Snapshot, map[resource.Ref]contrib, error) {
	e := p.base.Edit()
	owners := map[resource.Ref]contrib{}
	update := func(r resource.Ref) error {
		st := p.stores[r.Kind]
		if st == nil {
			return fmt.Errorf("no store for %s", r.Kind)
		}
		item, exists, err := st.GetByKey(storeKey(r.Key))
		if err != nil {
			return fmt.Errorf("%s %s: %w", r.Kind, r.Key, err)
		}
		var obj client.Object
		if exists {
			o, ok := item.(client.Object)
			if !ok {
				return fmt.Errorf("%s %s: store holds a %T", r.Kind, r.Key, item)
			}
			if inSnapshot(r.Kind, o) {
				obj = o
			}
		}
		if obj == nil {
			err = e.Delete(r.Kind, r.Key)
		} else {
			err = e.Set(r.Kind, r.Key, obj)
		}
		if err != nil {
			return err
		}
		if refOwner(r.Kind) {
			if obj == nil {
				owners[r] = contrib{}
			} else {
				owners[r] = contribOf(r.Kind, obj)
			}
		}
		return nil
	}
	if changes == nil {
		changes = resource.NewChanges(0)
	}
	for r := range changes.Objects {
		if err := update(r); err != nil {
			return nil, nil, err
		}
	}
	for r := range refresh {
		if !changes.Has(r.Kind, r.Key) {
			if err := update(r); err != nil {
				return nil, nil, err
			}
		}
	}
	snap := e.Snapshot()
	changes.Since = p.base.ID()
	snap.Changes = changes
	return snap, owners, nil
}

// full lists every input object from the stores.
func (p *Provider) full() (*resource.Snapshot, error) {
	e := resource.New().Edit()
	for d := range resource.Kinds() {
		k := d.Kind
		st := p.stores[k]
		if st == nil {
			return nil, fmt.Errorf("kube provider: no store for %s", k)
		}
		for _, item := range st.List() {
			o, ok := item.(client.Object)
			if !ok {
				return nil, fmt.Errorf("kube provider: %s store holds a %T", k, item)
			}
			if !inSnapshot(k, o) {
				continue
			}
			if err := e.Set(k, key(o), o); err != nil {
				return nil, fmt.Errorf("kube provider: %w", err)
			}
		}
	}
	return e.Snapshot(), nil
}
