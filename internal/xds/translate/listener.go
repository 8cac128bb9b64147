package translate

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/ir"
)

const (
	// perConnectionBufferLimit follows Envoy's edge-proxy best practices.
	perConnectionBufferLimit = 32 * 1024
	// transportProtocolTLS is set by the TLS inspector on TLS connections.
	transportProtocolTLS = "tls"
)

// alpnProtocols are offered to TLS clients: HTTP/2 first, then HTTP/1.1.
var alpnProtocols = []string{"h2", "http/1.1"}

// listenersAndRoutes gives one Listener per ir.Listener and one
// RouteConfiguration per distinct ir.RouteConfig of its filter chains,
// with the VHDS forms of the route configs and of their virtual hosts, or
// a table's scoped form (scoped.go), into ents.
func (t *translator) listenersAndRoutes(ents *[numTypes][]*entry) error {
	var listeners []*entry
	rb := &routeBuilder{t: t, byName: map[string]*rcEntry{}}
	var router *anypb.Any
	names := map[string]bool{}
	// A port is taken once per transport: a UDP listener may share its
	// number with a TCP-based one (DNS on 53/TCP and 53/UDP).
	type portKey struct {
		port uint32
		udp  bool
	}
	ports := map[portKey]string{}
	for _, l := range t.gw.Listeners {
		// The route configs a listener adds are served only if the
		// listener is: one left out must not leave an RDS resource that
		// nothing refers to.
		rb.begin()
		if l == nil {
			return fmt.Errorf("nil listener")
		}
		name := t.scoped(l.Name)
		if l.Name == "" || names[name] {
			return fmt.Errorf("listener name %q is empty or not unique", l.Name)
		}
		names[name] = true
		pk := portKey{l.Port, l.Protocol == ir.ProtocolUDP}
		if other, ok := ports[pk]; ok {
			return fmt.Errorf("listeners %q and %q both use port %d", other, l.Name, l.Port)
		}
		ports[pk] = l.Name
		scoped := t.scopedChains(l)
		if old := t.memo.listeners[name]; old != nil && sameListener(old.src, l) && slices.Equal(old.scoped, scoped) {
			// The route configs are translated anyway (they may have
			// changed); the listener refers to them by name only.
			if err := t.checkReused(l, rb); err != nil {
				t.listenerProblems = append(t.listenerProblems, Problem{Listener: l.Name, Err: err.Error()})
				continue
			}
			t.next.listeners[name] = &listenerEntry{src: l, scoped: scoped, entry: old.entry}
			listeners = append(listeners, old.entry)
			rb.commit()
			continue
		}
		if router == nil {
			// Shared per-translation filter config: packed once, reused.
			var err error
			if router, err = toAny("router filter", &routerv3.Router{}); err != nil {
				return err
			}
		}
		ll, err := t.listener(name, l, router, rb)
		var e *entry
		if err == nil {
			e, err = t.resourceEntry(name, ll)
		}
		if err != nil {
			// A listener Envoy would refuse is left out; the others serve.
			t.listenerProblems = append(t.listenerProblems, Problem{Listener: l.Name, Err: err.Error()})
			continue
		}
		t.next.listeners[name] = &listenerEntry{src: l, scoped: scoped, entry: e}
		listeners = append(listeners, e)
		rb.commit()
	}
	routes := make([]*entry, 0, len(rb.order))
	vhdsRoutes := make([]*entry, 0, len(rb.order))
	var vhosts, scopes, filters []*entry
	for _, e := range rb.order {
		if !rb.used[e.name] {
			continue
		}
		t.next.routeConfigs[e.name] = e
		if f := e.scope; f != nil {
			routes = append(routes, f.routes...)
			vhdsRoutes = append(vhdsRoutes, f.routes...)
			scopes = append(scopes, f.scopes...)
			filters = append(filters, f.filter)
			continue
		}
		routes = append(routes, e.entry)
		vhdsRoutes = append(vhdsRoutes, e.vhds)
		for _, v := range e.vhosts {
			vhosts = append(vhosts, v.vhds)
		}
	}
	if len(scopes) > 0 {
		// Only a scoped table's hosts can take another's name.
		if err := checkRouteNames(routes); err != nil {
			return err
		}
	}
	ents[listenerIdx], ents[routeIdx], ents[vhdsRouteIdx], ents[virtualHostIdx] = listeners, routes, vhdsRoutes, vhosts
	ents[scopedRouteIdx], ents[extensionConfigIdx] = scopes, filters
	return nil
}

