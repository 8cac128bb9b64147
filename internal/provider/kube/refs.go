package kube

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/resource"
)

// refs are the Services and Secrets the routes and listeners of a snapshot
// reference. Events of other Services, EndpointSlices and Secrets do not
// matter for translation and are not even copied into snapshots.
type refs struct {
	services map[types.NamespacedName]bool
	secrets  map[types.NamespacedName]bool
}

func collectRefs(s *resource.Snapshot) refs {
	r := refs{services: map[types.NamespacedName]bool{}, secrets: map[types.NamespacedName]bool{}}
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
		r.services[types.NamespacedName{Namespace: ns, Name: string(ref.Name)}] = true
	}
	cert := func(ns string, ref gwv1.SecretObjectReference) {
		if ref.Group != nil && *ref.Group != "" {
			return
		}
		if ref.Kind != nil && *ref.Kind != "Secret" {
			return
		}
		if ref.Namespace != nil {
			ns = string(*ref.Namespace)
		}
		r.secrets[types.NamespacedName{Namespace: ns, Name: string(ref.Name)}] = true
	}
	mirror := func(ns string, f []gwv1.HTTPRouteFilter) {
		for _, x := range f {
			if x.RequestMirror != nil {
				backend(ns, x.RequestMirror.BackendRef)
			}
		}
	}
	for _, rt := range s.HTTPRoutes {
		for _, rule := range rt.Spec.Rules {
			mirror(rt.Namespace, rule.Filters)
			for _, b := range rule.BackendRefs {
				backend(rt.Namespace, b.BackendObjectReference)
				mirror(rt.Namespace, b.Filters)
			}
		}
	}
	for _, rt := range s.GRPCRoutes {
		for _, rule := range rt.Spec.Rules {
			for _, f := range rule.Filters {
				if f.RequestMirror != nil {
					backend(rt.Namespace, f.RequestMirror.BackendRef)
				}
			}
			for _, b := range rule.BackendRefs {
				backend(rt.Namespace, b.BackendObjectReference)
			}
		}
	}
	for _, gw := range s.Gateways {
		for _, l := range gw.Spec.Listeners {
			if l.TLS != nil {
				for _, c := range l.TLS.CertificateRefs {
					cert(gw.Namespace, c)
				}
			}
		}
	}
	for _, ls := range s.ListenerSets {
		for _, l := range ls.Spec.Listeners {
			if l.TLS != nil {
				for _, c := range l.TLS.CertificateRefs {
					cert(ls.Namespace, c)
				}
			}
		}
	}
	return r
}

// listInto lists every object of a kind from the cache and calls add for
// each item.
func listInto[L client.ObjectList, T any](ctx context.Context, c client.Reader, list L, add func(T)) error {
	if err := c.List(ctx, list); err != nil {
		return err
	}
	return meta.EachListItem(list, func(o runtimeObject) error {
		if t, ok := o.(T); ok {
			add(t)
		}
		return nil
	})
}
