// Package translate turns the IR of one Gateway into Envoy xDS resources
// (go-control-plane envoy v3 types). It is pure: the same IR and Options
// always give byte-identical resources and the same version. Versions are
// content hashes (see hash.go): of every resource, of every resource type
// and of the Gateway. A Translator (memo.go) re-translates only the parts
// of a Gateway's IR that changed since its previous translation.
//
// Route tables: every HTTPS filter chain gets its own RouteConfiguration
// (served by RDS), and so does a plaintext HTTP listener, with one virtual
// host per hostname. Each table is given in two forms with the same
// virtual hosts (vhds.go): whole, in Routes, for state-of-the-world
// clients; and as a table without virtual hosts that names VHDS, in
// VHDSRoutes, with its virtual hosts as VHDS resources in VirtualHosts,
// for delta clients (every Portico proxy): a change of one route then
// sends that route's virtual host only. A table of at least
// Options.ScopeAtRoutes routes over several virtual hosts is served in
// scoped form instead (scoped.go), to every client: a route config and a
// scope per virtual host, and a host-scope filter by ECDS, so that Envoy
// rebuilds one hostname's table per change, not the listener's.
//
// Forwarded connections and datagrams (tcp.go, udp.go): a TCP route
// (of a TLS or TCP route) is the tcp_proxy filter of its chain, on a TCP
// listener or, selected by SNI beside HTTPS chains on one port, on an
// HTTPS listener, terminating TLS or passing it through; a UDP listener is
// a udp_proxy listener filter, split by weight on the client's source
// port. Shares of Invalid backends fail closed: connections are closed at
// once, datagrams dropped.
//
// Proxy settings (ir.Gateway.Proxy, from the Gateway's ProxyConfig; see
// settings.go and accesslog.go), with their defaults:
//
//   - Access log: every HTTP connection manager Portico generates logs
//     each request to the proxy's standard output
//     (envoy.access_loggers.stdout), by default one JSON object per line
//     with DefaultAccessLogFields (start_time, method, path as the client
//     sent it, protocol, response_code, response_flags, bytes_received,
//     bytes_sent, duration, upstream_service_time, x_forwarded_for,
//     user_agent, request_id, authority, upstream_host,
//     upstream_cluster, route_name); or the ProxyConfig's JSON fields,
//     or its text format (Envoy's default text format when it names
//     none), or nothing when disabled. The static readiness and metrics
//     listeners of the bootstrap do not log.
//   - Timeouts of every HTTP connection manager: request headers within
//     10 s (request_headers_timeout), a stream idle for 5 min is reset
//     (stream_idle_timeout), a client connection without streams is
//     closed after 1 h (idle_timeout), and so is a forwarded TCP
//     connection without traffic (tcp_proxy's idle_timeout); 0 disables
//     one. Every cluster connects within 5 s (connect_timeout).
//   - Circuit breakers of every cluster (default priority, per proxy):
//     1024 connections, 1024 pending requests, 1024 requests, 3
//     concurrent retries.
//
// Settings apply to the whole Gateway: a Translator re-translates every
// listener and cluster of a Gateway whose settings changed.
package translate

import (
	"fmt"
	"sort"
	"sync"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
)

// Resources are the Envoy resources of one Gateway. Each slice is sorted by
// resource name.
type Resources struct {
	// Gateway is "<namespace>/<name>", matched against node.cluster.
	Gateway string
	// Version is a content hash of all resources: equal for equal content.
	Version   string
	Listeners []types.Resource // *listenerv3.Listener
	// routes are the whole route tables (see Routes): for Resources built
	// by this package, built on first use from their entries (tables).
	routes   []types.Resource
	tables   *lazyTables
	Clusters []types.Resource // *clusterv3.Cluster
	// Endpoints are *endpointv3.ClusterLoadAssignment with their
	// endpoints kept encoded, like Routes' virtual hosts.
	Endpoints []types.Resource
	Secrets   []types.Resource // *tlsv3.Secret
	// VHDSRoutes are Routes in their VHDS form: each table without its
	// virtual hosts, naming VHDS as their source (vhds.go), served as RDS
	// resources to delta clients in place of Routes.
	VHDSRoutes []types.Resource // *routev3.RouteConfiguration
	// VirtualHosts are the virtual hosts of Routes as VHDS resources,
	// named "<route config>/<domain>", in wire form like Routes.
	VirtualHosts []types.Resource // *routev3.VirtualHost
	// ScopedRoutes are the scopes of the route tables in scoped form
	// (scoped.go), HostScopeFilters their host-scope filters (ECDS).
	ScopedRoutes     []types.Resource // *routev3.ScopedRouteConfiguration
	HostScopeFilters []types.Resource // *corev3.TypedExtensionConfig
	// Problems are the routes and listeners of the IR left out because
	// Envoy would refuse them, sorted; the rest is served.
	Problems []Problem

	// entries are the resources with their hashes, per type in allTypes,
	// each sorted by name, and hashes the hash of each type; nil when the
	// Resources were not built by this package.
	entries *[numTypes][]*entry
	hashes  *[numTypes]hash
}

