package gatewayapi

// Frontend client-certificate validation (Gateway spec.tls.frontend).
//
// The configuration is the Gateway's, not a listener's: perPort[port]
// when an entry names the listener's port, else default. It applies to
// the HTTPS listeners on that port, the Gateway's own and those of its
// ListenerSets alike, so every SNI filter chain of a port asks for client
// certificates the same way. The CA references are read as the Gateway's
// (ReferenceGrants are checked from the Gateway's namespace).
//
// Bad references follow GEP-91: each makes ResolvedRefs False on the
// listener (InvalidCACertificateKind for a kind we do not read,
// RefNotPermitted without a grant, InvalidCACertificateRef for a missing
// object or one without a PEM certificate under ca.crt); the valid ones
// are used. When none is valid the listener is not Accepted
// (NoValidCACertificate) and serves nothing: serving it without the check
// would let in clients the owner meant to keep out.
//
// The CA references are read by the shared resolver (trust.go): ConfigMaps,
// Secrets and ClusterTrustBundles; a failure's reason is listenerReason's,
// RefNotPermitted first when any reference lacks a grant (it is the one an
// owner can fix without touching the Gateway).

import (
	"fmt"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/refs"
	"github.com/portico-dev/portico/internal/resource"
)

// frontendValidation returns the client validation of the Gateway gw for
// port, or nil when it asks for none.
func frontendValidation(gw *gwv1.Gateway, port int32) *gwv1.FrontendTLSValidation {
	if gw.Spec.TLS == nil || gw.Spec.TLS.Frontend == nil {
		return nil
	}
	f := gw.Spec.TLS.Frontend
	for _, pp := range f.PerPort {
		if int32(pp.Port) == port {
			return pp.TLS.Validation
		}
	}
	return f.Default.Validation
}

// insecureFrontend reports whether any client validation of gw (default
// or per port) is AllowInsecureFallback: the Gateway then says so in its
// InsecureFrontendValidationMode condition.
func insecureFrontend(gw *gwv1.Gateway) bool {
	if gw.Spec.TLS == nil || gw.Spec.TLS.Frontend == nil {
		return false
	}
	f := gw.Spec.TLS.Frontend
	if v := f.Default.Validation; v != nil && v.Mode == gwv1.AllowInsecureFallback {
		return true
	}
	for _, pp := range f.PerPort {
		if v := pp.TLS.Validation; v != nil && v.Mode == gwv1.AllowInsecureFallback {
			return true
		}
	}
	return false
}

// listenerClientValidation sets l.clientValidation from the Gateway's
// frontend configuration for l's port, or marks l as the package doc says.
// Only HTTPS listeners with usable certificates are concerned.
func (t *translator) listenerClientValidation(l *listener) {
	if l.protocol != gwv1.HTTPSProtocolType || l.noCerts || l.invalid != nil {
		return
	}
	v := frontendValidation(l.gw.obj, l.port)
	if v == nil {
		return
	}
	gw := l.gw.obj
	from := objRef{group: gwv1.GroupName, kind: resource.KindGateway.String(), namespace: gw.Namespace}
	cas := make([]refs.Object, len(v.CACertificateRefs))
	for i, ref := range v.CACertificateRefs {
		cas[i] = refs.CAOf(gw.Namespace, ref)
	}
	res := t.caBundle(from, cas)
	if p := res.problem("tls.frontend caCertificateRefs", listenerReason); p != nil {
		for _, f := range res.failures {
			if f.cause == caNotPermitted {
				p.reason = listenerReason(caNotPermitted)
			}
		}
		if l.unresolved == nil {
			l.unresolved = p
		} else {
			l.unresolved = &problem{l.unresolved.reason, l.unresolved.message + "; " + p.message}
		}
	}
	if len(res.pem) == 0 {
		l.invalid = &problem{string(gwv1.ListenerReasonNoValidCACertificate),
			"none of the Gateway's tls.frontend caCertificateRefs for port " + fmt.Sprint(l.port) + " is usable, see the ResolvedRefs condition"}
		return
	}
	mode := ir.ClientValidationAllowValidOnly
	if v.Mode == gwv1.AllowInsecureFallback {
		mode = ir.ClientValidationAllowInsecureFallback
	}
	l.clientValidation = &ir.ClientValidation{CACertificates: string(res.pem), Mode: mode}
}
