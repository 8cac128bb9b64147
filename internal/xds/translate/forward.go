package translate

import (
	"fmt"
	"math"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/ir"
)

// fractionScale is the denominator of ir.Match.Fraction.
const fractionScale = 1_000_000

// statusInternalServerError answers requests that have no valid backend.
const statusInternalServerError = 500

// noTimeout is the route timeout when none is set: 0, disabled. Shared by
// routes, as messages are never modified once built.
var noTimeout = durationpb.New(0)

// weighted is one cluster of a route with its (merged) weight and the
// header filters of its backendRef (nil: none).
type weighted struct {
	name    string
	weight  uint64
	headers *ir.BackendFilters
}

// forward sets the action of out to proxy to f's backends.
//
// Backends with weight 0 are dropped, and backends naming the same cluster
// merged. A backend that is Invalid or names no cluster of the gateway gets
// InvalidBackendCluster, which does not exist, so with
// cluster_not_found_response_code INTERNAL_SERVER_ERROR its share of the
// traffic is answered with 500. With no valid backend at all, the route
// answers 500 directly.
//
// Timeouts: Timeout (Gateway API timeouts.request) is the route timeout,
// which covers the whole exchange including any retries. When unset the
// route timeout is 0, disabled, rather than Envoy's 15s default: the Gateway
// API leaves it unbounded by default, and gRPC and other streams must not be
// cut. BackendTimeout (timeouts.backendRequest) bounds each request to an
// endpoint; that is Envoy's retry_policy.per_try_timeout, which applies to
// the first try too (num_retries 0 adds no retries). max_stream_duration is
// not used as it bounds the whole downstream stream, not an upstream try.
// Retries: see retryPolicy.
func (t *translator) forward(out *routev3.Route, parts *routeParts, f *ir.Forward, match *ir.PathMatch) error {
	clusters, anyValid := t.weightedClusters(f.Backends)
	if !anyValid {
		out.Action = &routev3.Route_DirectResponse{DirectResponse: directResponse(statusInternalServerError, "")}
		return nil
	}
	ra := &parts.ra
	ra.ClusterNotFoundResponseCode = routev3.RouteAction_INTERNAL_SERVER_ERROR
	ra.Timeout = noTimeout
	if len(clusters) == 1 && clusters[0].headers == nil {
		parts.cluster.Cluster = clusters[0].name
		ra.ClusterSpecifier = &parts.cluster
	} else {
		// A backend with header filters of its own is always an entry of
		// weighted_clusters, even alone: its headers are that entry's.
		wc, err := weightedCluster(clusters)
		if err != nil {
			return err
		}
		ra.ClusterSpecifier = &routev3.RouteAction_WeightedClusters{WeightedClusters: wc}
	}
	if f.Timeout != nil {
		if *f.Timeout < 0 {
			return fmt.Errorf("negative timeout %s", *f.Timeout)
		}
		ra.Timeout = durationpb.New(*f.Timeout)
	}
	rp, hedge, err := retryPolicy(f)
	if err != nil {
		return err
	}
	ra.RetryPolicy, ra.HedgePolicy = rp, hedge
	if rw := f.URLRewrite; rw != nil {
		if rw.Hostname != nil {
			ra.HostRewriteSpecifier = &routev3.RouteAction_HostRewriteLiteral{HostRewriteLiteral: *rw.Hostname}
		}
		if rw.Path != nil {
			switch rw.Path.Type {
			case ir.FullPathReplace:
				ra.RegexRewrite = fullPathRewrite(rw.Path.Value)
			case ir.PrefixMatchReplace:
				prefix, rx, err := prefixRewrite(match, rw.Path.Value)
				if err != nil {
					return fmt.Errorf("URL rewrite: %w", err)
				}
				ra.PrefixRewrite, ra.RegexRewrite = prefix, rx
			default:
				return fmt.Errorf("unknown path modifier %q", rw.Path.Type)
			}
		}
	}
	for _, m := range f.Mirrors {
		if mp := t.mirrorPolicy(m); mp != nil {
			ra.RequestMirrorPolicies = append(ra.RequestMirrorPolicies, mp)
		}
	}
	parts.action.Route = ra
	out.Action = &parts.action
	return nil
}

