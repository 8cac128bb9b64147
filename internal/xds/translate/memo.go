package translate

import (
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/portico-dev/portico/internal/ir"
)

// Translator translates the IR of Gateways like Translate, remembering for
// each Gateway what it built so that the next translation of that Gateway
// re-translates only the parts of the IR that changed:
//
//   - the same *ir.Gateway as last time gives the same *Resources;
//   - a route config, virtual host or route is reused when it is the same
//     IR object as last time, or (virtual hosts) has the same name, domain
//     and route objects, unless a cluster it names appeared or
//     disappeared;
//   - the VHDS form of a virtual host is reused with the virtual host,
//     and that of a route config made again with the route config;
//   - listeners, clusters, load assignments and secrets are reused when
//     their IR has the same content;
//   - when the resulting version equals the previous one, the previous
//     *Resources is returned.
//
// The output is exactly that of TranslateWith with the Translator's
// Options. IR given to a Translator must not be modified afterwards.
// Translations of distinct Gateways may run concurrently (TranslateAll
// does); those of one Gateway may not.
type Translator struct {
	opts  Options
	mu    sync.Mutex // guards memos (TranslateAll works in parallel)
	memos map[string]*gatewayMemo
}

// NewTranslator returns a Translator with the default Options that
// remembers nothing yet.
func NewTranslator() *Translator { return NewTranslatorWith(Options{}) }

// NewTranslatorWith returns a Translator with opts that remembers nothing
// yet.
func NewTranslatorWith(opts Options) *Translator {
	return &Translator{opts: opts, memos: map[string]*gatewayMemo{}}
}

// Translate is TranslateWith with the Translator's Options, reusing what
// the previous translation of the same Gateway built. On error the memory
// of the Gateway is kept as it was.
func (x *Translator) Translate(gw *ir.Gateway) (*Resources, error) {
	if gw == nil {
		return nil, errors.New("translate: nil gateway")
	}
	key := gw.Key()
	x.mu.Lock()
	memo := x.memos[key]
	x.mu.Unlock()
	if memo == nil {
		memo = &gatewayMemo{}
	} else if memo.src == gw && memo.res != nil {
		return memo.res, nil
	}
	res, next, err := translateWith(gw, memo, x.opts)
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	x.memos[key] = next
	x.mu.Unlock()
	return res, nil
}

// TranslateAll translates the Gateways like Translate, several at a time
// (up to GOMAXPROCS): their translations are independent. The results and
// errors are in the order of gws. The Gateways must be distinct.
func (x *Translator) TranslateAll(gws []*ir.Gateway) ([]*Resources, []error) {
	res := make([]*Resources, len(gws))
	errs := make([]error, len(gws))
	workers := min(runtime.GOMAXPROCS(0), len(gws))
	if workers <= 1 {
		for i, gw := range gws {
			res[i], errs[i] = x.translateSafe(gw)
		}
		return res, errs
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(gws); i = int(next.Add(1) - 1) {
				res[i], errs[i] = x.translateSafe(gws[i])
			}
		})
	}
	wg.Wait()
	return res, errs
}

// translateSafe is Translate, with a panic turned into an error.
func (x *Translator) translateSafe(gw *ir.Gateway) (res *Resources, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("translate: panic: %v", r)
		}
	}()
	return x.Translate(gw)
}

// TranslateAll translates the Gateways like Translate, several at a time.
func TranslateAll(gws []*ir.Gateway) ([]*Resources, []error) {
	return NewTranslator().TranslateAll(gws)
}

// Forget drops what the Translator remembers of the Gateways ("ns/name")
// for which keep returns false.
func (x *Translator) Forget(keep func(gateway string) bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for k := range x.memos {
		if !keep(k) {
			delete(x.memos, k)
		}
	}
}

// gatewayMemo is what one translation of a Gateway built.
type gatewayMemo struct {
	src          *ir.Gateway
	res          *Resources
	clusterNames map[string]bool
	listeners    map[string]*listenerEntry // by resource name
	routeConfigs map[string]*rcEntry       // by resource name
	clusters     clusterMemo               // by cluster name
	secrets      map[string]*secretEntry   // by secret name
	// irClusters and irEndpoints are the cluster and load assignment
	// entries in the order of src.Clusters.
	irClusters, irEndpoints []*entry
	// ents are the resources by type, sorted, and hashes their hashes.
	ents   [numTypes][]*entry
	hashes [numTypes]hash
	// buf is the hasher's buffer, kept for the next translation.
	buf []byte
}

func newGatewayMemo(gw *ir.Gateway) *gatewayMemo {
	return &gatewayMemo{
		src:          gw,
		listeners:    map[string]*listenerEntry{},
		routeConfigs: map[string]*rcEntry{},
		clusters:     clusterMemo{base: map[string]*clusterEntry{}},
		secrets:      map[string]*secretEntry{},
	}
}

// listenerEntry is a translated listener and the IR it came from.
type listenerEntry struct {
	src *ir.Listener
	// scoped tells, for each filter chain, whether its table was in
	// scoped form (scoped.go): the form is part of the Listener.
	scoped []bool
	*entry
}

// rcEntry is a translated route configuration.
type rcEntry struct {
	src *ir.RouteConfig
	*entry
	// vhds is the route config in its VHDS form (vhds.go).
	vhds   *entry
	vhosts map[string]*vhostEntry // by virtual host name
	// scope is the route config in scoped form when it is served so
	// (scoped.go), else nil.
	scope *scopeForm
}

