package statustree

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/refs"
	"github.com/portico-dev/portico/internal/resource"
)

// attaches reports whether a route whose parentRef p is Accepted attaches
// to listener l, as the Gateway API defines attachment (see the package
// documentation: this is the view's reading, the listener's
// attachedRoutes the controller's count).
func (b *builder) attaches(l *listenerNode, kind resource.Kind, routeNS string, view resource.RouteView, p refs.Parent) bool {
	if p.SectionName != "" && p.SectionName != l.out.Name {
		return false
	}
	if p.HasPort && p.Port != l.out.Port {
		return false
	}
	if l.hasStatus && !supports(l.kinds, kind) {
		return false
	}
	if !b.namespaceAllowed(l, routeNS) {
		return false
	}
	return hostnamesMatch(l.out.Hostname, view.Hostnames)
}

// supports reports whether kind is among a listener's supportedKinds.
func supports(kinds []gwv1.RouteGroupKind, kind resource.Kind) bool {
	for _, k := range kinds {
		group := refs.GroupGateway
		if k.Group != nil {
			group = string(*k.Group)
		}
		if group == refs.GroupGateway && string(k.Kind) == kind.String() {
			return true
		}
	}
	return false
}

// namespaceAllowed applies a listener's allowedRoutes.namespaces (default
// Same: the namespace of the Gateway or ListenerSet). A selector is
// checked against the Namespace's labels; an absent Namespace is assumed
// to match (it could not be read).
func (b *builder) namespaceAllowed(l *listenerNode, routeNS string) bool {
	from := gwv1.NamespacesFromSame
	var sel *metav1.LabelSelector
	if ar := l.allowedRoutes; ar != nil && ar.Namespaces != nil {
		if ar.Namespaces.From != nil {
			from = *ar.Namespaces.From
		}
		sel = ar.Namespaces.Selector
	}
	switch from {
	case gwv1.NamespacesFromAll:
		return true
	case gwv1.NamespacesFromSame:
		return routeNS == l.ownerNS
	case gwv1.NamespacesFromSelector:
		ns, ok := b.snap.Namespaces.Get(routeNS)
		if !ok || ns == nil {
			return true
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		return err == nil && sel != nil && s.Matches(labels.Set(ns.Labels))
	}
	return false
}

// hostnamesMatch reports whether a route with hostnames attaches to a
// listener with hostname listener: either is unset, or one of the
// route's intersects it.
func hostnamesMatch(listener string, route []gwv1.Hostname) bool {
	if listener == "" || len(route) == 0 {
		return true
	}
	listener = strings.ToLower(listener)
	for _, h := range route {
		r := strings.ToLower(string(h))
		if covers(listener, r) || covers(r, listener) {
			return true
		}
	}
	return false
}

// covers reports whether pattern (exact, or a "*." wildcard matching one
// or more labels) covers host.
func covers(pattern, host string) bool {
	if pattern == host {
		return true
	}
	suffix, ok := strings.CutPrefix(pattern, "*")
	return ok && strings.HasPrefix(suffix, ".") && len(host) > len(suffix) && strings.HasSuffix(host, suffix)
}
