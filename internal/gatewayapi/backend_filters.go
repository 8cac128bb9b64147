package gatewayapi

import (
	"fmt"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
)

// Filters on backendRefs (feature HTTPRouteBackendRequestHeaderModification;
// gRPC routes alike).
//
// A backendRef's RequestHeaderModifier and ResponseHeaderModifier apply
// only to the requests that backend is picked for (and to its responses),
// as well as the rule's own modifiers: in Envoy they are the per-cluster
// header mutations of the route's weighted_clusters entry for that backend,
// so the choice of the backend and its headers are one decision. The API
// orders the two levels nowhere; Envoy applies the backend's mutations
// first and the rule's after them, so where both set one header the rule's
// value is the one sent. Two backendRefs
// naming the same Service port with different filters stay two entries.
//
// Other filter types on a backendRef (URLRewrite, RequestMirror, CORS,
// ExtensionRef, redirects, unknown types) are not applied per backend, and
// are never skipped either: the backend counts as invalid, its share of
// requests is answered with 500, and ResolvedRefs=False
// (UnsupportedValue) names the filter, as for every filter Portico cannot
// apply. A header modifier that would change Host on a backend is refused
// the same way (a backend cannot rewrite the host of the request the rule
// routes).

// backendFilters compiles the filters of backendRef k. It returns nil
// headers and an empty problem for none, and a problem (the ResolvedRefs
// message) when the backend cannot be served as written.
func backendFilters(k int, filters []filterFields) (*ir.BackendHeaders, string) {
	if len(filters) == 0 {
		return nil, ""
	}
	h := &ir.BackendHeaders{}
	for _, f := range filters {
		var (
			dst     **ir.HeaderModifier
			hf      *gwv1.HTTPHeaderFilter
			request bool
		)
		switch f.typ {
		case string(gwv1.HTTPRouteFilterRequestHeaderModifier):
			dst, hf, request = &h.Request, f.requestHeaderModifier, true
		case string(gwv1.HTTPRouteFilterResponseHeaderModifier):
			dst, hf = &h.Response, f.responseHeaderModifier
		default:
			return nil, fmt.Sprintf("backendRefs[%d]: filter type %q is not supported on backendRefs; requests for this backend are answered with 500", k, f.typ)
		}
		if *dst != nil {
			return nil, fmt.Sprintf("backendRefs[%d]: more than one %s filter; requests for this backend are answered with 500", k, f.typ)
		}
		m, host, err := headerModifier(hf, f.typ, request)
		if err != nil {
			return nil, fmt.Sprintf("backendRefs[%d]: %s; requests for this backend are answered with 500", k, err.msg)
		}
		if host != nil {
			return nil, fmt.Sprintf("backendRefs[%d]: %s: a backendRef cannot rewrite Host; requests for this backend are answered with 500", k, f.typ)
		}
		*dst = m
	}
	return h, ""
}

// httpBackendFilters are the filters of an HTTPRoute backendRef.
func httpBackendFilters(b *gwv1.HTTPBackendRef) []filterFields {
	if len(b.Filters) == 0 {
		return nil
	}
	out := make([]filterFields, len(b.Filters))
	for i := range b.Filters {
		f := &b.Filters[i]
		out[i] = filterFields{string(f.Type), f.RequestHeaderModifier, f.ResponseHeaderModifier, f.RequestMirror, f.ExtensionRef}
	}
	return out
}

// grpcBackendFilters are the filters of a GRPCRoute backendRef.
func grpcBackendFilters(b *gwv1.GRPCBackendRef) []filterFields {
	if len(b.Filters) == 0 {
		return nil
	}
	out := make([]filterFields, len(b.Filters))
	for i := range b.Filters {
		f := &b.Filters[i]
		out[i] = filterFields{string(f.Type), f.RequestHeaderModifier, f.ResponseHeaderModifier, f.RequestMirror, f.ExtensionRef}
	}
	return out
}
