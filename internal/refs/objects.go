package refs

import (
	"iter"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Certificates yields the certificateRefs of the listeners of a Gateway or
// a ListenerSet, resolved against its namespace, in spec order,
// duplicates kept. Other objects (and nil) hold none.
func Certificates(obj any) iter.Seq[Object] {
	return func(yield func(Object) bool) {
		tls := func(ns string, cfg *gwv1.ListenerTLSConfig) bool {
			if cfg == nil {
				return true
			}
			for _, ref := range cfg.CertificateRefs {
				if !yield(CertificateOf(ns, ref)) {
					return false
				}
			}
			return true
		}
		switch o := obj.(type) {
		case *gwv1.Gateway:
			if o == nil {
				return
			}
			for _, l := range o.Spec.Listeners {
				if !tls(o.Namespace, l.TLS) {
					return
				}
			}
		case *gwv1.ListenerSet:
			if o == nil {
				return
			}
			for _, l := range o.Spec.Listeners {
				if !tls(o.Namespace, l.TLS) {
					return
				}
			}
		}
	}
}

// CAOf resolves a CA certificate reference (a Gateway's spec.tls.frontend
// caCertificateRefs) of an object in namespace fromNS: fromNS when the
// namespace is unset, and none for a ClusterTrustBundle, which is
// cluster-scoped (the CRD forbids a namespace on one). Group and kind are
// required fields, taken as written.
func CAOf(fromNS string, ref gwv1.ObjectReference) Object {
	o := Object{Group: string(ref.Group), Kind: string(ref.Kind), Namespace: namespace(ref.Namespace, fromNS), Name: string(ref.Name)}
	if o.IsClusterTrustBundle() {
		o.Namespace = ""
	}
	return o
}

// LocalCAOf resolves a CA certificate reference of a BackendTLSPolicy in
// namespace ns: LocalOf, but with no namespace for a ClusterTrustBundle.
func LocalCAOf(ns string, ref gwv1.LocalObjectReference) Object {
	o := LocalOf(ns, ref)
	if o.IsClusterTrustBundle() {
		o.Namespace = ""
	}
	return o
}

// CACertificates yields the CA certificate references of a
// BackendTLSPolicy (spec.validation.caCertificateRefs) or of a Gateway
// (spec.tls.frontend, default then perPort in spec order), resolved
// (CAOf, LocalCAOf), duplicates kept. Other objects (and nil) hold none.
func CACertificates(obj any) iter.Seq[Object] {
	return func(yield func(Object) bool) {
		switch o := obj.(type) {
		case *gwv1.BackendTLSPolicy:
			if o == nil {
				return
			}
			for _, ref := range o.Spec.Validation.CACertificateRefs {
				if !yield(LocalCAOf(o.Namespace, ref)) {
					return
				}
			}
		case *gwv1.Gateway:
			if o == nil || o.Spec.TLS == nil || o.Spec.TLS.Frontend == nil {
				return
			}
			validation := func(v *gwv1.FrontendTLSValidation) bool {
				if v == nil {
					return true
				}
				for _, ref := range v.CACertificateRefs {
					if !yield(CAOf(o.Namespace, ref)) {
						return false
					}
				}
				return true
			}
			f := o.Spec.TLS.Frontend
			if !validation(f.Default.Validation) {
				return
			}
			for _, pp := range f.PerPort {
				if !validation(pp.TLS.Validation) {
					return
				}
			}
		}
	}
}
