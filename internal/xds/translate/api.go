// Package translate turns the IR of one Gateway into Envoy xDS resources
// (go-control-plane envoy v3 types). It is pure: the same IR always gives
// byte-identical resources and the same version. Versions are content
// hashes (see hash.go): of every resource, of every resource type and of
// the Gateway. A Translator (memo.go) re-translates only the parts of a
// Gateway's IR that changed since its previous translation.
package translate

import (
	"fmt"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// Resources are the Envoy resources of one Gateway. Each slice is sorted by
// resource name.
type Resources struct {
	// Gateway is "<namespace>/<name>", matched against node.cluster.
	Gateway string
	// Version is a content hash of all resources: equal for equal content.
	Version   string
	Listeners []types.Resource // *listenerv3.Listener
	Routes    []types.Resource // *routev3.RouteConfiguration
	Clusters  []types.Resource // *clusterv3.Cluster
	Endpoints []types.Resource // *endpointv3.ClusterLoadAssignment
	Secrets   []types.Resource // *tlsv3.Secret

	// entries are the resources with their hashes, per type in typeOrder,
	// each sorted by name, and hashes the hash of each type; nil when the
	// Resources were not built by this package.
	entries *[numTypes][]*entry
	hashes  *[numTypes]hash
}

// Indexes of the types in typeOrder.
const (
	listenerIdx = iota
	routeIdx
	clusterIdx
	endpointIdx
	secretIdx
	numTypes
)

// typeOrder is the order of resource types in All, and the order in which
// they are hashed into the version.
var typeOrder = []resourcev3.Type{
	resourcev3.ListenerType,
	resourcev3.RouteType,
	resourcev3.ClusterType,
	resourcev3.EndpointType,
	resourcev3.SecretType,
}

func (r *Resources) set(t resourcev3.Type, s []types.Resource) {
	switch t {
	case resourcev3.ListenerType:
		r.Listeners = s
	case resourcev3.RouteType:
		r.Routes = s
	case resourcev3.ClusterType:
		r.Clusters = s
	case resourcev3.EndpointType:
		r.Endpoints = s
	case resourcev3.SecretType:
		r.Secrets = s
	}
}

func (r *Resources) slice(t resourcev3.Type) []types.Resource {
	switch t {
	case resourcev3.ListenerType:
		return r.Listeners
	case resourcev3.RouteType:
		return r.Routes
	case resourcev3.ClusterType:
		return r.Clusters
	case resourcev3.EndpointType:
		return r.Endpoints
	case resourcev3.SecretType:
		return r.Secrets
	}
	return nil
}

// ByType returns the resources keyed by xDS type URL. Every type is present,
// even when it has no resources, so that a snapshot built from it clears
// stale resources of that type on the proxy.
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

// All returns every resource: listeners, routes, clusters, endpoints and
// secrets, in that order.
func (r *Resources) All() []types.Resource {
	n := len(r.Listeners) + len(r.Routes) + len(r.Clusters) + len(r.Endpoints) + len(r.Secrets)
	out := make([]types.Resource, 0, n)
	for _, t := range typeOrder {
		out = append(out, r.slice(t)...)
	}
	return out
}

// Snapshot builds a go-control-plane snapshot of the resources, versioned
// with r.Version, and checks that it is consistent (every RDS and EDS
// resource referenced by a listener or cluster is present, and no other).
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
	out := make(map[string]map[string]string, numTypes)
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
	for i, o := range typeOrder {
		if o == t {
			return i
		}
	}
	return -1
}
