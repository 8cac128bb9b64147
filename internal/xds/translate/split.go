package translate

import (
	"fmt"
	"slices"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/ir"
)

// Route tables split by hostname (Options.RouteSplit = RouteSplitHostname),
// with Envoy's scoped RDS (SRDS).
//
// The HTTP connection manager of a split listener has no route table of its
// own: for each request it builds a scope key, the value of the Host
// (:authority) header up to its first ':' (so without a port), and routes
// the request with the RouteConfiguration of the ScopedRouteConfiguration
// whose key equals it. Each virtual host of the listener's table becomes:
//
//   - a RouteConfiguration "<route config>/<hostname>" holding that virtual
//     host alone, exactly as it is in the single table (same routes, same
//     ignore_port_in_host_matching), served by RDS;
//   - a ScopedRouteConfiguration "<listener>/<hostname>" with the key
//     <hostname>, naming that RouteConfiguration, served by SRDS over ADS.
//
// The scopes are not listed in the Listener, so a hostname that comes or
// goes adds or removes a scope and a RouteConfiguration and leaves the
// Listener as it is (a changed Listener drains its connections). A change
// of one route sends the RouteConfiguration of its hostname only.
//
// Which listener is split: a plaintext HTTP listener whose virtual hosts
// (if any) each serve one exact hostname. A wildcard ("*.example.com") or catch-all
// ("*") virtual host keeps the listener on a single RouteConfiguration:
// scope keys are matched exactly, so such a virtual host could not be
// reached through a scope. HTTPS listeners keep one RouteConfiguration per
// SNI filter chain. And at most one listener per Gateway: Envoy subscribes
// to scoped routes with a wildcard subscription (and shares it among
// connection managers with the same SRDS config source), so every scoped
// connection manager of a proxy gets every scope of its Gateway; two split
// listeners would serve each other's hostnames, or conflict on a hostname
// both serve. When several listeners of a Gateway qualify, none is split.
// A listener whose virtual hosts start or stop qualifying changes between
// the two forms (its Listener changes).
//
// Trade-off: a scope key is compared byte for byte with the hostname (in
// lower case). A Host header that is not exactly one of the hostnames (in
// another letter case, or with a trailing dot) matches no scope and gets
// 404, where the single table matches domains case-insensitively. Envoy
// supports SRDS in every version Portico supports; the split is off by
// default until it has been run against a real Envoy.

// scopeKeyHeader is the header a scope key is built from: Envoy keeps the
// HTTP/1 Host header as :authority, like HTTP/2's.
const scopeKeyHeader = ":authority"

// splitListener returns the listener whose routes are split by hostname:
// with the split on, the one listener of the Gateway that qualifies (see
// above), or nil.
func (t *translator) splitListener() *ir.Listener {
	if !t.opts.splitByHost() {
		return nil
	}
	var found *ir.Listener
	for _, l := range t.gw.Listeners {
		if !splittable(l) {
			continue
		}
		if found != nil {
			return nil // several: their scopes would mix
		}
		found = l
	}
	return found
}

// splittable reports whether l is a plaintext HTTP listener whose virtual
// hosts each serve one exact hostname.
func splittable(l *ir.Listener) bool {
	if l == nil || l.Protocol != ir.ProtocolHTTP || len(l.FilterChains) != 1 {
		return false
	}
	fc := l.FilterChains[0]
	if fc == nil || len(fc.ServerNames) != 0 || fc.RouteConfig == nil {
		return false
	}
	for _, vh := range fc.RouteConfig.VirtualHosts {
		if vh == nil || vh.Hostname == "" || strings.Contains(vh.Hostname, "*") {
			return false
		}
	}
	return true
}

// scopedHCMFilter is the HTTP connection manager of the chain of a split
// listener (name is the listener's resource name): its scopes come by SRDS
// and their route configs by RDS, both over ADS.
func (t *translator) scopedHCMFilter(name, statPrefix string, fc *ir.FilterChain, router *anypb.Any, rb *routeBuilder) (*listenerv3.Filter, error) {
	if err := rb.addSplit(name, fc.RouteConfig); err != nil {
		return nil, err
	}
	hcm := t.newHCM(statPrefix, router)
	if err := t.withExtAuth(hcm, fc); err != nil {
		return nil, err
	}
	hcm.RouteSpecifier = &hcmv3.HttpConnectionManager_ScopedRoutes{ScopedRoutes: &hcmv3.ScopedRoutes{
		Name:            name,
		ScopeKeyBuilder: hostScopeKeyBuilder(),
		RdsConfigSource: adsConfigSource(),
		ConfigSpecifier: &hcmv3.ScopedRoutes_ScopedRds{ScopedRds: &hcmv3.ScopedRds{
			ScopedRdsConfigSource: adsConfigSource(),
		}},
	}}
	return hcmNetworkFilter(hcm)
}

// hostScopeKeyBuilder builds the scope key of a request from its host
// without the port: the first ':'-separated element of :authority.
func hostScopeKeyBuilder() *hcmv3.ScopedRoutes_ScopeKeyBuilder {
	return &hcmv3.ScopedRoutes_ScopeKeyBuilder{
		Fragments: []*hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder{{
			Type: &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_{
				HeaderValueExtractor: &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor{
					Name:             scopeKeyHeader,
					ElementSeparator: ":",
					ExtractType:      &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_Index{Index: 0},
				},
			},
		}},
	}
}