// vhostEntry is a translated virtual host.
type vhostEntry struct {
	src    *ir.VirtualHost
	name   string
	domain string
	hash   hash
	routes []*routeEntry
	// maxBody is the longest direct response body of its routes.
	maxBody int
	// clusters are the cluster names its routes name.
	clusters []string
	// wire is the virtual host's encoding, built from its routes' (see
	// wire.go); no message of it is kept. framed is the same bytes as a
	// virtual_hosts field of a RouteConfiguration: wire is its end.
	wire, framed []byte
	// vhds is the virtual host as a VHDS resource (vhds.go), made with the
	// first route config that holds it.
	vhds *entry
	// dropped are the routes of src left out (Problem).
	dropped []Problem
}

// routeEntry is a translated route.
type routeEntry struct {
	src  *ir.Route
	hash hash
	body int // length of the direct response body
	// wire is the route's deterministic encoding (see wire.go); the
	// message itself is not kept.
	wire []byte
}

// clusterMemo maps cluster names to their translations. A translation
// that changes some clusters (new endpoints, typically) makes a new memo
// from the previous one, which must stay as it was should the translation
// fail later: the changed entries go into a small overlay on the shared
// base, folded into a new base once it holds more than overlayMax entries
// (or half the base), so that a change of k of N clusters costs O(k) and
// an amortized O(N/overlayMax), not a copy of all N.
type clusterMemo struct {
	base, over map[string]*clusterEntry
}

const overlayMax = 64

func (m clusterMemo) get(name string) *clusterEntry {
	if ce, ok := m.over[name]; ok {
		return ce
	}
	return m.base[name]
}

// with returns m with the entries of changed in place of its own; a nil
// entry removes the cluster. m is not modified.
func (m clusterMemo) with(changed map[string]*clusterEntry) clusterMemo {
	if len(changed) == 0 {
		return m
	}
	n := len(m.over) + len(changed)
	if n > overlayMax || n > len(m.base)/2 {
		base := make(map[string]*clusterEntry, len(m.base)+len(changed))
		maps.Copy(base, m.base)
		maps.Copy(base, m.over)
		maps.Copy(base, changed)
		// In the overlay a nil entry hides the base's; folded, it goes.
		maps.DeleteFunc(base, func(_ string, ce *clusterEntry) bool { return ce == nil })
		return clusterMemo{base: base}
	}
	over := make(map[string]*clusterEntry, n)
	maps.Copy(over, m.over)
	maps.Copy(over, changed)
	return clusterMemo{base: m.base, over: over}
}

// clusterEntry is a translated cluster and its load assignment.
type clusterEntry struct {
	protocol  ir.UpstreamProtocol
	tls       *ir.UpstreamTLS
	endpoints []ir.Endpoint
	cluster   *entry
	cla       *entry
}

// sameEndpoints reports whether the load assignment of ce is that of a
// cluster of protocol p with endpoints eps: the same endpoints, of the
// same socket protocol (endpointProtocol).
func (ce *clusterEntry) sameEndpoints(p ir.UpstreamProtocol, eps []ir.Endpoint) bool {
	return endpointProtocol(ce.protocol) == endpointProtocol(p) && slices.Equal(ce.endpoints, eps)
}

// sameCluster reports whether the cluster of ce is that of c: the same
// protocol and TLS (the endpoints are its load assignment's).
func (ce *clusterEntry) sameCluster(c *ir.Cluster) bool {
	return ce.protocol == c.Protocol && equalUpstreamTLS(ce.tls, c.TLS)
}

// secretEntry is a translated secret.
type secretEntry struct {
	cert, key []byte
	*entry
}

// sameRoutes reports whether a and b hold the same route objects.
func sameRoutes(a []*ir.Route, b []*routeEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i].src {
			return false
		}
	}
	return true
}

// sameListener reports whether two IR listeners translate to the same
// listener: equal names, port, protocol, filter chains (their route
// configs are referred to by name only) and TCP and UDP routes (which the
// listener holds whole).
func sameListener(a, b *ir.Listener) bool {
	if a == b {
		return true
	}
	if a.Name != b.Name || a.Port != b.Port || a.Protocol != b.Protocol || len(a.FilterChains) != len(b.FilterChains) ||
		!sameL4Route((*ir.TCPForward)(a.UDP), (*ir.TCPForward)(b.UDP)) {
		return false
	}
	for i, fa := range a.FilterChains {
		fb := b.FilterChains[i]
		if fa == fb {
			continue
		}
		if fa == nil || fb == nil || fa.Name != fb.Name || !equalStrings(fa.ServerNames, fb.ServerNames) ||
			!equalStrings(fa.CertificateSecrets, fb.CertificateSecrets) || (fa.RouteConfig == nil) != (fb.RouteConfig == nil) ||
			(fa.RouteConfig != nil && fa.RouteConfig.Name != fb.RouteConfig.Name) || !sameL4Route(fa.TCP, fb.TCP) ||
			!sameExtAuth(fa.ExtAuth, fb.ExtAuth) || fa.ListenerTag != fb.ListenerTag ||
			!sameClientValidation(fa.ClientValidation, fb.ClientValidation) {
			return false
		}
	}
	return true
}

// sameClientValidation reports whether two client-certificate checks of
// a chain are equal (the CA bundle is inline in the listener).
func sameClientValidation(a, b *ir.ClientValidation) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// sameL4Route reports whether two TCP routes (or UDP routes, which have
// the same fields) are equal.
func sameL4Route(a, b *ir.TCPForward) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Name == b.Name && slices.Equal(a.Backends, b.Backends)
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
