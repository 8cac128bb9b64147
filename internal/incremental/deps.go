package incremental

import (
	"github.com/portico-dev/portico/internal/resource"
)

// recorder records what each translated object (a Gateway or a route, the
// owner) read from the snapshot, so that a change of an object it read
// re-translates it. Reads of objects that do not exist are recorded too:
// creating them is a change. It is the inputs.Recorder the engine gives
// the semantics: the accessors of package inputs record into it.
type recorder struct {
	reads map[resource.Ref][]resource.Ref            // owner → objects read
	users map[resource.Ref]map[resource.Ref]struct{} // object read → owners
}

func newRecorder() *recorder {
	return &recorder{reads: map[resource.Ref][]resource.Ref{}, users: map[resource.Ref]map[resource.Ref]struct{}{}}
}

// skipRecord, when set (by tests only: nil in production), drops the
// records of the kinds it returns true for, as if the accessor of that
// kind forgot to record: TestForgottenRecordIsCaught shows the
// differential test notices. Every accessor of package inputs records
// through Read, so this is the one place to drop them.
var skipRecord func(resource.Kind) bool

// Read records that owner read ref (inputs.Recorder).
func (r *recorder) Read(owner, ref resource.Ref) {
	if skipRecord != nil && skipRecord(ref.Kind) {
		return
	}
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

func gatewayRef(k resource.Key) resource.Ref { return resource.Ref{Kind: resource.KindGateway, Key: k} }