// lazyTables are the whole route tables of Resources built by this
// package, assembled once, when first asked for (Routes).
type lazyTables struct {
	once   sync.Once
	tables []types.Resource
}

// Routes are the route tables whole (*routev3.RouteConfiguration), the
// form state-of-the-world clients are served, with their virtual hosts
// kept encoded, as unknown fields (wire.go): they encode like the full
// configuration; Decode gives one whose fields can be read.
//
// Delta clients are served the VHDS form (VHDSRoutes, VirtualHosts),
// which holds the same virtual hosts; so the translator does not
// assemble the whole tables: each is assembled once, the first time it is
// asked for, and a table that did not change is the previous one. At
// 10,000 routes a Gateway's table is half a megabyte, copied for each
// change of a route when assembled eagerly, though no Portico proxy reads
// it. Safe for concurrent use.
func (r *Resources) Routes() []types.Resource {
	if r.tables == nil {
		return r.routes
	}
	r.tables.once.Do(func() {
		es := r.entries[routeIdx]
		s := make([]types.Resource, len(es))
		for i, e := range es {
			s[i] = e.resource()
		}
		r.tables.tables = s
	})
	return r.tables.tables
}

// SetRoutes sets the route tables of Resources assembled by hand, not
// built by this package (tests, other producers of Resources).
func (r *Resources) SetRoutes(routes []types.Resource) {
	r.routes, r.tables = routes, nil
}

// Options change how the IR is translated. The zero value is the default.
type Options struct {
	// ScopeAtRoutes is the number of routes from which a route table of
	// several virtual hosts is served in scoped form (scoped.go): 0 means
	// DefaultScopeAtRoutes, a negative value never.
	ScopeAtRoutes int
}

// VHDSRouteType is the key of VHDSRoutes for Diff, ResourceVersions and
// Has: they are RDS resources (resourcev3.RouteType) on the wire.
const VHDSRouteType = resourcev3.RouteType + "#vhds"

// Indexes of the types in allTypes.
const (
	listenerIdx = iota
	routeIdx
	clusterIdx
	endpointIdx
	secretIdx
	scopedRouteIdx
	extensionConfigIdx
	vhdsRouteIdx
	virtualHostIdx
	numTypes
)

// typeOrder are the resource types of every Gateway, in the order in which
// they are hashed into the version.
var typeOrder = []resourcev3.Type{
	resourcev3.ListenerType,
	resourcev3.RouteType,
	resourcev3.ClusterType,
	resourcev3.EndpointType,
	resourcev3.SecretType,
	resourcev3.ScopedRouteType,
	resourcev3.ExtensionConfigType,
}

// allTypes are typeOrder and the VHDS forms of the route tables, which
// are derived from Routes and so not part of the Gateway's version, nor of
// ByType and All.
var allTypes = append(typeOrder[:len(typeOrder):len(typeOrder)], VHDSRouteType, resourcev3.VirtualHostType)

func (r *Resources) set(t resourcev3.Type, s []types.Resource) {
	switch t {
	case resourcev3.ListenerType:
		r.Listeners = s
	case resourcev3.RouteType:
		r.SetRoutes(s)
	case resourcev3.ClusterType:
		r.Clusters = s
	case resourcev3.EndpointType:
		r.Endpoints = s
	case resourcev3.SecretType:
		r.Secrets = s
	case resourcev3.ScopedRouteType:
		r.ScopedRoutes = s
	case resourcev3.ExtensionConfigType:
		r.HostScopeFilters = s
	case VHDSRouteType:
		r.VHDSRoutes = s
	case resourcev3.VirtualHostType:
		r.VirtualHosts = s
	}
}

