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
// NOTE for the merge with the shared trust resolver (trust.go of the
// BackendTLSPolicy work): frontendCA is a stand-in reading Secrets only
// (ConfigMaps are not among this branch's inputs, so a ConfigMap reference
// is reported missing); it should become a call of that resolver.

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/refs"
	"github.com/portico-dev/portico/internal/resource"
)

// caCertKey is the key of a ConfigMap or Secret holding a CA bundle.
const caCertKey = "ca.crt"

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
	var bundle strings.Builder
	var msgs []string
	var reason string
	for i, ref := range v.CACertificateRefs {
		pemText, p := t.frontendCA(ref, from)
		if p != nil {
			msgs = append(msgs, fmt.Sprintf("tls.frontend caCertificateRefs[%d]: %s", i, p.message))
			if reason == "" || p.reason == string(gwv1.ListenerReasonRefNotPermitted) {
				reason = p.reason
			}
			continue
		}
		bundle.WriteString(pemText)
		if !strings.HasSuffix(pemText, "\n") {
			bundle.WriteByte('\n')
		}
	}
	if len(msgs) > 0 {
		p := &problem{reason, strings.Join(msgs, "; ")}
		if l.unresolved == nil {
			l.unresolved = p
		} else {
			l.unresolved = &problem{l.unresolved.reason, l.unresolved.message + "; " + p.message}
		}
	}
	if bundle.Len() == 0 {
		l.invalid = &problem{string(gwv1.ListenerReasonNoValidCACertificate),
			"none of the Gateway's tls.frontend caCertificateRefs for port " + fmt.Sprint(l.port) + " is usable, see the ResolvedRefs condition"}
		return
	}
	mode := ir.ClientValidationAllowValidOnly
	if v.Mode == gwv1.AllowInsecureFallback {
		mode = ir.ClientValidationAllowInsecureFallback
	}
	l.clientValidation = &ir.ClientValidation{CACertificates: bundle.String(), Mode: mode}
}

// frontendCA resolves one CA reference of the Gateway to a PEM bundle of
// certificates (see the package note: Secrets only until the shared
// resolver is in).
func (t *translator) frontendCA(ref gwv1.ObjectReference, from objRef) (string, *problem) {
	o := refs.Object{Group: string(ref.Group), Kind: string(ref.Kind), Namespace: from.namespace, Name: string(ref.Name)}
	if ref.Namespace != nil {
		o.Namespace = string(*ref.Namespace)
	}
	id := o.Namespace + "/" + o.Name
	isConfigMap := o.Group == refs.GroupCore && o.Kind == "ConfigMap"
	if !o.IsSecret() && !isConfigMap {
		return "", &problem{string(gwv1.ListenerReasonInvalidCACertificateKind),
			fmt.Sprintf("%s %s is not a supported CA certificate kind; use a ConfigMap or Secret with key %s", groupKind(o.Group, o.Kind), id, caCertKey)}
	}
	var data []byte
	found := false
	if o.IsSecret() {
		// Read (and recorded) whatever the outcome.
		if sec := t.in.Secret(resource.Key{Namespace: o.Namespace, Name: o.Name}); sec != nil {
			found, data = true, secretValue(sec, caCertKey)
		}
	}
	if !t.allows(from, o) {
		return "", &problem{string(gwv1.ListenerReasonRefNotPermitted),
			fmt.Sprintf("no ReferenceGrant in namespace %s allows a Gateway of namespace %s to use %s %s", o.Namespace, from.namespace, o.Kind, id)}
	}
	if !found {
		return "", &problem{string(gwv1.ListenerReasonInvalidCACertificateRef), fmt.Sprintf("%s %s does not exist", o.Kind, id)}
	}
	pemText, err := caBundle(data)
	if err != nil {
		return "", &problem{string(gwv1.ListenerReasonInvalidCACertificateRef), fmt.Sprintf("%s %s: %v", o.Kind, id, err)}
	}
	return pemText, nil
}

// caBundle checks that data is a PEM bundle of X.509 certificates (other
// blocks are dropped) and returns its certificates re-encoded.
func caBundle(data []byte) (string, error) {
	if len(data) == 0 {
		return "", fmt.Errorf("no %s key", caCertKey)
	}
	var out strings.Builder
	n := 0
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return "", fmt.Errorf("%s holds an invalid certificate: %v", caCertKey, err)
		}
		out.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes}))
		n++
	}
	if n == 0 {
		return "", fmt.Errorf("%s holds no PEM certificate", caCertKey)
	}
	return out.String(), nil
}
