package incremental

import (
	"slices"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/resource"
)

// The route path: when only routes changed (and EndpointSlices), the
// Gateways they name keep their translated states from the previous
// translation and gatewayapi.Reattach attaches the changed routes again.
// When Reattach declines (a listener holding routes of two kinds, or a
// Gateway budget that could bind), the Gateways are translated again.

// routesOnly translates changes of routes only by the route path. It
// returns false, having changed nothing but caches, when the path does not
// apply.
func (x *Translator) routesOnly(snap *resource.Snapshot, opts gatewayapi.Options, a *affected, st Stats) (*gatewayapi.Result, Stats, bool) {
	if x.states == nil {
		return nil, st, false
	}
	gateways := sortedKeys(a.gateways)
	var sets []resource.Key
	for _, g := range gateways {
		for s := range x.idx.setsByGateway[g] {
			sets = append(sets, s)
		}
	}
	slices.SortFunc(sets, resource.CompareKeys)
	changed := make([]resource.Ref, 0, len(a.routes))
	for r := range a.routes {
		changed = append(changed, r)
	}
	slices.SortFunc(changed, gatewayapi.CompareRouteRefs)
	for _, r := range changed {
		x.cache.forgetRoute(r)
	}
	p := gatewayapi.Reattach(snap, opts, x.states, gateways, sets, changed, x.cache, x.rec)
	if p == nil {
		return nil, st, false
	}
	x.states.Replace(p.States, nil, nil, changed)

	setKeys := p.States.ListenerSetKeys()
	scope := make([]gatewayapi.StatusKey, 0, len(gateways)+len(setKeys)+len(changed))
	for _, g := range gateways {
		scope = append(scope, gatewayapi.StatusKey{Kind: resource.KindGateway, Key: g})
	}
	for _, s := range setKeys {
		scope = append(scope, gatewayapi.StatusKey{Kind: resource.KindListenerSet, Key: s})
	}
	for _, r := range changed {
		scope = append(scope, gatewayapi.StatusKey{Kind: r.Kind, Key: r.Key})
	}
	res := x.merge(p, scope, a.gateways)
	n, _, _ := p.States.Len()
	st.Gateways, st.Routes = n, len(changed)
	st.StatusesChanged = true
	return res, st, true
}
