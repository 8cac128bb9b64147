package gatewayapi

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/proxyspec"
	"github.com/portico-dev/portico/internal/refs"
	"github.com/portico-dev/portico/internal/resource"
)

// listener is one listener of the merged set of a Gateway: one of its own
// spec.listeners or an entry of an attached ListenerSet.
type listener struct {
	gw  *gatewayState
	set *listenerSetState // nil for the Gateway's own listeners

	name     string
	hostname string // normalized; "" matches any hostname
	port     int32
	protocol gwv1.ProtocolType
	tls      *gwv1.ListenerTLSConfig
	// passthrough: a TLS listener of mode Passthrough (no certificates;
	// connections forwarded by SNI as they are).
	passthrough bool

	routeNS nsPolicy // allowedRoutes.namespaces
	// allowed says which route kinds may attach (by kindIndex); kinds
	// are they, as supportedKinds.
	allowed [maxRouteKinds]bool
	kinds   []gwv1.RouteGroupKind

	// invalid is why the listener is not Accepted, for reasons other than
	// conflicts; unresolved is why ResolvedRefs is False.
	invalid    *problem
	unresolved *problem
	// noCerts is set when the listener is accepted but none of its
	// certificates can be used: it is not programmed.
	noCerts bool
	// unsupported is set for protocols Portico does not serve; such a
	// listener takes no part in conflict detection.
	unsupported bool
	conflict    gwv1.ListenerConditionReason // "" when not conflicted
	overlapping bool
	certs       []string // names of ir.Secrets
	// hasFilters: spec.filters lists request filters; extAuth are they,
	// compiled (listener_filters.go); badFilters is set when one's backend
	// cannot be resolved: the listener is not programmed.
	hasFilters bool
	extAuth    []*ir.ExtAuth
	authUses   []clusterUse
	badFilters bool
	// secrets are the ir.Secrets of certs, when valid.
	secrets []*ir.Secret
	// clientValidation is the Gateway's client-certificate check for the
	// listener's port (frontend_tls.go), nil for none.
	clientValidation *ir.ClientValidation

	attachments []*attachment
	routes      int32       // distinct accepted routes attached
	lastRoute   *routeState // the last route counted in routes
	// byHost indexes the live attachments by effective hostname (see
	// hostIndex); kindCount counts the attachments of each route kind
	// (by kindIndex).
	byHost    map[string][]*attachment
	kindCount [maxRouteKinds]int
}

// kindName is "Gateway" or "ListenerSet", the kind owning the listener.
func (l *listener) ownerKind() string {
	if l.set != nil {
		return resource.KindListenerSet.String()
	}
	return resource.KindGateway.String()
}

func (l *listener) ownerNS() string {
	if l.set != nil {
		return l.set.obj.Namespace
	}
	return l.gw.obj.Namespace
}

// accepted reports whether the listener is Accepted.
func (l *listener) accepted() bool { return l.invalid == nil && l.conflict == "" }

// usable reports whether the listener can produce configuration: it is
// accepted and its certificates (if any) resolved.
func (l *listener) usable() bool { return l.accepted() && !l.noCerts && !l.badFilters }

// programmed reports whether the listener produces configuration.
func (l *listener) programmed() bool { return l.usable() && l.gw.accepted }

// listenerSpec is the part shared by gwv1.Listener and gwv1.ListenerEntry.
type listenerSpec struct {
	name          string
	hostname      *gwv1.Hostname
	port          int32
	protocol      gwv1.ProtocolType
	tls           *gwv1.ListenerTLSConfig
	allowedRoutes *gwv1.AllowedRoutes
	filters       *gwv1.ListenerFilters
	// owner is "<kind>/<ns>/<name>" of the Gateway or ListenerSet.
	owner string
}

// routeKind returns a new RouteGroupKind of the Gateway API group.
func routeGroupKind(kind resource.Kind) gwv1.RouteGroupKind {
	g := gwv1.Group(gwv1.GroupName)
	return gwv1.RouteGroupKind{Group: &g, Kind: gwv1.Kind(kind.String())}
}