// scopedChains tells for each filter chain of l whether its table is in
// scoped form.
func (t *translator) scopedChains(l *ir.Listener) []bool {
	var out []bool
	for i, fc := range l.FilterChains {
		if fc != nil && fc.RouteConfig != nil && t.scopes(fc.RouteConfig) {
			if out == nil {
				out = make([]bool, len(l.FilterChains))
			}
			out[i] = true
		}
	}
	return out
}

// checkRouteNames checks that no two route configs have one name: a
// scoped table's hosts are named after it ("<table>/<domain>").
func checkRouteNames(routes []*entry) error {
	seen := make(map[string]bool, len(routes))
	for _, e := range routes {
		if seen[e.name] {
			return fmt.Errorf("route config %q is used twice", e.name)
		}
		seen[e.name] = true
	}
	return nil
}

// checkReused translates the route configs of a listener whose translation
// is reused, and checks what its translation checked against the rest of
// the Gateway: its certificates are among the Gateway's secrets.
func (t *translator) checkReused(l *ir.Listener, rb *routeBuilder) error {
	// In the order of listener: the same route configs are built before
	// the same first failure.
	for _, fc := range l.FilterChains {
		if fc.TCP != nil {
			if err := t.checkReusedTCP(fc); err != nil {
				return err
			}
		}
		for _, a := range fc.ExtAuth {
			if a == nil || !t.clusters[a.Cluster] {
				return fmt.Errorf("filter chain %q: a listener filter's cluster is not among the gateway's clusters", fc.Name)
			}
		}
		for _, s := range fc.CertificateSecrets {
			if !t.secrets[s] {
				return fmt.Errorf("filter chain %q: certificate secret %q is not among the gateway's secrets", fc.Name, s)
			}
		}
		if fc.RouteConfig == nil {
			continue
		}
		if _, err := rb.add(fc.RouteConfig); err != nil {
			return err
		}
	}
	return t.checkReusedUDP(l)
}

func (t *translator) listener(name string, l *ir.Listener, router *anypb.Any, rb *routeBuilder) (*listenerv3.Listener, error) {
	if l.Protocol == ir.ProtocolUDP {
		return t.udpListener(name, l)
	}
	if l.UDP != nil {
		return nil, fmt.Errorf("a %s listener has no UDP route", l.Protocol)
	}
	out := &listenerv3.Listener{
		Name:                          name,
		PerConnectionBufferLimitBytes: wrapperspb.UInt32(perConnectionBufferLimit),
	}
	bindAddresses(out, t.gw.Addresses, l.Port, corev3.SocketAddress_TCP)
	statPrefix := statName(l.Name)
	switch l.Protocol {
	case ir.ProtocolHTTP:
		if len(l.FilterChains) != 1 || l.FilterChains[0] == nil || len(l.FilterChains[0].ServerNames) != 0 {
			return nil, fmt.Errorf("an HTTP listener needs exactly one filter chain without server names")
		}
		fc := l.FilterChains[0]
		if fc.RouteConfig == nil || fc.TCP != nil {
			return nil, fmt.Errorf("filter chain %q: an HTTP listener's chain routes HTTP (a route config) and forwards no connections", fc.Name)
		}
		hcm, err := t.hcmFilter(statPrefix, fc, router, rb)
		if err != nil {
			return nil, err
		}
		out.FilterChains = []*listenerv3.FilterChain{{Name: fc.Name, Filters: []*listenerv3.Filter{hcm}}}
	case ir.ProtocolHTTPS:
		chains, err := t.tlsFilterChains(statPrefix, l, router, rb)
		if err != nil {
			return nil, err
		}
		inspector, err := toAny("TLS inspector", &tlsinspectorv3.TlsInspector{})
		if err != nil {
			return nil, err
		}
		out.ListenerFilters = []*listenerv3.ListenerFilter{{
			Name:       wellknown.TLSInspector,
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: inspector},
		}}
		out.FilterChains = chains
	case ir.ProtocolTCP:
		chain, err := t.tcpListenerChain(statPrefix, l)
		if err != nil {
			return nil, err
		}
		out.FilterChains = []*listenerv3.FilterChain{chain}
	default:
		return nil, fmt.Errorf("unknown protocol %q", l.Protocol)
	}
	return out, nil
}

