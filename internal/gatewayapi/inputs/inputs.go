// Package inputs is the only way the Gateway API semantics (package
// gatewayapi) read a snapshot: a Reader returns the objects the semantics
// ask for and records, as it returns them, that its owner (the object
// being translated) read them, the way Istio's krt Fetch does. The
// snapshot sits in an unexported field, so semantic code cannot read an
// object without the read being recorded: an unrecorded read is
// impossible by construction, and incremental translation cannot be left
// stale by a forgotten hand-paired record.
//
// The owner is explicit and fixed: New returns a Reader with no owner, and
// For a Reader of the same snapshot bound to an owner, which the semantics
// hand to the code that reads on that owner's behalf. No Reader's owner
// ever changes, so who owns a read is whoever holds the Reader it is made
// with, not whatever some code set last.
//
// Design choices:
//   - Every accessor records, also when the object does not exist (creating
//     it is a change) and also when the caller then answers from a cache of
//     its own: callers call the accessor first, then consult their cache.
//   - A read made with no owner (the top-level loops over Gateways and
//     routes, before one of them is being translated) records nothing: the
//     engine follows those kinds structurally (its index of routes by
//     parent, ListenerSets by Gateway, Gateways by class).
//   - Listing a kind (GatewayKeys and the like) records nothing: only a
//     translation without a scope lists, and the engine chooses the scope
//     of the others.
//   - ReferenceGrants(ns) records the namespace: any grant of it may
//     decide a reference check (recorded as ReferenceGrant {ns, ""}).
//   - BackendTLSPolicies(svc) records the Service's namespace, as
//     ReferenceGrants does (BackendTLSPolicy {ns, ""}): a policy of that
//     namespace may come to target the Service, or stop to, or lose a
//     conflict to another one, so any change of one of them may decide
//     which policy applies.
//   - EndpointSlices(svc) records {EndpointSlice, svc}: the engine follows
//     endpoint changes by Service (its fast endpoint path), so the record
//     is for completeness, never needed to select an owner.
//   - Where the records go is the Recorder's business (package incremental's
//     dependency index); a nil Recorder records nothing (a full
//     translation).
//
// The Readers of one translation (New's and those For returns from it)
// share the snapshot, the Recorder and the ReferenceGrant index, built on
// first use by whichever Reader needs it first: they are not safe for
// concurrent use. For work on other goroutines (the semantics compile
// routes in parallel), Prepare builds the indexes, and Detached gives a
// Reader that shares nothing mutable with the others: it records into a
// Buffer of its own, which the translation's goroutine replays into the
// Recorder, in an order of its choosing.
package inputs

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/resource"
)

// Recorder receives the reads: owner read ref.
type Recorder interface {
	Read(owner, ref resource.Ref)
}

// Reader reads one snapshot for the semantics, recording every read as
// its owner's.
type Reader struct {
	snap  *resource.Snapshot
	rec   Recorder
	owner resource.Ref // the zero Ref: none, nothing is recorded
	// grants is shared by the Readers of a translation (For), and so is
	// policies.
	grants   *grantIndex
	policies *policyIndex
}

// policyIndex holds the BackendTLSPolicies by the Service they target;
// built on first use.
type policyIndex struct {
	byService map[resource.Key][]*gwv1.BackendTLSPolicy
}

// grantIndex holds the ReferenceGrants by namespace, sorted by name; built
// on first use.
type grantIndex struct {
	byNamespace map[string][]*gwv1beta1.ReferenceGrant
}

// New returns a Reader of snap (which must not be nil) with no owner,
// recording into rec (nil: not recorded).
func New(snap *resource.Snapshot, rec Recorder) *Reader {
	return &Reader{snap: snap, rec: rec, grants: &grantIndex{}, policies: &policyIndex{}}
}

// For returns a Reader of the same snapshot whose reads are owner's,
// recorded into the same Recorder; the zero Ref is no owner. r is not
// changed: the two Readers differ only by their owner.
func (r *Reader) For(owner resource.Ref) *Reader {
	o := r.WithOwner(owner)
	return &o
}

// WithOwner is For as a value, for a caller that allocates the Reader
// with state of its own.
func (r *Reader) WithOwner(owner resource.Ref) Reader {
	o := *r
	o.owner = owner
	return o
}

// Prepare builds the indexes the Readers of r's translation share, so
// that Detached Readers only read them.
func (r *Reader) Prepare() {
	r.grantIndex()
	r.policyIndex()
}

