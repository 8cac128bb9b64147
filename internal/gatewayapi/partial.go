package gatewayapi

import (
	"slices"

	"github.com/portico-dev/portico/internal/gatewayapi/inputs"
	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/proxyspec"
	"github.com/portico-dev/portico/internal/resource"
)

// What an engine of repeated translations (package incremental) uses. The
// semantics offer three operations, and know nothing of why they are
// called:
//
//   - TranslateScope translates some Gateways with their ListenerSets and
//     the routes attached to them (or everything);
//   - Reattach translates changed routes against Gateways translated
//     before, whose listeners did not change (reattach.go);
//   - PatchEndpoints computes again the endpoints of some Services'
//     clusters in a Gateway's IR (endpoints.go).
//
// Each reads the snapshot through package inputs, recording into the
// caller's inputs.Recorder, and may reuse what earlier translations
// computed through the caller's Cache. Translate is TranslateScope of
// everything with a Cache that remembers nothing across calls.

// Scope restricts a translation to some Gateways, their ListenerSets and
// the routes attached to them, each list sorted (routes by
// CompareRouteRefs). GatewayClasses are always translated. A nil *Scope is
// the whole snapshot.
type Scope struct {
	Gateways     []resource.Key
	ListenerSets []resource.Key
	Routes       []resource.Ref
}

func (s *Scope) gatewayKeys(in *inputs.Reader) []resource.Key {
	if s == nil {
		return in.GatewayKeys()
	}
	return s.Gateways
}

func (s *Scope) setKeys(in *inputs.Reader) []resource.Key {
	if s == nil {
		return in.ListenerSetKeys()
	}
	return s.ListenerSets
}

// eachRoute calls f with each route of the scope, in order.
func (s *Scope) eachRoute(in *inputs.Reader, f func(resource.Ref)) {
	if s != nil {
		for _, r := range s.Routes {
			f(r)
		}
		return
	}
	for _, kind := range resource.RouteKinds {
		for _, k := range in.RouteKeys(kind) {
			f(resource.Ref{Kind: kind, Key: k})
		}
	}
}

// CompareRouteRefs orders routes as translations take them: by kind (in
// resource.RouteKinds order), then namespace/name.
func CompareRouteRefs(a, b resource.Ref) int {
	if a.Kind != b.Kind {
		return kindIndex(a.Kind) - kindIndex(b.Kind)
	}
	return resource.CompareKeys(a.Key, b.Key)
}

// Cache is what a translation may take from earlier ones. Every value it
// returns must have been computed from objects that did not change since:
// keeping that promise (invalidation) is the caller's.
type Cache interface {
	// CompiledRoute returns the compiled rules of route ref kept by an
	// earlier translation, or nil; KeepCompiledRoute keeps them.
	CompiledRoute(ref resource.Ref) *CompiledRoute
	KeepCompiledRoute(ref resource.Ref, c *CompiledRoute)
	// Endpoints returns the kept endpoints of cluster; KeepEndpoints keeps
	// those computed for cluster, of Service svc.
	Endpoints(cluster string) ([]ir.Endpoint, bool)
	KeepEndpoints(cluster string, svc resource.Key, e []ir.Endpoint)
	// Assembly returns what the previous IR of Gateway gw was assembled
	// from, or nil; KeepAssembly keeps the new one.
	Assembly(gw resource.Key) *Assembly
	KeepAssembly(gw resource.Key, a *Assembly)
	// EndpointsChanged returns a test of the Services whose endpoints may
	// differ from those the assemblies hold, or nil when none may.
	EndpointsChanged() func(svc resource.Key) bool
}

// CompiledRoute is what compiling a route gives: its normalized hostnames
// and compiled rules, which depend on the route and the objects it read
// only.
type CompiledRoute struct {
	rules      compiledRules
	hostnames  []string
	noHostname bool
}

// oneTranslation is the Cache of a translation alone: the endpoints of each
// cluster are computed once, nothing is kept across translations.
type oneTranslation struct {
	endpoints map[string][]ir.Endpoint
}

