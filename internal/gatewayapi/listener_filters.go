package gatewayapi

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/refs"
	"github.com/portico-dev/portico/internal/resource"
)

// Listener filters (Listener.filters.requests, feature GatewayListenerFilters):
// filters that run on every request of an HTTP or HTTPS listener, in order,
// before route matching.
//
//   - ExternalAuth becomes an Envoy ext_authz filter (HTTP or gRPC, as
//     the filter's protocol says) in the HTTP connection manager of the
//     listener's filter chain, before the router, in the listed order
//     (ir.FilterChain.ExtAuth). Headers the server adds reach route
//     matching: the route is chosen again after each of them
//     (clear_route_cache). Host and :authority cannot be changed (a
//     mutation rule ignores such changes). The listener is selected by SNI
//     or by the Host header before, and never again.
//   - ExtensionRef names no extension Portico knows: the listener is
//     Accepted=False UnsupportedValue, and serves nothing.
//   - An ExternalAuth backend that cannot be resolved (no Service, port, or
//     ReferenceGrant from the listener's Gateway or ListenerSet) makes the
//     listener ResolvedRefs=False and not Programmed: it serves nothing, so
//     no request skips its authorization (fail closed).
//   - Filters on a protocol other than HTTP and HTTPS: Accepted=False
//     UnsupportedValue (the CRD refuses them too).
//   - HTTP listeners sharing a port share one filter chain, and thus one
//     list of filters: when their lists differ, those with filters are
//     Accepted=False UnsupportedValue (none is picked). HTTPS listeners
//     have a filter chain each.

// listenerFilters compiles the filters of an HTTP or HTTPS listener. It
// reports false when the listener is not accepted.
func (t *translator) listenerFilters(l *listener, f *gwv1.ListenerFilters, from objRef, owner string) bool {
	if l.protocol != gwv1.HTTPProtocolType && l.protocol != gwv1.HTTPSProtocolType {
		l.invalid = &problem{string(gwv1.ListenerReasonUnsupportedValue), fmt.Sprintf("filters are only valid on HTTP and HTTPS listeners, not %s", l.protocol)}
		l.unsupported = true
		return false
	}
	var bad []string
	for i, lf := range f.Requests {
		field := fmt.Sprintf("filters.requests[%d]", i)
		switch {
		case lf.Type == gwv1.ListenerFilterExternalAuth && lf.ExternalAuth != nil:
			a, use, p := t.extAuth(lf.ExternalAuth, from, fmt.Sprintf("%s/%s/filter/%d", owner, l.name, i))
			if p != nil {
				bad = append(bad, field+": "+p.message)
				if l.unresolved == nil || p.reason == string(gwv1.ListenerReasonRefNotPermitted) {
					l.unresolved = &problem{p.reason, ""}
				}
				continue
			}
			l.extAuth = append(l.extAuth, a)
			l.authUses = append(l.authUses, use)
		case lf.Type == gwv1.ListenerFilterExtensionRef:
			name := ""
			if lf.ExtensionRef != nil {
				name = fmt.Sprintf(" %s %s", groupKind(string(lf.ExtensionRef.Group), string(lf.ExtensionRef.Kind)), lf.ExtensionRef.Name)
			}
			l.invalid = &problem{string(gwv1.ListenerReasonUnsupportedValue), fmt.Sprintf("%s: ExtensionRef%s is not supported; Portico implements listener filters of type ExternalAuth only", field, name)}
			l.unsupported = true
			return false
		default:
			l.invalid = &problem{string(gwv1.ListenerReasonUnsupportedValue), fmt.Sprintf("%s: type %q without its field is not supported", field, lf.Type)}
			l.unsupported = true
			return false
		}
	}
	if len(bad) > 0 {
		msg := strings.Join(bad, "; ")
		if l.unresolved.message != "" {
			msg = l.unresolved.message + "; " + msg
		}
		l.unresolved.message = msg
		l.badFilters = true
		l.extAuth, l.authUses = nil, nil
	}
	return true
}

// extAuth compiles one ExternalAuth filter and resolves its backend.
func (t *translator) extAuth(f *gwv1.HTTPExternalAuthFilter, from objRef, name string) (*ir.ExtAuth, clusterUse, *problem) {
	grpc := f.ExternalAuthProtocol == gwv1.HTTPRouteExternalAuthGRPCProtocol
	if !grpc && f.ExternalAuthProtocol != gwv1.HTTPRouteExternalAuthHTTPProtocol {
		return nil, clusterUse{}, &problem{string(gwv1.ListenerReasonUnsupportedValue), fmt.Sprintf("protocol %q is not HTTP or GRPC", f.ExternalAuthProtocol)}
	}
	def, p := t.resolveAuthBackend(from, f.BackendRef)
	if p != nil {
		return nil, clusterUse{}, p
	}
	a := &ir.ExtAuth{Name: name, GRPC: grpc, Cluster: def.name}
	if grpc && f.GRPCAuthConfig != nil {
		a.AllowedRequestHeaders = headerNames(f.GRPCAuthConfig.AllowedRequestHeaders)
	}
	if !grpc && f.HTTPAuthConfig != nil {
		a.PathPrefix = f.HTTPAuthConfig.Path
		a.AllowedRequestHeaders = headerNames(f.HTTPAuthConfig.AllowedRequestHeaders)
		a.AllowedResponseHeaders = headerNames(f.HTTPAuthConfig.AllowedResponseHeaders)
	}
	if f.ForwardBody != nil && f.ForwardBody.MaxSize > 0 {
		a.MaxRequestBytes = uint32(f.ForwardBody.MaxSize)
	}
	return a, clusterUse{def: def, grpc: grpc}, nil
}