// Detached returns a Reader of the same snapshot, with no owner, for use
// on another goroutine once Prepare ran: it records into buf, or nothing
// when r records nothing (buf is then left empty).
func (r *Reader) Detached(buf *Buffer) *Reader {
	o := *r
	o.owner = resource.Ref{}
	if r.rec != nil {
		o.rec = buf
	}
	return &o
}

// Buffer is a Recorder that keeps the reads in order, for Replay.
type Buffer struct {
	reads []bufferedRead
}

type bufferedRead struct{ owner, ref resource.Ref }

// Read keeps the read.
func (b *Buffer) Read(owner, ref resource.Ref) {
	b.reads = append(b.reads, bufferedRead{owner, ref})
}

// Len is the number of reads kept so far: a mark for Replay.
func (b *Buffer) Len() int { return len(b.reads) }

// Replay records the reads kept between the marks from and to into r's
// Recorder, in the order they were made.
func (b *Buffer) Replay(r *Reader, from, to int) {
	if r.rec == nil {
		return
	}
	for _, rd := range b.reads[from:to] {
		r.rec.Read(rd.owner, rd.ref)
	}
}

// Records reports whether r records its reads (it has a Recorder and an
// owner).
func (r *Reader) Records() bool { return r.rec != nil && r.owner.Kind != 0 }

func (r *Reader) record(kind resource.Kind, key resource.Key) {
	if r.rec != nil && r.owner.Kind != 0 {
		r.rec.Read(r.owner, resource.Ref{Kind: kind, Key: key})
	}
}

// GatewayClass returns the GatewayClass name, or nil.
func (r *Reader) GatewayClass(name string) *gwv1.GatewayClass {
	r.record(resource.KindGatewayClass, resource.Key{Name: name})
	return r.snap.GatewayClasses.Value(name)
}

// Gateway returns the Gateway k, or nil.
func (r *Reader) Gateway(k resource.Key) *gwv1.Gateway {
	r.record(resource.KindGateway, k)
	return r.snap.Gateways.Value(k)
}

// ListenerSet returns the ListenerSet k, or nil.
func (r *Reader) ListenerSet(k resource.Key) *gwv1.ListenerSet {
	r.record(resource.KindListenerSet, k)
	return r.snap.ListenerSets.Value(k)
}

// Route returns the route ref (of a kind of resource.RouteKinds) with
// its shared part (resource.RouteView), or false when there is none.
func (r *Reader) Route(ref resource.Ref) (resource.Object, resource.RouteView, bool) {
	r.record(ref.Kind, ref.Key)
	obj, ok := r.snap.Get(ref.Kind, ref.Key)
	if !ok {
		return nil, resource.RouteView{}, false
	}
	d := resource.KindOf(ref.Kind)
	if d.Route == nil {
		return nil, resource.RouteView{}, false
	}
	v, ok := d.Route.View(obj)
	return obj, v, ok
}

// Service returns the Service k, or nil.
func (r *Reader) Service(k resource.Key) *corev1.Service {
	r.record(resource.KindService, k)
	return r.snap.Services.Value(k)
}

// Secret returns the Secret k, or nil.
func (r *Reader) Secret(k resource.Key) *corev1.Secret {
	r.record(resource.KindSecret, k)
	return r.snap.Secrets.Value(k)
}

// ProxyConfig returns the ProxyConfig k, or nil.
func (r *Reader) ProxyConfig(k resource.Key) *v1alpha1.ProxyConfig {
	r.record(resource.KindProxyConfig, k)
	return r.snap.ProxyConfigs.Value(k)
}

// Deployment returns the (provisioned) Deployment k, or nil.
func (r *Reader) Deployment(k resource.Key) *appsv1.Deployment {
	r.record(resource.KindDeployment, k)
	return r.snap.Deployments.Value(k)
}

// Namespace returns the Namespace name, or nil.
func (r *Reader) Namespace(name string) *corev1.Namespace {
	r.record(resource.KindNamespace, resource.Key{Name: name})
	return r.snap.Namespaces.Value(name)
}

// ReferenceGrants returns the ReferenceGrants of namespace ns, sorted by
// name; the slice must not be modified.
func (r *Reader) ReferenceGrants(ns string) []*gwv1beta1.ReferenceGrant {
	r.record(resource.KindReferenceGrant, resource.Key{Namespace: ns})
	return r.grantIndex().byNamespace[ns]
}

