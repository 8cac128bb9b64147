package gatewayapi

import (
	"fmt"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
)

// Filters on backendRefs (features HTTPRouteBackendRequestHeaderModification
// and HTTPRouteBackendURLRewrite; gRPC routes alike for headers).
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
// A backendRef's URLRewrite applies to the requests sent to that backend,
// instead of the rule's URLRewrite, field by field: its hostname replaces
// the rule's hostname (the entry's host_rewrite_literal; the rule's is then
// given to the other backends one by one, as Envoy would prefer a route's,
// see hostsPerBackend), its path the rule's path; what it leaves unset,
// the rule's URLRewrite still does.
// Envoy rewrites paths per route, not per weighted cluster, so a rule whose
// backends' requests get different paths becomes one route per path
// (splitByPath): each holds the backends of one path, with their weights,
// and matches a share of the rule's requests (ir.Match.Fraction, Envoy's
// runtime_fraction, cumulative over the routes of the rule because Envoy
// draws one random number per request for the whole table). The shares are
// the weight sums of the groups, to a millionth; the last route of a rule
// takes what the others leave, so a rounding never loses requests.
//
// Other filter types on a backendRef (RequestMirror, CORS, ExtensionRef,
// redirects, unknown types) are not applied per backend, and are never
// skipped either: the backend counts as invalid, its share of requests is
// answered with 500, and ResolvedRefs=False (UnsupportedValue) names the
// filter, as for every filter Portico cannot apply. A header modifier that
// would change Host on a backend is refused the same way (the backend's
// URLRewrite hostname is the way to do that).

// backendFilters compiles the filters of backendRef k; prefixOnly says
// whether every match of the rule is a PathPrefix (ReplacePrefixMatch
// needs it). It returns nil filters and an empty problem for none, and a
// problem (the ResolvedRefs message) when the backend cannot be served as
// written.
func backendFilters(k int, filters []filterFields, prefixOnly bool) (*ir.BackendFilters, string) {
	if len(filters) == 0 {
		return nil, ""
	}
	h := &ir.BackendFilters{}
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
		case string(gwv1.HTTPRouteFilterURLRewrite):
			if h.URLRewrite != nil {
				return nil, fmt.Sprintf("backendRefs[%d]: more than one URLRewrite filter; requests for this backend are answered with 500", k)
			}
			rw, err := urlRewrite(f.urlRewrite, prefixOnly)
			if err != nil {
				return nil, fmt.Sprintf("backendRefs[%d]: %s; requests for this backend are answered with 500", k, err.msg)
			}
			h.URLRewrite = rw
			continue
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
			return nil, fmt.Sprintf("backendRefs[%d]: %s: a backendRef cannot set Host with a header modifier (use its URLRewrite hostname); requests for this backend are answered with 500", k, f.typ)
		}
		*dst = m
	}
	return h, ""
}

// fractionScale is the denominator of ir.Match.Fraction: a million.
const fractionScale = 1_000_000