// headerNames lowercases, sorts and deduplicates header names.
func headerNames(hs []string) []string {
	if len(hs) == 0 {
		return nil
	}
	out := make([]string, 0, len(hs))
	for _, h := range hs {
		out = append(out, strings.ToLower(h))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// resolveAuthBackend resolves the backendRef of an ExternalAuth listener
// filter, from the listener's Gateway or ListenerSet: a Service port, as a
// route's backendRef.
func (t *translator) resolveAuthBackend(from objRef, ref gwv1.BackendObjectReference) (*clusterDef, *problem) {
	b := refs.BackendOf(from.namespace, ref)
	notFound := "BackendNotFound"
	if !b.IsService() {
		return nil, &problem{notFound, fmt.Sprintf("backend %s %s is not supported; only core Services are", b.ID(), groupKind(b.Group, b.Kind))}
	}
	svc := t.in.Service(resource.Key{Namespace: b.Namespace, Name: b.Name})
	if !t.allows(from, b.Object) {
		return nil, &problem{string(gwv1.ListenerReasonRefNotPermitted),
			fmt.Sprintf("no ReferenceGrant in namespace %s allows a %s of namespace %s to use Service %s", b.Namespace, from.kind, from.namespace, b.ID())}
	}
	if !b.HasPort {
		return nil, &problem{notFound, fmt.Sprintf("backend Service %s has no port; port is required for Services", b.ID())}
	}
	if def := t.clusterDef(clusterRef{b.Namespace, b.Name, b.Port, backendHTTP}); def != nil {
		return def, nil
	}
	if svc == nil {
		return nil, &problem{notFound, fmt.Sprintf("Service %s does not exist", b.ID())}
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil, &problem{notFound, fmt.Sprintf("Service %s is of type ExternalName, which is not supported", b.ID())}
	}
	for _, p := range svc.Spec.Ports {
		if p.Port != b.Port || (p.Protocol != "" && p.Protocol != corev1.ProtocolTCP) {
			continue
		}
		def := &clusterDef{name: b.ID() + "/" + strconv.Itoa(int(b.Port)), svc: resource.Key{Namespace: b.Namespace, Name: b.Name}, port: p}
		if p.AppProtocol != nil {
			switch *p.AppProtocol {
			case "kubernetes.io/h2c", "h2c", "grpc":
				def.h2 = true
			}
		}
		return t.keepClusterDef(clusterRef{b.Namespace, b.Name, b.Port, backendHTTP}, def), nil
	}
	return nil, &problem{notFound, fmt.Sprintf("Service %s has no TCP port %d", b.ID(), b.Port)}
}

// checkSharedFilters refuses the filters of HTTP listeners that share a
// port (and so a filter chain) with a listener of other filters.
func checkSharedFilters(merged []*listener) {
	byPort := map[int32][]*listener{}
	for _, l := range merged {
		if l.protocol == gwv1.HTTPProtocolType && l.accepted() {
			byPort[l.port] = append(byPort[l.port], l)
		}
	}
	for port, ls := range byPort {
		same := true
		for _, l := range ls[1:] {
			same = same && sameFilters(l, ls[0])
		}
		if same {
			continue
		}
		for _, l := range ls {
			if l.hasFilters {
				l.invalid = &problem{string(gwv1.ListenerReasonUnsupportedValue),
					fmt.Sprintf("HTTP listeners sharing port %d have different filters; Portico runs one list of listener filters per HTTP port", port)}
			}
		}
	}
}

func sameFilters(a, b *listener) bool {
	if a.hasFilters != b.hasFilters || a.badFilters != b.badFilters || len(a.extAuth) != len(b.extAuth) {
		return false
	}
	for i := range a.extAuth {
		x, y := *a.extAuth[i], *b.extAuth[i]
		x.Name, y.Name = "", ""
		if x.GRPC != y.GRPC || x.Cluster != y.Cluster || x.PathPrefix != y.PathPrefix || x.MaxRequestBytes != y.MaxRequestBytes ||
			!slices.Equal(x.AllowedRequestHeaders, y.AllowedRequestHeaders) || !slices.Equal(x.AllowedResponseHeaders, y.AllowedResponseHeaders) {
			return false
		}
	}
	return true
}

// chainAuth sets the listener filters of a filter chain serving ls (which
// have the same, checkSharedFilters), and counts their clusters.
func (b *irBuilder) chainAuth(fc *ir.FilterChain, port uint32, ls []*listener) {
	l := ls[0]
	if len(l.extAuth) == 0 {
		return
	}
	fc.ExtAuth = l.extAuth
	m := &vhostMemo{port: port, uses: l.authUses}
	b.newVhosts[vhostKey{fc.Name, "filters"}] = m
}
