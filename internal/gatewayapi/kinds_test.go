package gatewayapi

import (
	"testing"

	"github.com/portico-dev/portico/internal/resource"
)

// Every kind of route of the layers below has one entry of semantics, with
// its own kind, listener protocols and compile function.
func TestEveryRouteKindHasSemantics(t *testing.T) {
	n := 0
	for k, rk := range routeKinds {
		if rk == nil {
			continue
		}
		n++
		if rk.kind != resource.Kind(k) || !rk.kind.IsRoute() {
			t.Errorf("entry %d is of kind %v, a route: %v", k, rk.kind, rk.kind.IsRoute())
		}
	}
	if n != len(resource.RouteKinds) {
		t.Errorf("%d entries for %d kinds of route", n, len(resource.RouteKinds))
	}
	for _, k := range resource.RouteKinds {
		rk := routeKinds[k]
		if rk == nil {
			t.Errorf("%s: no entry", k)
			continue
		}
		if len(rk.protocols) == 0 || rk.compile == nil || len(rk.features) == 0 {
			t.Errorf("%s: protocols %v, compile %v, features %v", k, rk.protocols, rk.compile != nil, rk.features)
		}
	}
}