// grantIndex returns the ReferenceGrant index, built on first use.
func (r *Reader) grantIndex() *grantIndex {
	gi := r.grants
	if gi.byNamespace == nil {
		gi.byNamespace = map[string][]*gwv1beta1.ReferenceGrant{}
		for _, k := range resource.SortedKeys(r.snap.ReferenceGrants) {
			if g := r.snap.ReferenceGrants.Value(k); g != nil {
				gi.byNamespace[g.Namespace] = append(gi.byNamespace[g.Namespace], g)
			}
		}
	}
	return gi
}

// ConfigMap returns the ConfigMap k, or nil.
func (r *Reader) ConfigMap(k resource.Key) *corev1.ConfigMap {
	r.record(resource.KindConfigMap, k)
	return r.snap.ConfigMaps.Value(k)
}

// ClusterTrustBundle returns the ClusterTrustBundle name, or nil.
func (r *Reader) ClusterTrustBundle(name string) *certificatesv1.ClusterTrustBundle {
	r.record(resource.KindClusterTrustBundle, resource.Key{Name: name})
	return r.snap.ClusterTrustBundles.Value(name)
}

// BackendTLSPolicies returns the BackendTLSPolicies with a targetRef naming
// the Service svc (core group, kind Service, svc's name; policies target
// objects of their own namespace), whatever their sectionName, sorted by
// name; each policy is listed once. The slice must not be modified.
func (r *Reader) BackendTLSPolicies(svc resource.Key) []*gwv1.BackendTLSPolicy {
	r.record(resource.KindBackendTLSPolicy, resource.Key{Namespace: svc.Namespace})
	return r.policyIndex().byService[svc]
}

// policyIndex returns the BackendTLSPolicy index, built on first use.
func (r *Reader) policyIndex() *policyIndex {
	pi := r.policies
	if pi.byService == nil {
		pi.byService = map[resource.Key][]*gwv1.BackendTLSPolicy{}
		for _, k := range resource.SortedKeys(r.snap.BackendTLSPolicies) {
			p := r.snap.BackendTLSPolicies.Value(k)
			if p == nil {
				continue
			}
			var seen []string
			for _, t := range p.Spec.TargetRefs {
				if t.Group != "" || t.Kind != "Service" || slices.Contains(seen, string(t.Name)) {
					continue
				}
				seen = append(seen, string(t.Name))
				sk := resource.Key{Namespace: p.Namespace, Name: string(t.Name)}
				pi.byService[sk] = append(pi.byService[sk], p)
			}
		}
	}
	return pi
}

// BackendTLSPolicy returns the BackendTLSPolicy k, or nil.
func (r *Reader) BackendTLSPolicy(k resource.Key) *gwv1.BackendTLSPolicy {
	r.record(resource.KindBackendTLSPolicy, resource.Key{Namespace: k.Namespace})
	return r.snap.BackendTLSPolicies.Value(k)
}

// BackendTLSPolicyCount is the number of BackendTLSPolicies (not
// recorded, as listing is not).
func (r *Reader) BackendTLSPolicyCount() int { return r.snap.BackendTLSPolicies.Len() }

// BackendTLSPolicyKeys lists the BackendTLSPolicies, sorted.
func (r *Reader) BackendTLSPolicyKeys() []resource.Key {
	return resource.SortedKeys(r.snap.BackendTLSPolicies)
}

// EndpointSlices returns the EndpointSlices of the Service svc, sorted by
// name; the slice must not be modified.
func (r *Reader) EndpointSlices(svc resource.Key) []*discoveryv1.EndpointSlice {
	r.record(resource.KindEndpointSlice, svc)
	return r.snap.EndpointSlicesFor(svc)
}

// GatewayClassNames lists the GatewayClasses, sorted.
func (r *Reader) GatewayClassNames() []string { return resource.SortedNames(r.snap.GatewayClasses) }

// GatewayKeys lists the Gateways, sorted.
func (r *Reader) GatewayKeys() []resource.Key { return resource.SortedKeys(r.snap.Gateways) }

// ListenerSetKeys lists the ListenerSets, sorted.
func (r *Reader) ListenerSetKeys() []resource.Key { return resource.SortedKeys(r.snap.ListenerSets) }

// RouteKeys lists the routes of a kind, sorted.
func (r *Reader) RouteKeys(kind resource.Kind) []resource.Key { return r.snap.Keys(kind) }