// newListener validates a listener spec on its own (conflicts come later).
// ownerNS is the namespace of the Gateway or ListenerSet, from is how that
// owner is named in ReferenceGrants.
func (t *translator) newListener(gw *gatewayState, set *listenerSetState, spec listenerSpec, from objRef) *listener {
	l := &listener{gw: gw, set: set, name: spec.name, port: spec.port, protocol: spec.protocol, tls: spec.tls}
	var nsFrom *gwv1.RouteNamespaces
	if spec.allowedRoutes != nil {
		nsFrom = spec.allowedRoutes.Namespaces
	}
	if nsFrom != nil {
		l.routeNS = newNSPolicy(nsFrom.From, nsFrom.Selector, gwv1.NamespacesFromSame, from.namespace)
	} else {
		l.routeNS = newNSPolicy(nil, nil, gwv1.NamespacesFromSame, from.namespace)
	}

	switch spec.protocol {
	case gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType, gwv1.TLSProtocolType, gwv1.TCPProtocolType, gwv1.UDPProtocolType:
	default:
		l.unsupported = true
		l.kinds = []gwv1.RouteGroupKind{}
		l.invalid = &problem{string(gwv1.ListenerReasonUnsupportedProtocol),
			fmt.Sprintf("protocol %q is not supported; Portico serves HTTP, HTTPS, TLS, TCP and UDP listeners", spec.protocol)}
		return l
	}
	t.listenerKinds(l, spec.allowedRoutes)
	if l.routeNS.invalid != "" {
		l.invalid = &problem{string(gwv1.ListenerReasonUnsupportedValue), "allowedRoutes." + l.routeNS.invalid + "; the listener admits no routes"}
		l.unsupported = true
		return l
	}

	if spec.port < 1 || spec.port > 65535 {
		l.invalid = &problem{string(gwv1.ListenerReasonPortUnavailable), fmt.Sprintf("port %d is out of range 1-65535", spec.port)}
		l.unsupported = true
		return l
	}
	if what := proxyPort(t.opts.Infrastructure, gw.proxy, int32(spec.port)); what != "" {
		l.invalid = &problem{string(gwv1.ListenerReasonPortUnavailable), fmt.Sprintf("port %d is the provisioned proxies' %s", spec.port, what)}
		l.unsupported = true
		return l
	}
	if spec.filters != nil && len(spec.filters.Requests) > 0 {
		l.hasFilters = true
		if !t.listenerFilters(l, spec.filters, from, spec.owner) {
			return l
		}
	}
	if l4Protocol(spec.protocol) {
		// TCP and UDP select no hostname: spec.hostname is ignored.
		return t.l4Listener(l)
	}
	if spec.hostname != nil && *spec.hostname != "" {
		h, ok := normalizeHostname(string(*spec.hostname))
		if !ok {
			l.invalid = &problem{string(gwv1.ListenerReasonUnsupportedValue), fmt.Sprintf("hostname %q is not a valid DNS name or wildcard", *spec.hostname)}
			l.unsupported = true
			return l
		}
		l.hostname = h
	}
	if spec.protocol == gwv1.HTTPProtocolType {
		if spec.tls != nil {
			l.invalid = &problem{string(gwv1.ListenerReasonUnsupportedValue), "tls must not be set on an HTTP listener"}
			l.unsupported = true
		}
		return l
	}
	if spec.protocol == gwv1.TLSProtocolType && spec.tls != nil && spec.tls.Mode != nil && *spec.tls.Mode == gwv1.TLSModePassthrough {
		t.passthroughTLS(l)
		return l
	}
	t.listenerTLS(l, from)
	return l
}