func (r *Resources) slice(t resourcev3.Type) []types.Resource {
	switch t {
	case resourcev3.ListenerType:
		return r.Listeners
	case resourcev3.RouteType:
		return r.Routes()
	case resourcev3.ClusterType:
		return r.Clusters
	case resourcev3.EndpointType:
		return r.Endpoints
	case resourcev3.SecretType:
		return r.Secrets
	case resourcev3.ScopedRouteType:
		return r.ScopedRoutes
	case resourcev3.ExtensionConfigType:
		return r.HostScopeFilters
	case VHDSRouteType:
		return r.VHDSRoutes
	case resourcev3.VirtualHostType:
		return r.VirtualHosts
	}
	return nil
}

// ByType returns the resources keyed by xDS type URL, route tables whole
// (the state-of-the-world form). Every type of typeOrder is present, even
// when it has no resources, so that a snapshot built from it clears stale
// resources of that type on the proxy.
func (r *Resources) ByType() map[resourcev3.Type][]types.Resource {
	out := make(map[resourcev3.Type][]types.Resource, len(typeOrder))
	for _, t := range typeOrder {
		s := r.slice(t)
		if s == nil {
			s = []types.Resource{}
		}
		out[t] = s
	}
	return out
}

// All returns every resource: listeners, routes (whole), clusters,
// endpoints and secrets, in that order.
func (r *Resources) All() []types.Resource {
	n := len(r.Listeners) + len(r.Routes()) + len(r.Clusters) + len(r.Endpoints) + len(r.Secrets) + len(r.ScopedRoutes) + len(r.HostScopeFilters)
	out := make([]types.Resource, 0, n)
	for _, t := range typeOrder {
		out = append(out, r.slice(t)...)
	}
	return out
}

// Snapshot builds a go-control-plane snapshot of the resources, versioned
// with r.Version, and checks that it is consistent (every RDS and EDS
// resource referenced by a listener or cluster is present,
// and no other).
//
// For Resources built by this package, the snapshot carries the version of
// every resource (its content hash) for delta xDS, so that the cache does
// not encode every resource again to find the changed ones.
func (r *Resources) Snapshot() (*cachev3.Snapshot, error) {
	snap, err := cachev3.NewSnapshot(r.Version, r.ByType())
	if err != nil {
		return nil, fmt.Errorf("snapshot of gateway %s: %w", r.Gateway, err)
	}
	if err := snap.Consistent(); err != nil {
		return nil, fmt.Errorf("snapshot of gateway %s is inconsistent: %w", r.Gateway, err)
	}
	if vm := r.VersionMap(); vm != nil {
		snap.VersionMap = vm
	}
	return snap, nil
}

// VersionMap returns the version (content hash) of every resource by type
// URL and name, or nil for Resources not built by this package.
func (r *Resources) VersionMap() map[string]map[string]string {
	if r.entries == nil {
		return nil
	}
	out := make(map[string]map[string]string, len(typeOrder))
	for _, t := range typeOrder {
		out[t] = r.ResourceVersions(t)
	}
	return out
}

// ResourceVersions returns the version (content hash) of each resource of
// type t by name, or nil for Resources not built by this package.
func (r *Resources) ResourceVersions(t resourcev3.Type) map[string]string {
	i := typeIndex(t)
	if r.entries == nil || i < 0 {
		return nil
	}
	m := make(map[string]string, len(r.entries[i]))
	for _, e := range r.entries[i] {
		m[e.name] = e.version
	}
	return m
}

// ResourceVersion returns the version (content hash) of the resource of
// type t named name, and whether r has one: false too for Resources not
// built by this package. It costs a search of the sorted resources, where
// ResourceVersions makes a map of all of them.
func (r *Resources) ResourceVersion(t resourcev3.Type, name string) (string, bool) {
	i := typeIndex(t)
	if r.entries == nil || i < 0 {
		return "", false
	}
	es := r.entries[i]
	k := sort.Search(len(es), func(j int) bool { return es[j].name >= name })
	if k < len(es) && es[k].name == name {
		return es[k].version, true
	}
	return "", false
}

