package translate

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/ir"
)

// InvalidBackendCluster is the cluster name that stands for a backendRef
// that could not be resolved. No cluster of that name ever exists (real
// cluster names have three "/"-separated parts), so Envoy answers the share
// of traffic routed to it with the route's cluster_not_found_response_code,
// which Portico sets to 500; tcp_proxy closes the connections given to it
// at once, and udp_proxy drops the datagrams of its sessions (tcp.go).
const InvalidBackendCluster = "portico/invalid-backend"

// versionLen is the number of hex characters of the content hash kept as
// the snapshot version.
const versionLen = 16

// validator is implemented by every generated Envoy message.
type validator interface {
	ValidateAll() error
}

// Translate turns the IR of one Gateway into Envoy resources. It checks each
// resource with its protoc-gen-validate rules, plus the rules Envoy enforces
// when it loads a configuration that those do not cover (unique domains,
// filter chain matches and names; RE2 syntax; modifiable headers), and
// returns an error naming the offending object if one fails.
//
// The result is deterministic: equal IR gives byte-identical resources (with
// proto.MarshalOptions{Deterministic: true}) and the same Version.
func Translate(gw *ir.Gateway) (*Resources, error) {
	return TranslateWith(gw, Options{})
}

// TranslateWith is Translate with options.
func TranslateWith(gw *ir.Gateway, opts Options) (*Resources, error) {
	if gw == nil {
		return nil, errors.New("translate: nil gateway")
	}
	res, _, err := translateWith(gw, &gatewayMemo{}, opts)
	return res, err
}

func translateWith(gw *ir.Gateway, memo *gatewayMemo, opts Options) (*Resources, *gatewayMemo, error) {
	if memo.src != nil && (!sameSettings(memo.src.Proxy, gw.Proxy) || !slices.Equal(memo.src.Addresses, gw.Addresses)) {
		// Every listener and cluster depends on the settings: nothing of
		// the previous translation is reused.
		memo = &gatewayMemo{buf: memo.buf}
	}
	t := &translator{gw: gw, key: gw.Key(), opts: opts, memo: memo, next: newGatewayMemo(gw)}
	t.hs.buf = memo.buf
	var err error
	if t.settings, err = newSettings(gw.Proxy); err != nil {
		return nil, nil, fmt.Errorf("translate gateway %s: %w", t.key, err)
	}
	res, err := t.translate()
	if err != nil {
		return nil, nil, fmt.Errorf("translate gateway %s: %w", t.key, err)
	}
	t.next.buf = t.hs.buf
	return res, t.next, nil
}

type translator struct {
	gw   *ir.Gateway
	key  string
	opts Options
	// settings are the Gateway's access logs, timeouts and circuit
	// breakers (settings.go).
	settings *settings
	// clusters holds the names of gw.Clusters.
	clusters map[string]bool
	// secrets holds the names of gw.Secrets.
	secrets map[string]bool

	// memo holds what the previous translation of this Gateway built;
	// next collects what this one builds (reused or new).
	memo, next *gatewayMemo
	// clustersChanged holds the cluster names added or removed since the
	// memo: routes naming them must be translated again.
	clustersChanged map[string]bool
	// clustersDiffed: clustersChanged is known already (clustersMerged).
	clustersDiffed bool
	// shared holds the routes translated by this call, so that a route
	// placed in several virtual hosts or route configs is translated once.
	shared map[*ir.Route]*routeEntry
	hs     hasher
	// parts are the scratch messages of route, reused for every route;
	// addrs the addresses of a load assignment (appendLoadAssignment).
	parts *routeParts
	addrs []string
	// clusterTemplates encode the clusters without TLS, without and with
	// HTTP/2 options (clusterenc.go), made on first use.
	clusterTemplates [2]*clusterTemplate
	// weighted is weightedClusters' result, reused.
	weighted []weighted
	// http2 is the packed upstream HTTP/2 options, made once.
	http2 *anypb.Any
	// listenerProblems are the listeners left out (Problem).
	listenerProblems []Problem
	// scopedTables memoizes scopes (scoped.go) per route config.
	scopedTables map[*ir.RouteConfig]bool
}