// listenerKinds computes supportedKinds from allowedRoutes.kinds.
func (t *translator) listenerKinds(l *listener, ar *gwv1.AllowedRoutes) {
	supported := defaultRouteKinds(l.protocol)
	if l.protocol == gwv1.TLSProtocolType && l.tls != nil && l.tls.Mode != nil && *l.tls.Mode == gwv1.TLSModePassthrough {
		// TCPRoutes take the decrypted stream of a Terminate listener;
		// a Passthrough listener has none (TLSRoutes only).
		supported = slices.DeleteFunc(slices.Clone(supported), func(k resource.Kind) bool { return k == resource.KindTCPRoute })
	}
	l.kinds = []gwv1.RouteGroupKind{}
	allow := func(k resource.Kind) {
		if !l.allowed[kindIndex(k)] {
			l.allowed[kindIndex(k)] = true
			l.kinds = append(l.kinds, routeGroupKind(k))
		}
	}
	if ar == nil || len(ar.Kinds) == 0 {
		for _, k := range supported {
			allow(k)
		}
		return
	}
	var bad []string
	for _, k := range ar.Kinds {
		group := gwv1.GroupName
		if k.Group != nil {
			group = string(*k.Group)
		}
		if kind, ok := routeKindNamed(k.Kind); ok && group == gwv1.GroupName && slices.Contains(supported, kind) {
			allow(kind)
			continue
		}
		bad = append(bad, groupKind(group, string(k.Kind)))
	}
	if len(bad) > 0 {
		l.unresolved = &problem{string(gwv1.ListenerReasonInvalidRouteKinds),
			fmt.Sprintf("route kinds %s are not supported on protocol %s; supported: %s", strings.Join(bad, ", "), l.protocol, kindNames(supported))}
	}
}

// listenerTLS validates the TLS section of an HTTPS listener, or of a TLS
// listener of mode Terminate, and resolves its certificates.
func (t *translator) listenerTLS(l *listener, from objRef) {
	cfg := l.tls
	if cfg == nil {
		l.invalid = &problem{string(gwv1.ListenerReasonUnsupportedValue), fmt.Sprintf("a %s listener needs tls with certificateRefs", l.protocol)}
		l.unsupported = true
		return
	}
	if cfg.Mode != nil && *cfg.Mode != gwv1.TLSModeTerminate {
		l.invalid = &problem{string(gwv1.ListenerReasonUnsupportedValue),
			fmt.Sprintf("tls mode %q is not supported with protocol HTTPS; use Terminate", *cfg.Mode)}
		l.unsupported = true
		return
	}
	if !t.tlsOptionsOK(l) {
		return
	}
	// Certificate problems are reference problems: the listener stays
	// Accepted, ResolvedRefs says why, and it is not Programmed.
	if len(cfg.CertificateRefs) == 0 {
		l.unresolved = &problem{string(gwv1.ListenerReasonInvalidCertificateRef), "tls mode Terminate needs at least one certificateRef"}
		l.noCerts = true
		return
	}
	var msgs []string
	var reason string
	for i, ref := range cfg.CertificateRefs {
		name, p := t.resolveCertificate(ref, from)
		if p != nil {
			msgs = append(msgs, fmt.Sprintf("certificateRefs[%d]: %s", i, p.message))
			// RefNotPermitted wins: it must be reported whether or not the
			// Secret exists.
			if reason == "" || p.reason == string(gwv1.ListenerReasonRefNotPermitted) {
				reason = p.reason
			}
			continue
		}
		l.certs = append(l.certs, name)
		l.secrets = append(l.secrets, t.secrets[name].secret)
	}
	if len(msgs) > 0 {
		// The route-kinds problem, if any, is less important than this one.
		l.unresolved = &problem{reason, strings.Join(msgs, "; ")}
		l.noCerts = true
		l.certs, l.secrets = nil, nil
		return
	}
	t.listenerClientValidation(l)
}

