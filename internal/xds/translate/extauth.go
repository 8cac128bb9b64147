package translate

import (
	"fmt"
	"time"

	mutationv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/ir"
)

// Listener filters of type ExternalAuth (ir.ExtAuth): an ext_authz HTTP
// filter each, in order, before the router of the chain's connection
// manager.
//
//   - Fail closed: a check that fails (server unreachable, timeout) denies
//     with 403 (failure_mode_allow false).
//   - The headers a server adds are applied before routing, and the route
//     is chosen again after them (clear_route_cache): route matching sees
//     them. The listener is not chosen again: it is the filter chain's.
//   - Host and :authority cannot be changed by the server: a mutation rule
//     ignores such changes (the request keeps its value); the other
//     headers, :path and :method included, may change.
//   - An HTTP server's answer headers are copied into the request: those
//     AllowedResponseHeaders names, or all of them when it names none.

// extAuthTimeout bounds each check.
const extAuthTimeout = 5 * time.Second

// extAuthFilters are the ext_authz filters of a chain, in order.
func (t *translator) extAuthFilters(fc *ir.FilterChain) ([]*hcmv3.HttpFilter, error) {
	var out []*hcmv3.HttpFilter
	for i, a := range fc.ExtAuth {
		if a == nil || a.Cluster == "" {
			return nil, fmt.Errorf("listener filter %d: no authorization cluster", i)
		}
		if !t.clusters[a.Cluster] {
			return nil, fmt.Errorf("listener filter %q: cluster %q is not among the gateway's clusters", a.Name, a.Cluster)
		}
		cfg := &extauthzv3.ExtAuthz{
			TransportApiVersion: corev3.ApiVersion_V3,
			ClearRouteCache:     true,
			StatPrefix:          statName(a.Name),
			DecoderHeaderMutationRules: &mutationv3.HeaderMutationRules{
				AllowAllRouting:    wrapperspb.Bool(true),
				DisallowExpression: &matcherv3.RegexMatcher{Regex: "^(host|:authority)$"},
			},
		}
		// The listener tag (misdirected requests) is Envoy's own.
		cfg.DisallowedHeaders = exactNames([]string{ir.ListenerTagHeader})
		if len(a.AllowedRequestHeaders) > 0 {
			cfg.AllowedHeaders = exactNames(a.AllowedRequestHeaders)
		}
		if a.MaxRequestBytes > 0 {
			cfg.WithRequestBody = &extauthzv3.BufferSettings{MaxRequestBytes: a.MaxRequestBytes, AllowPartialMessage: true}
		}
		timeout := durationpb.New(extAuthTimeout)
		if a.GRPC {
			cfg.Services = &extauthzv3.ExtAuthz_GrpcService{GrpcService: &corev3.GrpcService{
				TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: a.Cluster}},
				Timeout:         timeout,
			}}
		} else {
			upstream := &matcherv3.ListStringMatcher{Patterns: []*matcherv3.StringMatcher{{
				MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: ".*"}}}}}
			if len(a.AllowedResponseHeaders) > 0 {
				upstream = exactNames(a.AllowedResponseHeaders)
			}
			cfg.Services = &extauthzv3.ExtAuthz_HttpService{HttpService: &extauthzv3.HttpService{
				ServerUri: &corev3.HttpUri{
					Uri:              "http://" + a.Cluster,
					HttpUpstreamType: &corev3.HttpUri_Cluster{Cluster: a.Cluster},
					Timeout:          timeout,
				},
				PathPrefix:            a.PathPrefix,
				AuthorizationResponse: &extauthzv3.AuthorizationResponse{AllowedUpstreamHeaders: upstream},
			}}
		}
		if err := validated(cfg, a.Name); err != nil {
			return nil, err
		}
		typed, err := toAny("ext_authz filter", cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, &hcmv3.HttpFilter{
			Name:       fmt.Sprintf("envoy.filters.http.ext_authz/%d", i),
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: typed},
		})
	}
	return out, nil
}

// exactNames matches each header name, in any letter case.
func exactNames(names []string) *matcherv3.ListStringMatcher {
	out := &matcherv3.ListStringMatcher{}
	for _, n := range names {
		out.Patterns = append(out.Patterns, &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: n}, IgnoreCase: true})
	}
	return out
}

// withExtAuth puts the chain's ext_authz filters before the others of hcm.
func (t *translator) withExtAuth(hcm *hcmv3.HttpConnectionManager, fc *ir.FilterChain) error {
	if len(fc.ExtAuth) == 0 {
		return nil
	}
	fs, err := t.extAuthFilters(fc)
	if err != nil {
		return err
	}
	hcm.HttpFilters = append(fs, hcm.HttpFilters...)
	return nil
}

// sameExtAuth reports whether two chains have equal listener filters.
func sameExtAuth(a, b []*ir.ExtAuth) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if x == nil || y == nil || x.Name != y.Name || x.GRPC != y.GRPC || x.Cluster != y.Cluster || x.PathPrefix != y.PathPrefix ||
			x.MaxRequestBytes != y.MaxRequestBytes || !equalStrings(x.AllowedRequestHeaders, y.AllowedRequestHeaders) ||
			!equalStrings(x.AllowedResponseHeaders, y.AllowedResponseHeaders) {
			return false
		}
	}
	return true
}