// tlsFilterChains gives one chain per ir.FilterChain, selected by SNI. The
// chain without server names (at most one) matches any other TLS client and
// is placed last. All chains require the TLS transport, so plain-text
// connections to an HTTPS port match nothing and are closed. A chain routes
// HTTP (terminating TLS) or forwards connections (tcp.go: TLS terminate or
// passthrough).
func (t *translator) tlsFilterChains(statPrefix string, l *ir.Listener, router *anypb.Any, rb *routeBuilder) ([]*listenerv3.FilterChain, error) {
	if len(l.FilterChains) == 0 {
		return nil, fmt.Errorf("an HTTPS listener needs at least one filter chain")
	}
	seenSNI := map[string]string{}
	seenName := map[string]bool{}
	var chains []*listenerv3.FilterChain
	var catchAll *listenerv3.FilterChain
	for _, fc := range l.FilterChains {
		if fc == nil {
			return nil, fmt.Errorf("nil filter chain")
		}
		if fc.Name != "" {
			if seenName[fc.Name] {
				return nil, fmt.Errorf("filter chain name %q is not unique", fc.Name)
			}
			seenName[fc.Name] = true
		}
		var sni []string
		for _, s := range fc.ServerNames {
			s = strings.ToLower(s)
			if s == "*" || s == "" {
				// Not SNI patterns Envoy accepts: they mean any name.
				continue
			}
			if other, ok := seenSNI[s]; ok {
				return nil, fmt.Errorf("filter chains %q and %q both match server name %q", other, fc.Name, s)
			}
			seenSNI[s] = fc.Name
			sni = append(sni, s)
		}
		chain, err := t.tlsFilterChain(statPrefix, fc, sni, router, rb)
		if err != nil {
			return nil, fmt.Errorf("filter chain %q: %w", fc.Name, err)
		}
		if len(sni) == 0 {
			if catchAll != nil {
				return nil, fmt.Errorf("filter chains %q and %q both match any server name", catchAll.Name, fc.Name)
			}
			catchAll = chain
			continue
		}
		chains = append(chains, chain)
	}
	// Envoy selects a chain by SNI, not by position; sort for stable output.
	sort.SliceStable(chains, func(i, j int) bool { return chains[i].Name < chains[j].Name })
	if catchAll != nil {
		chains = append(chains, catchAll)
	}
	return chains, nil
}

func (t *translator) tlsFilterChain(statPrefix string, fc *ir.FilterChain, sni []string, router *anypb.Any, rb *routeBuilder) (*listenerv3.FilterChain, error) {
	if err := checkChainAction(fc); err != nil {
		return nil, err
	}
	out := &listenerv3.FilterChain{
		Name: fc.Name,
		FilterChainMatch: &listenerv3.FilterChainMatch{
			ServerNames:       sni,
			TransportProtocol: transportProtocolTLS,
		},
	}
	if fc.TCP != nil {
		f, err := t.tcpProxyFilter(fc.TCP, statPrefix)
		if err != nil {
			return nil, err
		}
		out.Filters = []*listenerv3.Filter{f}
		if len(fc.CertificateSecrets) == 0 {
			// Passthrough: the TLS stream goes upstream untouched.
			return out, nil
		}
		// Terminate: the decrypted bytes are not HTTP; no ALPN.
		out.TransportSocket, err = t.downstreamTLS(fc.CertificateSecrets, nil, fc.ClientValidation)
		return out, err
	}
	if len(fc.CertificateSecrets) == 0 {
		return nil, fmt.Errorf("no certificate")
	}
	var err error
	if out.TransportSocket, err = t.downstreamTLS(fc.CertificateSecrets, alpnProtocols, fc.ClientValidation); err != nil {
		return nil, err
	}
	hcm, err := t.hcmFilter(statPrefix, fc, router, rb)
	if err != nil {
		return nil, err
	}
	out.Filters = []*listenerv3.Filter{hcm}
	return out, nil
}

