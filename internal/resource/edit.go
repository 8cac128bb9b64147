package resource

import (
	"errors"
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Editor makes a new snapshot from a built one (its base) by setting and
// deleting objects, without modifying the base: the new snapshot's maps
// share with the base's everything but the paths to the changed entries
// (see Map), and its EndpointSlice index shares the lists of every Service
// whose slices did not change. Building it costs O(log n) per changed
// object, not a copy of the maps or a rebuild of the indexes.
//
// An Editor is not safe for concurrent use; the base may be read
// concurrently.
type Editor struct {
	base, s *Snapshot
	// slices lists the EndpointSlices set or deleted, with the Service
	// the base's version belonged to.
	slices map[Key]Key
	done   bool
}

// Edit starts a snapshot from s, which must not be modified any more. Edit
// only reads s, so several Editors may start from one snapshot at once; a
// snapshot not built yet is indexed in the new snapshot, not in s.
func (s *Snapshot) Edit() *Editor {
	n := *s
	n.id, n.Changes = 0, nil
	n.freeze() // changes copy what they change, even if s was changed after Build
	if !n.indexed {
		n.slicesByService, n.indexed = indexSlices(n.EndpointSlices), true
	}
	return &Editor{base: s, s: &n, slices: map[Key]Key{}}
}

// Set makes obj the object of kind k under key (key.Name alone for the
// cluster-scoped GatewayClasses and Namespaces). obj must be a pointer to
// the kind's type, named by key; a nil obj deletes.
func (e *Editor) Set(k Kind, key Key, obj any) error {
	if obj == nil {
		return e.Delete(k, key)
	}
	if e.done {
		return errEditorDone
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return fmt.Errorf("resource: %T is not an API object", obj)
	}
	if m.GetNamespace() != key.Namespace || m.GetName() != key.Name {
		return fmt.Errorf("resource: %s %s/%s set under key %s", k, m.GetNamespace(), m.GetName(), key)
	}
	d := KindOf(k)
	if d == nil {
		return fmt.Errorf("resource: unknown kind %d", k)
	}
	if ok = d.store.set(e.s, key, obj); ok && k == KindEndpointSlice {
		e.sliceChanged(key)
	}
	if !ok {
		return fmt.Errorf("resource: %T is not a %s", obj, k)
	}
	return nil
}

// Delete removes the object of kind k under key, if any.
func (e *Editor) Delete(k Kind, key Key) error {
	if e.done {
		return errEditorDone
	}
	d := KindOf(k)
	if d == nil {
		return fmt.Errorf("resource: unknown kind %d", k)
	}
	if d.store.del(e.s, key) && k == KindEndpointSlice {
		e.sliceChanged(key)
	}
	return nil
}

// sliceChanged records that the EndpointSlice under key was set or
// deleted, with the Service its base version belonged to.
func (e *Editor) sliceChanged(key Key) {
	if _, ok := e.slices[key]; ok {
		return
	}
	old, _ := serviceOf(e.base.EndpointSlices.Value(key))
	e.slices[key] = old
}

// errEditorDone is the error of Set and Delete after Snapshot.
var errEditorDone = errors.New("resource: Editor used after Snapshot")

// Snapshot returns the new snapshot, built, with a new ID and no Changes.
// Set and Delete fail afterwards; calling Snapshot again returns the same
// snapshot.
func (e *Editor) Snapshot() *Snapshot {
	if e.done {
		return e.s
	}
	e.done = true
	s := e.s
	s.id = snapshotIDs.Add(1)
	s.freeze()
	if len(e.slices) == 0 {
		return s
	}
	// The Services whose slices changed, and their changed slices.
	added := map[Key][]*discoveryv1.EndpointSlice{}
	for k, old := range e.slices {
		if old != (Key{}) {
			if _, ok := added[old]; !ok {
				added[old] = nil
			}
		}
		if es := s.EndpointSlices.Value(k); es != nil {
			if svc, ok := serviceOf(es); ok {
				added[svc] = append(added[svc], es)
			}
		}
	}
	idx := s.slicesByService.edit()
	for svc, list := range added {
		prev, _ := idx.Get(svc)
		for _, es := range prev {
			if _, changed := e.slices[Key{Namespace: es.Namespace, Name: es.Name}]; !changed {
				list = append(list, es)
			}
		}
		if len(list) == 0 {
			idx.Delete(svc)
			continue
		}
		sortSlices(list)
		idx.Set(svc, list)
	}
	s.slicesByService = idx.Done()
	return s
}
