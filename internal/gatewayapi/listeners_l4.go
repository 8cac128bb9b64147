package gatewayapi

import (
	"fmt"
	"sort"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Listeners of protocols TLS, TCP and UDP.
//
//   - TLS: mode Terminate (the default) terminates TLS with the listener's
//     certificates, like HTTPS, and forwards the decrypted connection to
//     the TLSRoute chosen by SNI; mode Passthrough forwards the TLS stream
//     untouched to the TLSRoute chosen by SNI (certificateRefs are not
//     used). HTTPS and TLS listeners of both modes may share a port: they
//     are all told apart by SNI (portClass), so only equal hostnames
//     conflict (HostnameConflict).
//   - TCP and UDP select nothing by hostname (spec.hostname is ignored), so
//     two such listeners on one port conflict (HostnameConflict, both with
//     the empty hostname). UDP ports are apart from the TCP ones: a TCP and
//     a UDP listener may share a port number (DNS on 53/TCP and 53/UDP).

// l4Protocol reports whether listeners of p select nothing by hostname.
func l4Protocol(p gwv1.ProtocolType) bool {
	return p == gwv1.TCPProtocolType || p == gwv1.UDPProtocolType
}

// portClass is the protocol by which listeners on one port must agree:
// HTTPS and TLS listeners all select by SNI and share ports.
func portClass(p gwv1.ProtocolType) gwv1.ProtocolType {
	if p == gwv1.TLSProtocolType {
		return gwv1.HTTPSProtocolType
	}
	return p
}

// portKey tells the ports of UDP listeners apart from those of TCP-based
// ones.
func (l *listener) portKey() int32 {
	if l.protocol == gwv1.UDPProtocolType {
		return l.port + 1<<16
	}
	return l.port
}

// l4Listener finishes a TCP or UDP listener: it needs no TLS.
func (t *translator) l4Listener(l *listener) *listener {
	if l.tls != nil {
		l.invalid = &problem{string(gwv1.ListenerReasonUnsupportedValue), fmt.Sprintf("tls must not be set on a %s listener", l.protocol)}
		l.unsupported = true
	}
	return l
}

// passthroughTLS validates a TLS listener of mode Passthrough: it holds no
// certificates (certificateRefs, if any, are not used) and Portico applies
// no TLS options to a stream it does not terminate.
func (t *translator) passthroughTLS(l *listener) {
	l.passthrough = true
	t.tlsOptionsOK(l)
}

// tlsOptionsOK refuses tls.options, none of which Portico implements.
func (t *translator) tlsOptionsOK(l *listener) bool {
	cfg := l.tls
	if cfg == nil || len(cfg.Options) == 0 {
		return true
	}
	keys := make([]string, 0, len(cfg.Options))
	for k := range cfg.Options {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	l.invalid = &problem{string(gwv1.ListenerReasonUnsupportedValue), fmt.Sprintf("tls options %s are not supported", strings.Join(keys, ", "))}
	l.unsupported = true
	return false
}

// supportedKinds is the listener's status.supportedKinds: none for a
// listener in a protocol conflict, which serves no protocol on its port
// (the conformance suite's TLSRouteListenerMixedTerminationNotSupported
// shape), else its allowed kinds.
func (l *listener) supportedKinds() []gwv1.RouteGroupKind {
	if l.conflict == gwv1.ListenerReasonProtocolConflict {
		return []gwv1.RouteGroupKind{}
	}
	return l.kinds
}