// downstreamTLS is the TLS transport socket of a terminating chain, with
// the certificates by SDS and alpn offered, and the client-certificate
// check of cv (nil: none).
func (t *translator) downstreamTLS(certs []string, alpn []string, cv *ir.ClientValidation) (*corev3.TransportSocket, error) {
	var sds []*tlsv3.SdsSecretConfig
	for _, s := range certs {
		if !t.secrets[s] {
			// Envoy would wait for the secret forever, never warming the listener.
			return nil, fmt.Errorf("certificate secret %q is not among the gateway's secrets", s)
		}
		sds = append(sds, &tlsv3.SdsSecretConfig{Name: s, SdsConfig: adsConfigSource()})
	}
	dtc := &tlsv3.DownstreamTlsContext{
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsParams: &tlsv3.TlsParameters{
				TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_2,
			},
			TlsCertificateSdsSecretConfigs: sds,
			AlpnProtocols:                  alpn,
		},
	}
	if err := clientValidation(dtc, cv); err != nil {
		return nil, err
	}
	tlsCtx, err := toAny("downstream TLS context", dtc)
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{
		Name:       wellknown.TransportSocketTLS,
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: tlsCtx},
	}, nil
}

// clientValidation sets the client-certificate check of cv on dtc. The CA
// bundle is inline in the listener rather than an SDS secret: it is small,
// public, and changes rarely, and inline it cannot leave a listener warming
// on a missing secret. AllowValidOnly requires a certificate chaining to the
// bundle; AllowInsecureFallback asks for one but accepts the connection
// without a certificate or with an untrusted one (ACCEPT_UNTRUSTED), so the
// backend may decide on the forwarded identity.
func clientValidation(dtc *tlsv3.DownstreamTlsContext, cv *ir.ClientValidation) error {
	if cv == nil {
		return nil
	}
	if strings.TrimSpace(cv.CACertificates) == "" {
		return fmt.Errorf("client validation without CA certificates")
	}
	vc := &tlsv3.CertificateValidationContext{
		TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: cv.CACertificates}},
	}
	switch cv.Mode {
	case "", ir.ClientValidationAllowValidOnly:
		dtc.RequireClientCertificate = wrapperspb.Bool(true)
	case ir.ClientValidationAllowInsecureFallback:
		dtc.RequireClientCertificate = wrapperspb.Bool(false)
		vc.TrustChainVerification = tlsv3.CertificateValidationContext_ACCEPT_UNTRUSTED
	default:
		return fmt.Errorf("unknown client validation mode %q", cv.Mode)
	}
	dtc.CommonTlsContext.ValidationContextType = &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc}
	return nil
}

// hcmFilter is the HTTP connection manager of a chain, fetching its routes
// by RDS over ADS.
func (t *translator) hcmFilter(statPrefix string, fc *ir.FilterChain, router *anypb.Any, rb *routeBuilder) (*listenerv3.Filter, error) {
	rdsName, err := rb.add(fc.RouteConfig)
	if err != nil {
		return nil, err
	}
	hcm := t.newHCM(statPrefix, router)
	if err := t.withExtAuth(hcm, fc); err != nil {
		return nil, err
	}
	if err := withListenerTag(hcm, fc.ListenerTag); err != nil {
		return nil, err
	}
	if rb.byName[rdsName].scope != nil {
		scopedRoutes(hcm, rdsName)
		return hcmNetworkFilter(hcm)
	}
	hcm.RouteSpecifier = &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
		ConfigSource:    adsConfigSource(),
		RouteConfigName: rdsName,
	}}
	return hcmNetworkFilter(hcm)
}

