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
