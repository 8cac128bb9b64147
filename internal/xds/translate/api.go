// Package translate turns the IR of one Gateway into Envoy xDS resources
// (go-control-plane envoy v3 types). It is pure: the same IR always gives
// byte-identical resources and the same version.
package translate

import (
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
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
}
