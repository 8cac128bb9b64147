package gatewayapi

// CA certificate references (trust anchors), resolved to PEM bundles.
//
// A BackendTLSPolicy (spec.validation.caCertificateRefs) and a Gateway's
// client-certificate validation (spec.tls.frontend) name the CA
// certificates they trust by reference; refs.CACertificates lists them,
// resolved (namespace defaulted, none for a ClusterTrustBundle). The
// resolver here reads them, the same for both users:
//
//	res := t.caBundle(from, cas)
//	res.pem      // the certificates of the usable references, PEM, in order (nil: none)
//	res.failures // one caFailure per unusable reference, in order
//
// Each failure has a cause (caKindUnsupported, caNotPermitted, caInvalid)
// and a message naming the reference and why; each user maps causes to
// the reasons of its own conditions (backendReason for a
// BackendTLSPolicy, listenerReason for a listener) and decides what an
// unusable reference means for it (both fail closed).
//
// What a reference may be:
//   - a ConfigMap (core group): its key ca.crt, in data or binaryData;
//   - a Secret (core group): its key ca.crt. The kube provider watches only
//     Secrets of type kubernetes.io/tls (provider/kube SecretFieldSelector),
//     so a CA kept in a Secret of another type is reported missing;
//   - a ClusterTrustBundle (certificates.k8s.io, cluster-scoped): its
//     spec.trustBundle.
//
// Any other group or kind is caKindUnsupported. The bytes must hold at
// least one PEM CERTIFICATE block, and every such block must parse as an
// X.509 certificate (caInvalid otherwise); other PEM blocks are ignored.
// The bundle is the certificates re-encoded, one copy of each, so that two
// references to the same CA give the same bytes as one.
//
// A reference to a namespaced object of another namespace than from's is
// checked against the ReferenceGrants of that namespace (caNotPermitted),
// after the object is read (the read is recorded whatever the outcome, so
// that creating the object or a grant is seen). A BackendTLSPolicy's
// references are local, so only the Gateway's may cross namespaces.

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/refs"
	"github.com/portico-dev/portico/internal/resource"
)

// caDataKey is the key of a ConfigMap or Secret that holds a CA bundle.
const caDataKey = "ca.crt"

// caCause says why a CA certificate reference cannot be used.
type caCause uint8

const (
	// caKindUnsupported: neither a ConfigMap, a Secret nor a
	// ClusterTrustBundle.
	caKindUnsupported caCause = iota + 1
	// caNotPermitted: in another namespace, and no ReferenceGrant allows
	// the reference.
	caNotPermitted
	// caInvalid: the object does not exist, has no ca.crt, or holds no
	// valid certificate.
	caInvalid
)

// caFailure is one unusable CA certificate reference.
type caFailure struct {
	index   int // its position in the list resolved
	ref     refs.Object
	cause   caCause
	message string // which reference, and why
}

// caResolution is what caBundle makes of a list of references.
type caResolution struct {
	// pem holds the certificates of the usable references, PEM-encoded,
	// each once, in the order of the references; nil when none is usable.
	pem      []byte
	failures []caFailure
}

// ok reports whether every reference is usable (and there is one).
func (r caResolution) ok() bool { return len(r.failures) == 0 && len(r.pem) > 0 }

// problem returns the failures as one problem, the first failure's reason
// (as reason maps causes) and every failure's message, prefixed by field
// and the index ("field[i]: message; ..."); nil when there is none.
func (r caResolution) problem(field string, reason func(caCause) string) *problem {
	if len(r.failures) == 0 {
		return nil
	}
	msgs := make([]string, len(r.failures))
	for i, f := range r.failures {
		msgs[i] = fmt.Sprintf("%s[%d]: %s", field, f.index, f.message)
	}
	return &problem{reason(r.failures[0].cause), strings.Join(msgs, "; ")}
}

