package gatewayapi

import (
	"github.com/portico-dev/portico/internal/resource"
)

// recorder records what each translated object (a Gateway or a route, the
// owner) read from the snapshot, so that a change of an object it read
// re-translates it. Reads of objects that do not exist are recorded too:
// creating them is a change.
type recorder struct {
	reads map[resource.Ref][]resource.Ref            // owner → objects read
	users map[resource.Ref]map[resource.Ref]struct{} // object read → owners
}

func newRecorder() *recorder {
	return &recorder{reads: map[resource.Ref][]resource.Ref{}, users: map[resource.Ref]map[resource.Ref]struct{}{}}
}

// read records that owner read ref.
func (r *recorder) read(owner, ref resource.Ref) {
	u := r.users[ref]
	if u == nil {
		u = map[resource.Ref]struct{}{}
		r.users[ref] = u
	} else if _, ok := u[owner]; ok {
		return
	}
	u[owner] = struct{}{}
	r.reads[owner] = append(r.reads[owner], ref)
}

// forget drops what owner read, before it is translated again or when it
// is gone.
func (r *recorder) forget(owner resource.Ref) {
	for _, ref := range r.reads[owner] {
		if u := r.users[ref]; u != nil {
			delete(u, owner)
			if len(u) == 0 {
				delete(r.users, ref)
			}
		}
	}
	delete(r.reads, owner)
}

// usersOf returns the owners that read ref.
func (r *recorder) usersOf(ref resource.Ref) map[resource.Ref]struct{} { return r.users[ref] }

// read records that the object being translated read the object kind/key.
func (t *translator) read(kind resource.Kind, key resource.Key) {
	if t.rec != nil && t.owner.Kind != 0 {
		t.rec.read(t.owner, resource.Ref{Kind: kind, Key: key})
	}
}

// readGrants records a ReferenceGrant check against namespace ns: any
// grant of that namespace may decide it.
func (t *translator) readGrants(ns string) {
	t.read(resource.KindReferenceGrant, resource.Key{Namespace: ns})
}

// ownedBy makes owner the object being translated and returns the
// previous one, to restore.
func (t *translator) ownedBy(owner resource.Ref) resource.Ref {
	prev := t.owner
	t.owner = owner
	return prev
}

func gatewayRef(k resource.Key) resource.Ref { return resource.Ref{Kind: resource.KindGateway, Key: k} }