// splitMemo is the translation of the route config of a split listener.
type splitMemo struct {
	listener, table string                // resource names of the listener and its route config
	src             *rcEntry              // the table's virtual hosts (no entry of its own)
	hosts           map[string]*hostSplit // by virtual host name
	// order holds the virtual host names sorted by hostname; routes and
	// scopes are the resources of the hosts in that order (so sorted by
	// name).
	order          []string
	routes, scopes []*entry
}

// hostSplit is the route config and the scope of one hostname.
type hostSplit struct {
	v         *vhostEntry
	rc, scope *entry
}

// addSplit translates rc, the route config of the split listener named
// listener, into one route config and one scope per virtual host. The
// virtual hosts are translated (and reused) as for a single route config,
// with the same checks; a hostname's route config is made again only when
// its virtual host was, and its scope when it is new.
func (rb *routeBuilder) addSplit(listener string, rc *ir.RouteConfig) error {
	if rc == nil || rc.Name == "" {
		return fmt.Errorf("filter chain without a named route config")
	}
	t := rb.t
	name := t.scoped(rc.Name)
	old := t.memo.split
	if old != nil && (old.listener != listener || old.table != name) {
		old = nil
	}
	// The virtual hosts of the previous translation: of the split table,
	// or of the single table when the listener was not split.
	oldSrc := t.memo.routeConfigs[name]
	if old != nil {
		oldSrc = old.src
	}
	table, err := t.routeTable(name, rc, oldSrc, false)
	if err != nil {
		return fmt.Errorf("route config %q: %w", rc.Name, err)
	}
	if old != nil && table == old.src {
		t.next.split = old
		rb.split, rb.hostRoutes, rb.scopes = old, old.routes, old.scopes
		return nil
	}
	next := &splitMemo{listener: listener, table: name, src: table, hosts: make(map[string]*hostSplit, len(table.vhosts))}
	sameHosts := old != nil && len(old.hosts) == len(table.vhosts)
	for vhName, v := range table.vhosts {
		var prev *hostSplit
		if old != nil {
			prev = old.hosts[vhName]
		}
		switch {
		case prev != nil && prev.v == v:
			next.hosts[vhName] = prev
		case prev != nil && prev.v.domain == v.domain:
			hr, err := t.hostRouteConfig(prev.rc.name, v)
			if err != nil {
				return fmt.Errorf("route config %q: %w", prev.rc.name, err)
			}
			next.hosts[vhName] = &hostSplit{v: v, rc: hr, scope: prev.scope}
		default:
			sameHosts = false
			rcName := name + "/" + v.domain
			hr, err := t.hostRouteConfig(rcName, v)
			if err != nil {
				return fmt.Errorf("route config %q: %w", rcName, err)
			}
			sc, err := t.scope(listener+"/"+v.domain, rcName, v.domain)
			if err != nil {
				return err
			}
			next.hosts[vhName] = &hostSplit{v: v, rc: hr, scope: sc}
		}
	}
	if sameHosts {
		next.order, next.scopes = old.order, old.scopes
	} else {
		next.order = make([]string, 0, len(next.hosts))
		for k := range next.hosts {
			next.order = append(next.order, k)
		}
		slices.SortFunc(next.order, func(a, b string) int {
			return strings.Compare(next.hosts[a].v.domain, next.hosts[b].v.domain)
		})
		next.scopes = make([]*entry, len(next.order))
		for i, k := range next.order {
			next.scopes[i] = next.hosts[k].scope
		}
	}
	next.routes = make([]*entry, len(next.order))
	for i, k := range next.order {
		next.routes[i] = next.hosts[k].rc
	}
	t.next.split = next
	rb.split, rb.hostRoutes, rb.scopes = next, next.routes, next.scopes
	return nil
}

// checkSplitNames checks that no other route config has the name of the
// split table or of one of its hostnames' route configs.
func (rb *routeBuilder) checkSplitNames() error {
	s := rb.split
	if s == nil {
		return nil
	}
	for name := range rb.byName {
		if name == s.table {
			return fmt.Errorf("route config %q is used twice", name)
		}
		host, ok := strings.CutPrefix(name, s.table+"/")
		if !ok {
			continue
		}
		for _, h := range s.hosts {
			if h.v.domain == host {
				return fmt.Errorf("route config %q has the name of hostname %q's", name, host)
			}
		}
	}
	return nil
}

// hostRouteConfig is the route config named name holding the virtual host
// v alone.
func (t *translator) hostRouteConfig(name string, v *vhostEntry) (*entry, error) {
	out := &rcEntry{vhosts: map[string]*vhostEntry{v.name: v}}
	if err := t.routeConfigShell(name, out); err != nil {
		return nil, err
	}
	return out.entry, nil
}

// scope is the scope named name selecting routeConfig for the scope key
// key.
func (t *translator) scope(name, routeConfig, key string) (*entry, error) {
	sc := &routev3.ScopedRouteConfiguration{
		Name:                   name,
		RouteConfigurationName: routeConfig,
		Key: &routev3.ScopedRouteConfiguration_Key{
			Fragments: []*routev3.ScopedRouteConfiguration_Key_Fragment{{
				Type: &routev3.ScopedRouteConfiguration_Key_Fragment_StringKey{StringKey: key},
			}},
		},
	}
	return t.resourceEntry(name, sc)
}