// TypeVersion returns the version of the resources of type t: a content
// hash of all of them, which changes exactly when one of them changes. It
// is "" for Resources not built by this package.
func (r *Resources) TypeVersion(t resourcev3.Type) string {
	i := typeIndex(t)
	if r.hashes == nil || i < 0 {
		return ""
	}
	return r.hashes[i].String()
}

func typeIndex(t resourcev3.Type) int {
	for i, o := range allTypes {
		if o == t {
			return i
		}
	}
	return -1
}

// Diff lists how the resources of type t changed from prev to next: the
// resources of next that prev lacks or has with another version (changed),
// and the names of the resources of prev that next lacks (removed), both in
// name order. A nil prev has no resources. Resources built by this package
// are compared by their content hashes in one walk of the two sorted
// lists; for other Resources every resource of next counts as changed
// unless prev has an equal one (proto.Equal).
func Diff(prev, next *Resources, t resourcev3.Type) (changed []types.Resource, removed []string) {
	if ents, removed, ok := diffEntries(prev, next, t); ok {
		for _, e := range ents {
			changed = append(changed, e.resource())
		}
		return changed, removed
	}
	if typeIndex(t) < 0 {
		return nil, nil
	}
	old := map[string]types.Resource{}
	if prev != nil {
		for _, res := range prev.slice(t) {
			old[cachev3.GetResourceName(res)] = res
		}
	}
	for _, res := range next.slice(t) {
		name := cachev3.GetResourceName(res)
		if o, ok := old[name]; !ok || !proto.Equal(o, res) {
			changed = append(changed, res)
		}
		delete(old, name)
	}
	for name := range old {
		removed = append(removed, name)
	}
	sort.Strings(removed)
	return changed, removed
}

// DiffNames is Diff by name: the names of the changed resources and of
// the removed ones. For Resources built by this package it makes no
// resource (Diff assembles a whole route table that was not yet).
func DiffNames(prev, next *Resources, t resourcev3.Type) (changed, removed []string) {
	if ents, removed, ok := diffEntries(prev, next, t); ok {
		for _, e := range ents {
			changed = append(changed, e.name)
		}
		return changed, removed
	}
	res, removed := Diff(prev, next, t)
	for _, r := range res {
		changed = append(changed, cachev3.GetResourceName(r))
	}
	return changed, removed
}

// diffEntries is Diff for Resources built by this package (ok), by
// content hash in one walk of the two sorted lists of entries.
func diffEntries(prev, next *Resources, t resourcev3.Type) (changed []*entry, removed []string, ok bool) {
	i := typeIndex(t)
	if i < 0 || next.entries == nil || (prev != nil && prev.entries == nil) {
		return nil, nil, false
	}
	var a []*entry
	if prev != nil {
		if prev.hashes[i] == next.hashes[i] {
			return nil, nil, true
		}
		a = prev.entries[i]
	}
	b := next.entries[i]
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0 || (len(a) > 0 && a[0].name < b[0].name):
			removed = append(removed, a[0].name)
			a = a[1:]
		case len(a) == 0 || b[0].name < a[0].name:
			changed = append(changed, b[0])
			b = b[1:]
		default:
			if a[0] != b[0] && a[0].version != b[0].version {
				changed = append(changed, b[0])
			}
			a, b = a[1:], b[1:]
		}
	}
	return changed, removed, true
}

// HasVHDS reports whether r has its route tables in VHDS form too
// (VHDSRoutes, VirtualHosts): Resources built by this package do.
func (r *Resources) HasVHDS() bool { return r.entries != nil }

// Has reports whether r has a resource of type t named name.
func (r *Resources) Has(t resourcev3.Type, name string) bool {
	if i := typeIndex(t); r.entries != nil && i >= 0 {
		es := r.entries[i]
		k := sort.Search(len(es), func(j int) bool { return es[j].name >= name })
		return k < len(es) && es[k].name == name
	}
	for _, res := range r.slice(t) {
		if cachev3.GetResourceName(res) == name {
			return true
		}
	}
	return false
}