// resolveCertificate checks one certificateRef and registers the Secret.
func (t *translator) resolveCertificate(ref gwv1.SecretObjectReference, from objRef) (string, *problem) {
	c := refs.CertificateOf(from.namespace, ref)
	ns, name := c.Namespace, c.Name
	id := c.ID()
	if !c.IsSecret() {
		return "", &problem{string(gwv1.ListenerReasonInvalidCertificateRef),
			fmt.Sprintf("%s %s is not supported; only core Secrets are", groupKind(c.Group, c.Kind), id)}
	}
	// Read (and recorded) whatever the outcome, before the cache.
	sec := t.in.Secret(resource.Key{Namespace: ns, Name: name})
	if !t.allows(from, c) {
		return "", &problem{string(gwv1.ListenerReasonRefNotPermitted),
			fmt.Sprintf("no ReferenceGrant in namespace %s allows a %s of namespace %s to use Secret %s", ns, from.kind, from.namespace, id)}
	}
	if s, ok := t.secrets[id]; ok {
		if s.err != "" {
			return "", &problem{string(gwv1.ListenerReasonInvalidCertificateRef), s.err}
		}
		return id, nil
	}
	entry := secretEntry{}
	switch {
	case sec == nil:
		entry.err = fmt.Sprintf("Secret %s does not exist, or is not of type kubernetes.io/tls (the controller watches TLS Secrets only)", id)
	case sec.Type != corev1.SecretTypeTLS:
		entry.err = fmt.Sprintf("Secret %s has type %q, want %q", id, sec.Type, corev1.SecretTypeTLS)
	default:
		cert, key := secretValue(sec, corev1.TLSCertKey), secretValue(sec, corev1.TLSPrivateKeyKey)
		if _, err := tls.X509KeyPair(cert, key); err != nil {
			entry.err = fmt.Sprintf("Secret %s does not hold a valid PEM certificate and key: %v", id, err)
		} else {
			entry.secret = &ir.Secret{Name: id, Cert: cert, Key: key}
		}
	}
	t.secrets[id] = entry
	if entry.err != "" {
		return "", &problem{string(gwv1.ListenerReasonInvalidCertificateRef), entry.err}
	}
	return id, nil
}

// secretEntry caches the validation of one Secret.
type secretEntry struct {
	secret *ir.Secret
	err    string
}

// secretValue reads a key of a Secret, falling back to stringData which
// manifests may use (the API server would have merged it into data).
func secretValue(s *corev1.Secret, key string) []byte {
	if v, ok := s.Data[key]; ok {
		return v
	}
	if v, ok := s.StringData[key]; ok {
		return []byte(v)
	}
	return nil
}

// detectConflicts marks conflicted listeners of a Gateway's merged set,
// which is in precedence order: the Gateway's own listeners, then those of
// each ListenerSet (by creation time, then namespace/name). Precedence
// orders distinct objects only: a listener that conflicts with one of an
// earlier object loses to it, but among the other listeners of one object
// (the Gateway, or one ListenerSet) no winner is picked: every listener of
// a port carrying two protocols is ProtocolConflict, and listeners sharing
// port, protocol and hostname are all HostnameConflict, whatever their
// order. The listeners
// conflicted within their object still claim their port and hostname
// against later objects; those that lost to an earlier object claim
// nothing. Listeners with an unsupported protocol or invalid values take
// no part, except that a ListenerSet entry of an unsupported protocol on
// a port an earlier object holds is ProtocolConflict.
func detectConflicts(merged []*listener) {
	c := conflictState{
		protos:   map[int32]gwv1.ProtocolType{},
		poisoned: map[int32]bool{},
		hosts:    map[hostKey]bool{},
	}
	for start := 0; start < len(merged); {
		end := start + 1
		for end < len(merged) && merged[end].set == merged[start].set {
			end++
		}
		c.object(merged[start:end])
		start = end
	}
	detectOverlappingTLS(merged)
}

// hostKey is what makes listeners of one port distinct.
type hostKey struct {
	port     int32
	protocol gwv1.ProtocolType
	hostname string
}

