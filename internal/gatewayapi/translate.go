// Package gatewayapi implements the semantics of the Gateway API (v1.7.0):
// from a snapshot of Gateway API and core objects it computes the status of
// every object Portico is responsible for and the data-plane-neutral IR of
// every accepted Gateway.
//
// Translate is pure and deterministic: it reads only its arguments, iterates
// maps in sorted key order, and never panics on malformed input; objects are
// never modified.
//
// Reading the snapshot: the semantics read it only through package inputs
// (the translator's in), whose accessors record, as they return an object,
// that the reader's owner read it: the code translating a GatewayClass,
// Gateway or route runs on a translator whose reader is bound to that
// object (readingFor). The translator holds no snapshot, so an unrecorded
// read is impossible, and incremental translation cannot be left stale by
// a read nobody recorded. The semantic files (every file but the engine's)
// never see a *resource.Snapshot: TestSemanticsReadOnlyThroughInputs
// checks it. The incremental engine (package incremental) calls the
// semantics through partial.go and reads the raw snapshot only for what it
// tracks structurally (routes by parent, ListenerSets by Gateway, Gateways
// by class, Services by Gateway, EndpointSlices); the semantics know
// nothing of it, nor of modes of translation.
//
// One translation runs on one goroutine, but for two stages a large
// translation spreads over the CPUs, with the serial result: compiling the
// routes the cache does not hold, reads recorded alike
// (compile_ahead.go), and assembling the IR of each Gateway
// (build_parallel.go).
//
// Implementation choices where the specification leaves room:
//   - A listener whose certificates cannot be used (missing, malformed,
//     unsupported kind, or not permitted by a ReferenceGrant) stays Accepted:
//     these are reference problems, reported by ResolvedRefs=False
//     (InvalidCertificateRef or RefNotPermitted), and Programmed=False
//     (Invalid); it produces no configuration. A Gateway or ListenerSet none
//     of whose listeners can be served is not Accepted (ListenersNotValid),
//     as the conformance test ListenerSetReferenceGrant expects.
//   - Conflicted listeners are Accepted=False and Programmed=False with the
//     conflict reason (HostnameConflict, ProtocolConflict), as the
//     conformance suite expects.
//   - Routes attach to a listener whatever its own status (AttachedRoutes
//     counts them) and are Accepted even when their Gateway is not (the
//     message says so), but produce configuration only on programmed
//     listeners of accepted Gateways.
//   - Invalid rules of a route are dropped: the route stays Accepted with
//     PartiallyInvalid=True ("Dropped Rule ...") when at least one rule is
//     valid, and is not Accepted (UnsupportedValue or IncompatibleFilters)
//     when none is.
//   - A filter Portico cannot apply (ExtensionRef, ExternalAuth, a filter
//     type it does not know, filters on backendRefs other than header
//     modifiers and URLRewrite) is never skipped: the specification
//     requires it for unresolvable ExtensionRefs and skipping an
//     authentication filter would let requests through unchecked. Requests of its rule (of its backend, for
//     backendRef filters) are answered with 500, the rule is not dropped,
//     and ResolvedRefs=False (InvalidKind; UnsupportedValue for backendRef
//     filters) names the filter. For filter types unknown to the API the
//     specification asks for Accepted=False/UnsupportedValue instead; Portico
//     keeps the route Accepted so that requests of the rule cannot reach
//     another, less specific route.
//   - Virtual hosts: see vhosts.go (listener isolation, hostname fallback,
//     precedence by the route's own hostname).
//   - Conflicts pick no winner within one object (the Gateway or one
//     ListenerSet); precedence (Gateway, then ListenerSets by creation time
//     and name) orders distinct objects only (detectConflicts).
//   - Misdirected requests (HTTP/2 connection coalescing across the SNI
//     chains of an HTTPS port): each chain's route table answers 421 for
//     the hostnames other listeners of the port own, no filter compares
//     :authority with the SNI; see misdirected.go.
//   - Listener filters: ExternalAuth as Envoy ext_authz in the chain's
//     connection manager, ExtensionRef refused; see listener_filters.go.
//   - Whatever Envoy would refuse is refused here first, per rule, with
//     the condition the spec names, so that the xDS stage never has to
//     leave anything out (FuzzChain and FuzzTranslate check it): header
//     names, values (UTF-8, no control characters, at most 16 KiB), the
//     RE2 program size of regular expressions (internal/re2), mirror with
//     redirect (IncompatibleFilters). Host in a header modifier: set or add
//     on a request is a host rewrite (":authority" for gRPC), which is what
//     users mean by it; remove, or Host on a response, is UnsupportedValue
//     (filters.go headerModifier). What the xDS stage still leaves out is
//     told back to status (served.go).
//   - Budgets on what one route, and one Gateway's routes, expand into:
//     see budget.go.
//   - RegularExpression path matches (RE2 syntax) rank after Exact and before
//     PathPrefix matches, longer expressions first.
//   - A parentRef that does not resolve to a Gateway or ListenerSet of one of
//     our GatewayClasses gets no entry in the route's status.
package gatewayapi