// splitByPath divides fwd, whose URLRewrite is the rule's, by the path each
// backend's requests are rewritten to (the backend's own, else the rule's):
// one forward per path, in the order of the backends, with its share of
// the requests (the fraction of the cumulative weight, nil for the last).
// Each forward's URLRewrite is the rule's hostname with its path; its
// backends keep only their own hostname. A rule whose backends agree gets
// fwd back, as it is (apart from that), with no fraction.
func splitByPath(fwd *ir.Forward) ([]*ir.Forward, []*uint32) {
	var rulePath *ir.PathModifier
	var ruleHost *string
	if fwd.URLRewrite != nil {
		rulePath, ruleHost = fwd.URLRewrite.Path, fwd.URLRewrite.Hostname
	}
	own := false
	for _, b := range fwd.Backends {
		own = own || (b.Filters != nil && b.Filters.URLRewrite != nil && b.Filters.URLRewrite.Path != nil)
	}
	if !own {
		one := &struct {
			f [1]*ir.Forward
			w [1]*uint32
		}{f: [1]*ir.Forward{hostsPerBackend(fwd)}}
		return one.f[:], one.w[:]
	}
	type group struct {
		path     *ir.PathModifier
		backends []*ir.WeightedBackend
		weight   uint64
	}
	var groups []*group
	var total uint64
	for _, b := range fwd.Backends {
		path := rulePath
		if b.Filters != nil && b.Filters.URLRewrite != nil {
			if p := b.Filters.URLRewrite.Path; p != nil {
				path = p
			}
			// The path is the route's: the backend keeps its hostname.
			nb, nf := *b, *b.Filters
			nf.URLRewrite = nil
			if h := b.Filters.URLRewrite.Hostname; h != nil {
				nf.URLRewrite = &ir.URLRewrite{Hostname: h}
			}
			nb.Filters = &nf
			if nf == (ir.BackendFilters{}) {
				nb.Filters = nil
			}
			b = &nb
		}
		var g *group
		for _, x := range groups {
			if samePath(x.path, path) {
				g = x
				break
			}
		}
		if g == nil {
			g = &group{path: path}
			groups = append(groups, g)
		}
		g.backends = append(g.backends, b)
		g.weight += uint64(b.Weight)
		total += uint64(b.Weight)
	}
	fwds := make([]*ir.Forward, len(groups))
	fractions := make([]*uint32, len(groups))
	var cum uint64
	for i, g := range groups {
		f := *fwd
		f.Backends = g.backends
		f.URLRewrite = nil
		if g.path != nil || ruleHost != nil {
			f.URLRewrite = &ir.URLRewrite{Hostname: ruleHost, Path: g.path}
		}
		fwds[i] = hostsPerBackend(&f)
		cum += g.weight
		if i < len(groups)-1 {
			n := uint32(cum * fractionScale / total)
			fractions[i] = &n
		}
	}
	return fwds, fractions
}

// hostsPerBackend moves the rule's hostname rewrite of fwd to its
// backends when one of them has a hostname of its own: Envoy prefers a
// route's host_rewrite_literal to a weighted cluster's (found through
// Envoy, test/envoy TestBackendFilters), so the route then has none and
// each backend its own or the rule's.
func hostsPerBackend(fwd *ir.Forward) *ir.Forward {
	if fwd.URLRewrite == nil || fwd.URLRewrite.Hostname == nil {
		return fwd
	}
	own := false
	for _, b := range fwd.Backends {
		own = own || (b.Filters != nil && b.Filters.URLRewrite != nil && b.Filters.URLRewrite.Hostname != nil)
	}
	if !own {
		return fwd
	}
	out := *fwd
	host := fwd.URLRewrite.Hostname
	out.URLRewrite = nil
	if fwd.URLRewrite.Path != nil {
		out.URLRewrite = &ir.URLRewrite{Path: fwd.URLRewrite.Path}
	}
	out.Backends = make([]*ir.WeightedBackend, len(fwd.Backends))
	for i, b := range fwd.Backends {
		if b.Invalid || (b.Filters != nil && b.Filters.URLRewrite != nil && b.Filters.URLRewrite.Hostname != nil) {
			out.Backends[i] = b
			continue
		}
		nb := *b
		nf := ir.BackendFilters{}
		if b.Filters != nil {
			nf = *b.Filters
		}
		nf.URLRewrite = &ir.URLRewrite{Hostname: host}
		nb.Filters = &nf
		out.Backends[i] = &nb
	}
	return &out
}

func samePath(a, b *ir.PathModifier) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// httpBackendFilters are the filters of an HTTPRoute backendRef.
func httpBackendFilters(b *gwv1.HTTPBackendRef) []filterFields {
	if len(b.Filters) == 0 {
		return nil
	}
	out := make([]filterFields, len(b.Filters))
	for i := range b.Filters {
		f := &b.Filters[i]
		out[i] = filterFields{string(f.Type), f.RequestHeaderModifier, f.ResponseHeaderModifier, f.RequestMirror, f.ExtensionRef, f.URLRewrite}
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
		out[i] = filterFields{string(f.Type), f.RequestHeaderModifier, f.ResponseHeaderModifier, f.RequestMirror, f.ExtensionRef, nil}
	}
	return out
}