// conflictState is what the objects of higher precedence claimed: the
// protocol class of each port, the ports carrying two protocols within one
// object (poisoned), and the hostnames of each port and class.
type conflictState struct {
	protos   map[int32]gwv1.ProtocolType
	poisoned map[int32]bool
	hosts    map[hostKey]bool
}

// object detects the conflicts of the listeners of one object, against
// the earlier objects and among themselves, then records their claims.
func (c *conflictState) object(ls []*listener) {
	key := func(l *listener) hostKey { return hostKey{l.portKey(), portClass(l.protocol), l.hostname} }
	// Conflicts with earlier objects.
	lost := make([]bool, len(ls))
	for i, l := range ls {
		p, claimed := c.protos[l.portKey()]
		protoConflict := c.poisoned[l.portKey()] || (claimed && p != portClass(l.protocol))
		if l.unsupported {
			if l.set != nil && protoConflict && l.invalid != nil && l.invalid.reason == string(gwv1.ListenerReasonUnsupportedProtocol) {
				l.conflict = gwv1.ListenerReasonProtocolConflict
			}
			continue
		}
		switch {
		case protoConflict:
			l.conflict, lost[i] = gwv1.ListenerReasonProtocolConflict, true
		case c.hosts[key(l)]:
			l.conflict, lost[i] = gwv1.ListenerReasonHostnameConflict, true
		}
	}
	// Conflicts within the object, among the listeners that did not lose
	// to an earlier object (as the conformance test
	// ListenerSetProtocolConflict expects: an entry losing to the Gateway
	// does not take its siblings down with it); no sibling wins over
	// another.
	classes := map[int32]map[gwv1.ProtocolType]bool{}
	hosts := map[hostKey]int{}
	for i, l := range ls {
		if l.unsupported || lost[i] {
			continue
		}
		if classes[l.portKey()] == nil {
			classes[l.portKey()] = map[gwv1.ProtocolType]bool{}
		}
		classes[l.portKey()][portClass(l.protocol)] = true
		hosts[key(l)]++
	}
	for i, l := range ls {
		if l.unsupported || lost[i] {
			continue
		}
		switch {
		case len(classes[l.portKey()]) > 1:
			l.conflict = gwv1.ListenerReasonProtocolConflict
		case hosts[key(l)] > 1:
			l.conflict = gwv1.ListenerReasonHostnameConflict
		}
	}
	// Claims against later objects.
	for i, l := range ls {
		if l.unsupported || lost[i] {
			continue
		}
		if len(classes[l.portKey()]) > 1 {
			c.poisoned[l.portKey()] = true
		}
		c.protos[l.portKey()] = portClass(l.protocol)
		c.hosts[key(l)] = true
	}
}

// detectOverlappingTLS flags HTTPS and TLS listeners on one port whose hostnames
// overlap ("*.example.com" and "foo.example.com"). A listener without a
// hostname is the fallback and overlaps nothing.
func detectOverlappingTLS(merged []*listener) {
	byPort := map[int32][]*listener{}
	var ports []int32
	for _, l := range merged {
		if portClass(l.protocol) != gwv1.HTTPSProtocolType || l.unsupported || l.conflict != "" {
			continue
		}
		if byPort[l.port] == nil {
			ports = append(ports, l.port)
		}
		byPort[l.port] = append(byPort[l.port], l)
	}
	for _, p := range ports {
		ls := byPort[p]
		for i := range ls {
			for j := i + 1; j < len(ls); j++ {
				if hostnamesOverlap(ls[i].hostname, ls[j].hostname) {
					ls[i].overlapping, ls[j].overlapping = true, true
				}
			}
		}
	}
}