func (t *translator) translate() (*Resources, error) {
	var ents [numTypes][]*entry
	var err error
	if err := checkBindAddresses(t.gw.Addresses); err != nil {
		return nil, err
	}
	if ents[clusterIdx], ents[endpointIdx], err = t.clustersAndEndpoints(); err != nil {
		return nil, err
	}
	t.diffClusters()
	if ents[secretIdx], err = t.secretResources(); err != nil {
		return nil, err
	}
	if err := t.listenersAndRoutes(&ents); err != nil {
		return nil, err
	}
	var hashes [numTypes]hash
	for i := range ents {
		if len(ents[i]) > 0 && sameSlice(ents[i], t.memo.ents[i]) {
			// Reused as a whole: sorted and hashed already.
			hashes[i] = t.memo.hashes[i]
		} else {
			byName := func(a, b *entry) int { return strings.Compare(a.name, b.name) }
			if !slices.IsSortedFunc(ents[i], byName) {
				slices.SortStableFunc(ents[i], byName)
			}
			hashes[i] = t.hs.typeHash(ents[i])
		}
	}
	t.next.ents, t.next.hashes = ents, hashes
	v := gatewayVersion(&hashes, &ents)
	problems := t.collectProblems()
	if old := t.memo.res; old != nil && old.Version == v && slices.Equal(old.Problems, problems) {
		// Nothing changed: the previous Resources serve as they are.
		t.next.res = old
		return old, nil
	}
	res := &Resources{Gateway: t.key, Version: v, Problems: problems, entries: &ents, hashes: &hashes}
	prev := t.memo.res
	for i, typ := range allTypes {
		if len(ents[i]) == 0 {
			continue
		}
		if i == routeIdx {
			// Whole tables, assembled on first use (Resources.Routes):
			// those of prev when they did not change.
			res.tables = &lazyTables{}
			if prev != nil && prev.tables != nil && sameSlice(ents[i], t.memo.ents[i]) {
				res.tables = prev.tables
			}
			continue
		}
		if prev != nil && sameSlice(ents[i], t.memo.ents[i]) {
			// A type that did not change: its list as it was (immutable),
			// not a copy of thousands of clusters for a change of a route.
			res.set(typ, prev.slice(typ))
			continue
		}
		s := make([]types.Resource, len(ents[i]))
		for j, e := range ents[i] {
			s[j] = e.res
		}
		res.set(typ, s)
	}
	t.next.res = res
	return res, nil
}

// diffClusters records the cluster names added or removed since the memo.
func (t *translator) diffClusters() {
	old := t.memo.clusterNames
	if t.clustersDiffed || old == nil || sameMap(old, t.clusters) {
		return
	}
	for n := range t.clusters {
		if !old[n] {
			t.markClusterChanged(n)
		}
	}
	for n := range old {
		if !t.clusters[n] {
			t.markClusterChanged(n)
		}
	}
}

func (t *translator) markClusterChanged(name string) {
	if t.clustersChanged == nil {
		t.clustersChanged = map[string]bool{}
	}
	t.clustersChanged[name] = true
}

// touchesChanged reports whether one of names was added or removed.
func (t *translator) touchesChanged(names []string) bool {
	if len(t.clustersChanged) == 0 {
		return false
	}
	for _, n := range names {
		if t.clustersChanged[n] {
			return true
		}
	}
	return false
}

// validated runs the protoc-gen-validate rules of a resource.
func validated(m proto.Message, what string) error {
	v, ok := m.(validator)
	if !ok {
		return fmt.Errorf("%T %q has no validation", m, what)
	}
	if err := v.ValidateAll(); err != nil {
		return fmt.Errorf("%T %q is invalid: %w", m, what, err)
	}
	return nil
}

// resourceEntry validates and hashes a whole resource.
func (t *translator) resourceEntry(name string, m types.Resource) (*entry, error) {
	if err := validated(m, name); err != nil {
		return nil, err
	}
	h, err := t.hs.message(m)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", name, err)
	}
	return newEntry(name, m, h), nil
}

// toAny validates m and packs it deterministically into an Any, so that the
// bytes of the enclosing resource (and hence the version) are stable.
// protoc-gen-validate does not look inside Any, so m is validated here.
func toAny(what string, m proto.Message) (*anypb.Any, error) {
	if v, ok := m.(validator); ok {
		if err := v.ValidateAll(); err != nil {
			return nil, fmt.Errorf("%s is invalid: %w", what, err)
		}
	}
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, deterministic); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return a, nil
}

// adsConfigSource is a v3 ConfigSource delivering resources over the
// aggregated stream the proxy already has open with Portico.
func adsConfigSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
}
