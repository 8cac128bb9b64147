package gatewayapi

import (
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/refs"
	"github.com/portico-dev/portico/internal/resource"
)

// set is a set of comparable values.
type set[K comparable] map[K]struct{}

func (s set[K]) add(k K) { s[k] = struct{}{} }

func gatewayRef(k resource.Key) resource.Ref { return resource.Ref{Kind: resource.KindGateway, Key: k} }

// ListenerSetParent is the Gateway a ListenerSet names (package refs, the
// defaults applied); false when its parentRef is not a Gateway. The engine
// indexes ListenerSets by it.
func ListenerSetParent(ls *gwv1.ListenerSet) (resource.Key, bool) {
	p := refs.GatewayOf(ls.Namespace, ls.Spec.ParentRef)
	if !p.IsGateway() {
		return resource.Key{}, false
	}
	return resource.Key{Namespace: p.Namespace, Name: p.Name}, true
}

func compareNames(nsa, na, nsb, nb string) int {
	if c := strings.Compare(nsa, nsb); c != 0 {
		return c
	}
	return strings.Compare(na, nb)
}

func compareStatuses(a, b *Status) int {
	if c := strings.Compare(a.Kind.String(), b.Kind.String()); c != 0 {
		return c
	}
	return compareNames(a.Namespace, a.Name, b.Namespace, b.Name)
}