import (
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/portico-dev/portico/internal/gatewayapi/inputs"
	"github.com/portico-dev/portico/internal/resource"
)

// translator is one translation seen by one owner: it reads the snapshot
// through in, whose reads are that owner's, and holds the state of the
// translation behind a pointer, shared by all the translators of the
// translation. The translator newTranslator returns reads with no owner;
// readingFor returns the one that reads for an owner, which the code that
// reads on that owner's behalf runs on. So in is never changed, and who
// owns a read is fixed by the translator it is made on.
type translator struct {
	// in is the only way to the snapshot: it records that its owner read
	// what it returns (package inputs).
	in *inputs.Reader
	*translation
}

// translation holds the state of one translation.
type translation struct {
	opts Options
	// scope restricts the translation to some objects; nil: all of them.
	scope *Scope
	// cache holds what earlier translations computed (partial.go).
	cache Cache

	nsLabels map[string]labels.Set
	secrets  map[string]secretEntry
	// mu guards clusterByRef and policyEvals, which routes compiled on
	// other goroutines share (compileAhead).
	mu sync.Mutex
	// clusterByRef holds the clusters resolved so far, by namespace, name
	// and port.
	clusterByRef map[clusterRef]*clusterDef
	// policyEvals holds the BackendTLSPolicies evaluated so far
	// (backendtls.go).
	policyEvals map[resource.Key]*policyEval

	classes  map[string]*classState
	gateways map[resource.Key]*gatewayState
	gwOrder  []*gatewayState
	sets     []*listenerSetState
	setByKey map[resource.Key]*listenerSetState
	routes   []*routeState

	statuses []Status

	// reattached, set by Reattach only, holds for each listener whose
	// attachments changed the effective hostnames of the changed ones;
	// the other virtual hosts are built from the same attachments as last
	// time (see clean).
	reattached map[*listener][]string
	// gatewayReaders are the translators reading for each Gateway
	// (readingForGateway).
	gatewayReaders map[resource.Key]*translator
}

// readingFor returns the translator of t's translation whose reads are
// owner's (the zero Ref: no owner's): the one to translate owner on, or to
// read on its behalf (a Gateway's listeners' allowedRoutes when a route
// attaches to them).
func (t *translator) readingFor(owner resource.Ref) *translator {
	o := &ownedTranslator{reader: t.in.WithOwner(owner)}
	o.translator = translator{in: &o.reader, translation: t.translation}
	return &o.translator
}

// ownedTranslator is a translator and its Reader, allocated together.
type ownedTranslator struct {
	translator
	reader inputs.Reader
}

// readingForGateway is readingFor(the Gateway key), made once per
// translation: the routes attaching to a Gateway read for it.
func (t *translator) readingForGateway(key resource.Key) *translator {
	if gt := t.gatewayReaders[key]; gt != nil {
		return gt
	}
	if t.gatewayReaders == nil {
		t.gatewayReaders = map[resource.Key]*translator{}
	}
	gt := t.readingFor(gatewayRef(key))
	t.gatewayReaders[key] = gt
	return gt
}

// Translate computes statuses and IR from a snapshot. A nil snapshot gives
// an empty result.
func Translate(snap *resource.Snapshot, opts Options) *Result {
	if snap == nil {
		return &Result{}
	}
	t := newTranslator(snap, opts, nil, newOneTranslation())
	t.run()
	p := t.partial(t.buildIR(), false) // nobody continues from its states
	return WithPolicyStatuses(snap, opts, &Result{Gateways: p.Gateways, Infra: p.Infra, StatusSet: NewStatusSet(p.Statuses)})
}

// newTranslator returns a translator of snap recording what it reads into
// rec (nil: nothing recorded) and reusing what cache holds.
func newTranslator(snap *resource.Snapshot, opts Options, rec inputs.Recorder, cache Cache) *translator {
	return &translator{
		in: inputs.New(snap, rec),
		translation: &translation{
			opts:         opts,
			cache:        cache,
			nsLabels:     map[string]labels.Set{},
			secrets:      map[string]secretEntry{},
			clusterByRef: map[clusterRef]*clusterDef{},
			classes:      map[string]*classState{},
			gateways:     map[resource.Key]*gatewayState{},
		},
	}
}

// run translates the snapshot (or the scope) up to the IR.
func (t *translator) run() {
	t.processClasses()
	t.processGateways()
	t.processListenerSets()
	t.finishListeners()
	t.processRoutes()
	t.routeStatuses()
	t.gatewayStatuses()
}

func sortStatuses(s []Status) {
	slices.SortStableFunc(s, func(a, b Status) int { return compareStatuses(&a, &b) })
}

// olderFirst orders objects by creationTimestamp, then namespace/name: the
// tie-breaking order the specification uses everywhere.
func olderFirst(ta, tb metav1.Time, nsa, na, nsb, nb string) bool {
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	if nsa != nsb {
		return nsa < nsb
	}
	return na < nb
}