// newHCM is an HTTP connection manager without its route specifier, with
// the Gateway's access logs and timeouts.
func (t *translator) newHCM(statPrefix string, router *anypb.Any) *hcmv3.HttpConnectionManager {
	s := t.settings
	return &hcmv3.HttpConnectionManager{
		CodecType:  hcmv3.HttpConnectionManager_AUTO,
		StatPrefix: statPrefix,
		HttpFilters: []*hcmv3.HttpFilter{corsFilter, {
			Name:       wellknown.Router,
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: proto.CloneOf(router)},
		}},
		// The proxy is the edge: the client is the connection's peer.
		UseRemoteAddress:             wrapperspb.Bool(true),
		NormalizePath:                wrapperspb.Bool(true),
		MergeSlashes:                 true,
		PathWithEscapedSlashesAction: hcmv3.HttpConnectionManager_UNESCAPE_AND_REDIRECT,
		ServerHeaderTransformation:   hcmv3.HttpConnectionManager_PASS_THROUGH,
		CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{
			IdleTimeout: s.connectionIdle,
		},
		RequestHeadersTimeout: s.requestHeaders,
		StreamIdleTimeout:     s.streamIdle,
		AccessLog:             s.accessLogs,
		Http2ProtocolOptions: &corev3.Http2ProtocolOptions{
			MaxConcurrentStreams:        wrapperspb.UInt32(100),
			InitialStreamWindowSize:     wrapperspb.UInt32(64 * 1024),
			InitialConnectionWindowSize: wrapperspb.UInt32(1024 * 1024),
		},
		UpgradeConfigs: []*hcmv3.HttpConnectionManager_UpgradeConfig{{UpgradeType: "websocket"}},
	}
}

// hcmNetworkFilter packs hcm into the network filter of a filter chain.
func hcmNetworkFilter(hcm *hcmv3.HttpConnectionManager) (*listenerv3.Filter, error) {
	a, err := toAny("HTTP connection manager", hcm)
	if err != nil {
		return nil, err
	}
	return &listenerv3.Filter{
		Name:       wellknown.HTTPConnectionManager,
		ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: a},
	}, nil
}

// scoped prefixes the name of a listener or route config with the gateway
// key, unless it already starts with it, so that names are unique across
// gateways (which helps when debugging several proxies). Names within one
// gateway stay unique either way.
func (t *translator) scoped(name string) string {
	if strings.HasPrefix(name, t.key+"/") {
		return name
	}
	return t.key + "/" + name
}

// statName makes a stat prefix of a name: Envoy stat names are dot
// separated, so anything but letters, digits, '-' and '_' becomes '_'.
func statName(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			b[i] = '_'
		}
	}
	return string(b)
}

// routeBuilder translates each distinct ir.RouteConfig once, and keeps
// which of them a served listener refers to.
type routeBuilder struct {
	t      *translator
	byName map[string]*rcEntry
	order  []*rcEntry
	// pending are the names added since begin; used, those of listeners
	// that were committed.
	pending []string
	used    map[string]bool
}

// begin starts a listener's translation.
func (rb *routeBuilder) begin() { rb.pending = rb.pending[:0] }

// commit marks the route configs added since begin as served.
func (rb *routeBuilder) commit() {
	if rb.used == nil {
		rb.used = map[string]bool{}
	}
	for _, n := range rb.pending {
		rb.used[n] = true
	}
	rb.pending = rb.pending[:0]
}

// add translates rc (unless already done) and returns its RDS name,
// the scoped name of rc.
func (rb *routeBuilder) add(rc *ir.RouteConfig) (string, error) {
	if rc == nil || rc.Name == "" {
		return "", fmt.Errorf("filter chain without a named route config")
	}
	name := rb.t.scoped(rc.Name)
	e, seen := rb.byName[name]
	if seen && e.src == rc {
		rb.pending = append(rb.pending, name)
		return name, nil
	}
	out, err := rb.t.routeConfiguration(name, rc)
	if err == nil {
		out, err = rb.t.withScopeForm(out, rb.t.scopes(rc))
	}
	if err != nil {
		return "", fmt.Errorf("route config %q: %w", rc.Name, err)
	}
	if seen {
		if e.hash != out.hash {
			return "", fmt.Errorf("two different route configs are named %q", rc.Name)
		}
		rb.pending = append(rb.pending, name)
		return name, nil
	}
	rb.byName[name] = out
	rb.order = append(rb.order, out)
	rb.pending = append(rb.pending, name)
	return name, nil
}