// listenerConditions computes the conditions of a listener. The reason
// strings of Gateway listeners and ListenerSet entries are equal.
func listenerConditions(l *listener, gen int64) *conditions {
	c := newConditions(gen)
	switch {
	case l.conflict != "":
		// The conformance suite (ListenerSetHostnameConflict,
		// ListenerSetProtocolConflict, mixed TLS termination modes...)
		// expects the conflict reason on Accepted and Programmed.
		msg := conflictMessage(l)
		c.set(string(gwv1.ListenerConditionAccepted), false, string(l.conflict), msg)
		c.set(string(gwv1.ListenerConditionProgrammed), false, string(l.conflict), msg)
	case l.invalid != nil:
		c.set(string(gwv1.ListenerConditionAccepted), false, l.invalid.reason, l.invalid.message)
		c.set(string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonInvalid), "the listener is not accepted: "+l.invalid.message)
	case l.noCerts:
		c.set(string(gwv1.ListenerConditionAccepted), true, string(gwv1.ListenerReasonAccepted), "the listener is valid")
		c.set(string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonInvalid),
			"the listener has no usable certificate, see the ResolvedRefs condition")
	case l.badFilters:
		c.set(string(gwv1.ListenerConditionAccepted), true, string(gwv1.ListenerReasonAccepted), "the listener is valid")
		c.set(string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonInvalid),
			"the backend of a listener filter cannot be resolved, see the ResolvedRefs condition; the listener serves nothing")
	case !l.gw.accepted:
		c.set(string(gwv1.ListenerConditionAccepted), true, string(gwv1.ListenerReasonAccepted), "the listener is valid")
		c.set(string(gwv1.ListenerConditionProgrammed), false, string(gwv1.ListenerReasonInvalid), "the Gateway is not accepted")
	default:
		c.set(string(gwv1.ListenerConditionAccepted), true, string(gwv1.ListenerReasonAccepted), "the listener is valid")
		c.set(string(gwv1.ListenerConditionProgrammed), true, string(gwv1.ListenerReasonProgrammed), "the listener's configuration was generated")
	}
	if l.unresolved != nil {
		c.set(string(gwv1.ListenerConditionResolvedRefs), false, l.unresolved.reason, l.unresolved.message)
	} else {
		c.set(string(gwv1.ListenerConditionResolvedRefs), true, string(gwv1.ListenerReasonResolvedRefs), "all references are resolved")
	}
	if l.conflict != "" {
		c.set(string(gwv1.ListenerConditionConflicted), true, string(l.conflict), conflictMessage(l))
	} else {
		c.set(string(gwv1.ListenerConditionConflicted), false, string(gwv1.ListenerReasonNoConflicts), "the listener does not conflict with other listeners")
	}
	if l.overlapping {
		c.set(string(gwv1.ListenerConditionOverlappingTLSConfig), true, string(gwv1.ListenerReasonOverlappingHostnames),
			"the hostname overlaps the hostname of another HTTPS listener on the same port")
	}
	return c
}

func conflictMessage(l *listener) string {
	host := l.hostname
	if host == "" {
		host = "(any)"
	}
	if l.conflict == gwv1.ListenerReasonProtocolConflict {
		return fmt.Sprintf("port %d is used by another listener of the Gateway with a different protocol", l.port)
	}
	return fmt.Sprintf("another listener of the Gateway uses port %d, protocol %s and hostname %s", l.port, l.protocol, host)
}

// proxyPort names what of a provisioned proxy listens on port ("" when
// nothing does): Envoy could not bind a Gateway listener there, and the
// failure would be the whole proxy's. Only when Portico provisions the
// proxies (their bootstrap is Portico's); a standalone Envoy's bootstrap
// is its operator's.
func proxyPort(provisioned bool, pc *v1alpha1.ProxyConfigSpec, port int32) string {
	if !provisioned {
		return ""
	}
	names := []string{"admin interface", "readiness listener", "shutdown manager"}
	for i, p := range proxyspec.ReservedPorts() {
		if p == port && i < len(names) {
			return names[i] + " port"
		}
	}
	spec := v1alpha1.ProxyConfigSpec{}
	if pc != nil {
		spec = *pc
	}
	if m, ok := proxyspec.MetricsPort(spec); ok && m == port {
		return "metrics port (ProxyConfig spec.metrics.port)"
	}
	return ""
}
