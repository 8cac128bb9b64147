package kube

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/resource"
)

// refs are the Services and Secrets the routes and listeners of the last
// snapshot reference, each with the number of objects (routes, Gateways,
// ListenerSets) referencing it. The event filter uses them: events of
// other Services, EndpointSlices and Secrets do not wake the pipeline
// (they still reach the next snapshot).
type refs struct {
	services map[types.NamespacedName]int
	secrets  map[types.NamespacedName]int
}

func newRefs() refs {
	return refs{services: map[types.NamespacedName]int{}, secrets: map[types.NamespacedName]int{}}
}

func (r *refs) service(k types.NamespacedName) bool { return r.services[k] > 0 }
func (r *refs) secret(k types.NamespacedName) bool  { return r.secrets[k] > 0 }

// add counts (d = 1) or uncounts (d = -1) the references of one object.
func (r *refs) add(c contrib, d int) {
	count := func(m map[types.NamespacedName]int, keys []types.NamespacedName) {
		for _, k := range keys {
			if n := m[k] + d; n > 0 {
				m[k] = n
			} else {
				delete(m, k)
			}
		}
	}
	count(r.services, c.services)
	count(r.secrets, c.secrets)
}

// contrib is what one route, Gateway or ListenerSet references, each key
// once.
type contrib struct {
	services, secrets []types.NamespacedName
}

func (c contrib) empty() bool { return len(c.services) == 0 && len(c.secrets) == 0 }

// refOwner reports whether objects of kind k reference Services or
// Secrets.
func refOwner(k resource.Kind) bool {
	switch k {
	case resource.KindHTTPRoute, resource.KindGRPCRoute, resource.KindGateway, resource.KindListenerSet:
		return true
	}
	return false
}

// contribOf returns what obj references; nothing for nil or for objects
// of other kinds.
func contribOf(obj any) contrib {
	var c contrib
	add := func(list *[]types.NamespacedName, ns, name string) {
		if k := (types.NamespacedName{Namespace: ns, Name: name}); !slices.Contains(*list, k) {
			*list = append(*list, k)
		}
	}
	backend := func(ns string, ref gwv1.BackendObjectReference) {
		if ref.Group != nil && *ref.Group != "" {
			return
		}
		if ref.Kind != nil && *ref.Kind != "Service" {
			return
		}
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		add(&c.services, ns, string(ref.Name))
	}
	listenerTLS := func(ns string, tls *gwv1.ListenerTLSConfig) {
		if tls == nil {
			return
		}
		for _, ref := range tls.CertificateRefs {
			if ref.Group != nil && *ref.Group != "" {
				continue
			}
			if ref.Kind != nil && *ref.Kind != "Secret" {
				continue
			}
			rns := ns
			if ref.Namespace != nil {
				rns = string(*ref.Namespace)
			}
			add(&c.secrets, rns, string(ref.Name))
		}
	}
	mirror := func(ns string, f []gwv1.HTTPRouteFilter) {
		for _, x := range f {
			if x.RequestMirror != nil {
				backend(ns, x.RequestMirror.BackendRef)
			}
		}
	}
	switch o := obj.(type) {
	case *gwv1.HTTPRoute:
		for _, rule := range o.Spec.Rules {
			mirror(o.Namespace, rule.Filters)
			for _, b := range rule.BackendRefs {
				backend(o.Namespace, b.BackendObjectReference)
				mirror(o.Namespace, b.Filters)
			}
		}
	case *gwv1.GRPCRoute:
		for _, rule := range o.Spec.Rules {
			for _, f := range rule.Filters {
				if f.RequestMirror != nil {
					backend(o.Namespace, f.RequestMirror.BackendRef)
				}
			}
			for _, b := range rule.BackendRefs {
				backend(o.Namespace, b.BackendObjectReference)
			}
		}
	case *gwv1.Gateway:
		for _, l := range o.Spec.Listeners {
			listenerTLS(o.Namespace, l.TLS)
		}
	case *gwv1.ListenerSet:
		for _, l := range o.Spec.Listeners {
			listenerTLS(o.Namespace, l.TLS)
		}
	}
	return c
}

// collectRefs computes the references of every route, Gateway and
// ListenerSet of a snapshot (the incremental bookkeeping of Snapshot must
// always equal it).
func collectRefs(s *resource.Snapshot) refs {
	r := newRefs()
	for _, o := range s.HTTPRoutes.All() {
		r.add(contribOf(o), 1)
	}
	for _, o := range s.GRPCRoutes.All() {
		r.add(contribOf(o), 1)
	}
	for _, o := range s.Gateways.All() {
		r.add(contribOf(o), 1)
	}
	for _, o := range s.ListenerSets.All() {
		r.add(contribOf(o), 1)
	}
	return r
}