// weightedClusters merges the backends into clusters with positive weight,
// in order of first appearance, and says whether any of them is valid.
func (t *translator) weightedClusters(backends []*ir.WeightedBackend) ([]weighted, bool) {
	out := t.weighted[:0] // the translator's: valid until the next call
	anyValid := false
next:
	for _, b := range backends {
		if b == nil || b.Weight == 0 {
			continue
		}
		name, headers := b.Cluster, b.Filters
		if b.Invalid || !t.clusters[name] {
			name, headers = InvalidBackendCluster, nil
		} else {
			anyValid = true
		}
		// Routes have few backends: a linear search beats a map. Backends
		// with header filters of their own are never merged.
		if headers == nil {
			for i := range out {
				if out[i].name == name && out[i].headers == nil {
					out[i].weight += uint64(b.Weight)
					continue next
				}
			}
		}
		out = append(out, weighted{name: name, weight: uint64(b.Weight), headers: headers})
	}
	t.weighted = out
	return out, anyValid
}

// weightedCluster builds the weighted_clusters of a route. Envoy rejects a
// sum of weights above MaxUint32, so larger weights are scaled down, keeping
// every share above zero. A backend's header filters are its entry's
// header mutations, applied after the route's, and its URLRewrite hostname
// the entry's host_rewrite_literal, which Envoy prefers to the route's.
func weightedCluster(cs []weighted) (*routev3.WeightedCluster, error) {
	var sum uint64
	for _, c := range cs {
		sum += c.weight
	}
	div := uint64(1)
	if sum > math.MaxUint32 {
		div = sum/(math.MaxUint32/2) + 1
	}
	out := &routev3.WeightedCluster{}
	for _, c := range cs {
		w := max(c.weight/div, 1)
		cw := &routev3.WeightedCluster_ClusterWeight{
			Name:   c.name,
			Weight: wrapperspb.UInt32(uint32(w)),
		}
		if h := c.headers; h != nil {
			var err error
			if cw.RequestHeadersToAdd, cw.RequestHeadersToRemove, err = headerMutations(h.Request); err != nil {
				return nil, fmt.Errorf("backend %s request headers: %w", c.name, err)
			}
			if cw.ResponseHeadersToAdd, cw.ResponseHeadersToRemove, err = headerMutations(h.Response); err != nil {
				return nil, fmt.Errorf("backend %s response headers: %w", c.name, err)
			}
			if rw := h.URLRewrite; rw != nil {
				if rw.Path != nil {
					// Paths are rewritten per route (ir.BackendFilters).
					return nil, fmt.Errorf("backend %s: a path rewrite of a backend must be its route's", c.name)
				}
				if rw.Hostname != nil {
					cw.HostRewriteSpecifier = &routev3.WeightedCluster_ClusterWeight_HostRewriteLiteral{HostRewriteLiteral: *rw.Hostname}
				}
			}
		}
		out.Clusters = append(out.Clusters, cw)
	}
	return out, nil
}

// mirrorPolicy mirrors Percent of requests to m's cluster, expressed in
// millionths. A mirror of a cluster the gateway does not have, or of no
// requests, is left out.
func (t *translator) mirrorPolicy(m *ir.Mirror) *routev3.RouteAction_RequestMirrorPolicy {
	if m == nil || !t.clusters[m.Cluster] || !(m.Percent > 0) {
		return nil
	}
	mp := &routev3.RouteAction_RequestMirrorPolicy{Cluster: m.Cluster}
	if m.Percent < 100 {
		n := uint32(math.Round(m.Percent * 10000))
		if n == 0 {
			return nil
		}
		mp.RuntimeFraction = &corev3.RuntimeFractionalPercent{
			DefaultValue: &typev3.FractionalPercent{Numerator: n, Denominator: typev3.FractionalPercent_MILLION},
		}
	}
	return mp
}
