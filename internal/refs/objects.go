package refs

import (
	"iter"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Backends yields the backend references obj holds, resolved against its
// namespace, in spec order, duplicates kept: for an HTTPRoute or a
// GRPCRoute, each rule's RequestMirror filters, then each backendRef
// followed by the RequestMirror filters of that backendRef. Other objects
// (and nil) hold none.
func Backends(obj any) iter.Seq[Backend] {
	return func(yield func(Backend) bool) {
		switch o := obj.(type) {
		case *gwv1.HTTPRoute:
			if o == nil {
				return
			}
			for _, rule := range o.Spec.Rules {
				if !httpMirrors(o.Namespace, rule.Filters, yield) {
					return
				}
				for _, b := range rule.BackendRefs {
					if !yield(BackendOf(o.Namespace, b.BackendObjectReference)) || !httpMirrors(o.Namespace, b.Filters, yield) {
						return
					}
				}
			}
		case *gwv1.GRPCRoute:
			if o == nil {
				return
			}
			for _, rule := range o.Spec.Rules {
				if !grpcMirrors(o.Namespace, rule.Filters, yield) {
					return
				}
				for _, b := range rule.BackendRefs {
					if !yield(BackendOf(o.Namespace, b.BackendObjectReference)) || !grpcMirrors(o.Namespace, b.Filters, yield) {
						return
					}
				}
			}
		case *gwv1.TLSRoute:
			if o != nil {
				for _, rule := range o.Spec.Rules {
					if !l4Backends(o.Namespace, rule.BackendRefs, yield) {
						return
					}
				}
			}
		case *gwv1.TCPRoute:
			if o != nil {
				for _, rule := range o.Spec.Rules {
					if !l4Backends(o.Namespace, rule.BackendRefs, yield) {
						return
					}
				}
			}
		case *gwv1.UDPRoute:
			if o != nil {
				for _, rule := range o.Spec.Rules {
					if !l4Backends(o.Namespace, rule.BackendRefs, yield) {
						return
					}
				}
			}
		}
	}
}

// l4Backends yields the backends of a rule of a TLSRoute, TCPRoute or
// UDPRoute.
func l4Backends(ns string, backends []gwv1.BackendRef, yield func(Backend) bool) bool {
	for _, b := range backends {
		if !yield(BackendOf(ns, b.BackendObjectReference)) {
			return false
		}
	}
	return true
}

func httpMirrors(ns string, filters []gwv1.HTTPRouteFilter, yield func(Backend) bool) bool {
	for _, f := range filters {
		if f.RequestMirror != nil && !yield(BackendOf(ns, f.RequestMirror.BackendRef)) {
			return false
		}
	}
	return true
}

func grpcMirrors(ns string, filters []gwv1.GRPCRouteFilter, yield func(Backend) bool) bool {
	for _, f := range filters {
		if f.RequestMirror != nil && !yield(BackendOf(ns, f.RequestMirror.BackendRef)) {
			return false
		}
	}
	return true
}

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