func newOneTranslation() *oneTranslation {
	return &oneTranslation{endpoints: map[string][]ir.Endpoint{}}
}

func (*oneTranslation) CompiledRoute(resource.Ref) *CompiledRoute      { return nil }
func (*oneTranslation) KeepCompiledRoute(resource.Ref, *CompiledRoute) {}
func (*oneTranslation) Assembly(resource.Key) *Assembly                { return nil }
func (*oneTranslation) KeepAssembly(resource.Key, *Assembly)           {}
func (*oneTranslation) EndpointsChanged() func(resource.Key) bool      { return nil }

func (c *oneTranslation) Endpoints(cluster string) ([]ir.Endpoint, bool) {
	e, ok := c.endpoints[cluster]
	return e, ok
}

func (c *oneTranslation) KeepEndpoints(cluster string, _ resource.Key, e []ir.Endpoint) {
	c.endpoints[cluster] = e
}

// Partial is the outcome of a translation of part of a snapshot: the IR
// and infrastructure of the Gateways it translated (accepted ones only,
// sorted), the statuses it computed (sorted), and its translated states.
type Partial struct {
	Gateways []*ir.Gateway
	Infra    []proxyspec.Spec
	Statuses []Status
	States   *States
}

// States are the translated states of Gateways, ListenerSets and routes,
// which Reattach continues from. They are opaque to callers.
type States struct {
	gateways map[resource.Key]*gatewayState
	sets     map[resource.Key]*listenerSetState
	routes   map[resource.Ref]*routeState
}

// NewStates returns empty States.
func NewStates() *States {
	return &States{
		gateways: map[resource.Key]*gatewayState{},
		sets:     map[resource.Key]*listenerSetState{},
		routes:   map[resource.Ref]*routeState{},
	}
}

// Replace drops the states of the given Gateways, ListenerSets and routes,
// then takes every state of next.
func (s *States) Replace(next *States, gateways, sets []resource.Key, routes []resource.Ref) {
	for _, g := range gateways {
		delete(s.gateways, g)
	}
	for _, k := range sets {
		delete(s.sets, k)
	}
	for _, r := range routes {
		delete(s.routes, r)
	}
	for k, g := range next.gateways {
		s.gateways[k] = g
	}
	for k, ls := range next.sets {
		s.sets[k] = ls
	}
	for r, rs := range next.routes {
		s.routes[r] = rs
	}
}

// Len counts the states held.
func (s *States) Len() (gateways, sets, routes int) {
	return len(s.gateways), len(s.sets), len(s.routes)
}

// ListenerSetKeys lists the ListenerSets held, sorted.
func (s *States) ListenerSetKeys() []resource.Key {
	out := make([]resource.Key, 0, len(s.sets))
	for k := range s.sets {
		out = append(out, k)
	}
	slices.SortFunc(out, resource.CompareKeys)
	return out
}

// TranslateScope translates the objects of scope (nil: all of them) of
// snap, recording what each Gateway and route reads into rec (nil: not
// recorded) and reusing what cache holds (nil: nothing).
func TranslateScope(snap *resource.Snapshot, opts Options, scope *Scope, cache Cache, rec inputs.Recorder) *Partial {
	if cache == nil {
		cache = newOneTranslation()
	}
	t := newTranslator(snap, opts, rec, cache)
	t.scope = scope
	t.run()
	return t.partial(t.buildIR(), true)
}

// partial collects the outcome of t, with its States when withStates.
func (t *translator) partial(gateways []*ir.Gateway, withStates bool) *Partial {
	p := &Partial{Gateways: gateways, Infra: t.infraSpecs(gateways)}
	sortStatuses(t.statuses)
	p.Statuses = t.statuses
	if !withStates {
		return p
	}
	p.States = NewStates()
	for k, g := range t.gateways {
		p.States.gateways[k] = g
	}
	for _, s := range t.sets {
		p.States.sets[resource.Key{Namespace: s.obj.Namespace, Name: s.obj.Name}] = s
	}
	for _, rs := range t.routes {
		p.States.routes[rs.ref()] = rs
	}
	return p
}