// backendReason is the BackendTLSPolicy ResolvedRefs reason of a cause.
func backendReason(c caCause) string {
	if c == caKindUnsupported {
		return string(gwv1.BackendTLSPolicyReasonInvalidKind)
	}
	return string(gwv1.BackendTLSPolicyReasonInvalidCACertificateRef)
}

// listenerReason is the listener ResolvedRefs reason of a cause (a
// Gateway's spec.tls.frontend).
func listenerReason(c caCause) string {
	switch c {
	case caKindUnsupported:
		return string(gwv1.ListenerReasonInvalidCACertificateKind)
	case caNotPermitted:
		return string(gwv1.ListenerReasonRefNotPermitted)
	}
	return string(gwv1.ListenerReasonInvalidCACertificateRef)
}

// caBundle resolves the CA certificate references cas, read as from's (see
// the file's documentation).
func (t *translator) caBundle(from objRef, cas []refs.Object) caResolution {
	var res caResolution
	var seen [][]byte
	for i, ref := range cas {
		certs, cause, msg := t.caCertificates(from, ref)
		if cause != 0 {
			res.failures = append(res.failures, caFailure{index: i, ref: ref, cause: cause, message: msg})
			continue
		}
		for _, der := range certs {
			if containsBytes(seen, der) {
				continue
			}
			seen = append(seen, der)
			res.pem = append(res.pem, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
		}
	}
	return res
}

func containsBytes(list [][]byte, b []byte) bool {
	for _, x := range list {
		if bytes.Equal(x, b) {
			return true
		}
	}
	return false
}

// caCertificates reads one reference: its certificates (DER), or why it
// cannot be used.
func (t *translator) caCertificates(from objRef, ref refs.Object) ([][]byte, caCause, string) {
	var (
		data   []byte
		found  bool
		id     = ref.ID()
		source = caDataKey
	)
	switch {
	case ref.IsConfigMap():
		if cm := t.in.ConfigMap(resource.Key{Namespace: ref.Namespace, Name: ref.Name}); cm != nil {
			found = true
			if v, ok := cm.Data[caDataKey]; ok {
				data = []byte(v)
			} else {
				data = cm.BinaryData[caDataKey]
			}
		}
	case ref.IsSecret():
		if s := t.in.Secret(resource.Key{Namespace: ref.Namespace, Name: ref.Name}); s != nil {
			found, data = true, secretValue(s, caDataKey)
		}
	case ref.IsClusterTrustBundle():
		id, source = ref.Name, "spec.trustBundle"
		if b := t.in.ClusterTrustBundle(ref.Name); b != nil {
			found, data = true, []byte(b.Spec.TrustBundle)
		}
	default:
		return nil, caKindUnsupported, fmt.Sprintf("%s is not a supported kind of CA certificate reference (ConfigMap, Secret or %s/%s)",
			groupKind(ref.Group, ref.Kind), refs.GroupCertificates, refs.KindClusterTrustBundle)
	}
	if ref.Namespace != "" && !t.allows(from, ref) {
		return nil, caNotPermitted, fmt.Sprintf("no ReferenceGrant in namespace %s allows a %s of namespace %s to use %s %s",
			ref.Namespace, from.kind, from.namespace, ref.Kind, id)
	}
	if !found {
		return nil, caInvalid, fmt.Sprintf("%s %s does not exist", ref.Kind, id)
	}
	if len(data) == 0 {
		return nil, caInvalid, fmt.Sprintf("%s %s has no %s", ref.Kind, id, source)
	}
	certs, err := parseCertificates(data)
	if err != nil {
		return nil, caInvalid, fmt.Sprintf("%s %s: %s %v", ref.Kind, id, source, err)
	}
	return certs, 0, ""
}

// parseCertificates returns the DER of the PEM CERTIFICATE blocks of data,
// each of which must parse; there must be at least one.
func parseCertificates(data []byte) ([][]byte, error) {
	var out [][]byte
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
			return nil, fmt.Errorf("holds an invalid certificate: %v", err)
		}
		out = append(out, b.Bytes)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("holds no PEM certificate")
	}
	return out, nil
}
