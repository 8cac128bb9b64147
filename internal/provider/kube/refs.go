package kube

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	// Aliased: this package has a type refs (the counts).
	gwrefs "github.com/portico-dev/portico/internal/refs"
	"github.com/portico-dev/portico/internal/resource"
)

// refs are the Services and Secrets the routes and listeners of the last
// snapshot reference, each with the number of objects (routes, Gateways,
// ListenerSets) referencing it. The event filter uses them: events of
// other Services, EndpointSlices and Secrets do not wake the pipeline
// (they still reach the next snapshot).
type refs struct {
	services   map[types.NamespacedName]int
	secrets    map[types.NamespacedName]int
	configMaps map[types.NamespacedName]int
}

func newRefs() refs {
	return refs{services: map[types.NamespacedName]int{}, secrets: map[types.NamespacedName]int{}, configMaps: map[types.NamespacedName]int{}}
}

// configMapKeys is the set of referenced ConfigMaps (those the provider
// watches, refwatch.go).
func (r *refs) configMapKeys() map[types.NamespacedName]bool {
	out := make(map[types.NamespacedName]bool, len(r.configMaps))
	for k := range r.configMaps {
		out[k] = true
	}
	return out
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
	count(r.configMaps, c.configMaps)
}

// contrib is what one route, Gateway or ListenerSet references, each key
// once.
type contrib struct {
	services, secrets, configMaps []types.NamespacedName
}

func (c contrib) empty() bool {
	return len(c.services) == 0 && len(c.secrets) == 0 && len(c.configMaps) == 0
}

// refOwner reports whether objects of kind k reference Services,
// Secrets or ConfigMaps.
func refOwner(k resource.Kind) bool {
	switch k {
	case resource.KindGateway, resource.KindListenerSet, resource.KindBackendTLSPolicy:
		return true
	}
	return k.IsRoute()
}

// contribOf returns the Services and Secrets obj, of kind k, references,
// as its resource.Descriptor (a route's backends) or package refs (a
// Gateway's or ListenerSet's certificates) lists and resolves them (the translator resolves them there too);
// nothing for nil or for objects of other kinds. Every reference of the
// spec counts, also those the translator rejects (a backendRef with
// filters): the filter may wake the pipeline for nothing, never miss.
func contribOf(k resource.Kind, obj any) contrib {
	var c contrib
	add := func(list *[]types.NamespacedName, o gwrefs.Object) {
		if k := (types.NamespacedName{Namespace: o.Namespace, Name: o.Name}); !slices.Contains(*list, k) {
			*list = append(*list, k)
		}
	}
	if d := resource.KindOf(k); d != nil && d.Route != nil {
		for b := range d.Route.Backends(obj) {
			if b.IsService() {
				add(&c.services, b.Object)
			}
		}
	}
	for o := range gwrefs.Certificates(obj) {
		if o.IsSecret() {
			add(&c.secrets, o)
		}
	}
	// CA certificates (a BackendTLSPolicy's, a Gateway's client
	// validation), and a Gateway's client certificate for backends.
	for o := range gwrefs.CACertificates(obj) {
		switch {
		case o.IsConfigMap():
			add(&c.configMaps, o)
		case o.IsSecret():
			add(&c.secrets, o)
		}
	}
	if gw, ok := obj.(*gwv1.Gateway); ok && gw != nil && gw.Spec.TLS != nil && gw.Spec.TLS.Backend != nil && gw.Spec.TLS.Backend.ClientCertificateRef != nil {
		if o := gwrefs.CertificateOf(gw.Namespace, *gw.Spec.TLS.Backend.ClientCertificateRef); o.IsSecret() {
			add(&c.secrets, o)
		}
	}
	return c
}

// collectRefs computes the references of every route, Gateway and
// ListenerSet of a snapshot (the incremental bookkeeping of Snapshot must
// always equal it).
func collectRefs(s *resource.Snapshot) refs {
	r := newRefs()
	for _, k := range refOwnerKinds() {
		for _, o := range s.Objects(k) {
			r.add(contribOf(k, o), 1)
		}
	}
	return r
}

// refOwnerKinds are the kinds whose objects reference Services, Secrets
// or ConfigMaps: the routes, then Gateways, ListenerSets and
// BackendTLSPolicies.
func refOwnerKinds() []resource.Kind {
	return append(slices.Clone(resource.RouteKinds), resource.KindGateway, resource.KindListenerSet, resource.KindBackendTLSPolicy)
}
