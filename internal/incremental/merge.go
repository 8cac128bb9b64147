package incremental

import (
	"slices"
	"strings"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/proxyspec"
	"github.com/portico-dev/portico/internal/resource"
)

// merge combines the previous result with p, which holds the IR and
// infrastructure of gateways and the statuses of scope: a status of scope
// missing from p is removed. The statuses of the previous result outside
// scope are shared, not copied.
func (x *Translator) merge(p *gatewayapi.Partial, scope []gatewayapi.StatusKey, gateways set[resource.Key]) *gatewayapi.Result {
	res := &gatewayapi.Result{
		StatusSet: x.res.StatusSet.Replace(p.Statuses, scope),
		Gateways: mergeSorted(x.res.Gateways, p.Gateways, func(g **ir.Gateway) bool {
			return hasKey(gateways, resource.Key{Namespace: (*g).Namespace, Name: (*g).Name})
		}, func(a, b **ir.Gateway) int { return compareNames((*a).Namespace, (*a).Name, (*b).Namespace, (*b).Name) }),
		Infra: mergeSorted(x.res.Infra, p.Infra, func(s *proxyspec.Spec) bool {
			return hasKey(gateways, resource.Key{Namespace: s.Gateway.Namespace, Name: s.Gateway.Name})
		}, func(a, b *proxyspec.Spec) int {
			return compareNames(a.Gateway.Namespace, a.Gateway.Name, b.Gateway.Namespace, b.Gateway.Name)
		}),
	}
	byKey := make(map[resource.Key]*ir.Gateway, len(p.Gateways))
	for _, gw := range p.Gateways {
		byKey[resource.Key{Namespace: gw.Namespace, Name: gw.Name}] = gw
	}
	for g := range gateways {
		gw := byKey[g]
		if gw == nil {
			delete(x.cache.assemblies, g)
			x.idx.setServices(g, nil)
			continue
		}
		if prev := x.gateway(g); prev != nil && sameClusters(prev.Clusters, gw.Clusters) {
			continue // the same Services
		}
		x.idx.setServices(g, servicesOf(gw))
	}
	return res
}

// patchEndpoints updates the endpoints of the clusters of the Services in
// a.endpoints, in the IR of Gateways not translated again.
func (x *Translator) patchEndpoints(snap *resource.Snapshot, res *gatewayapi.Result, a *affected) (*gatewayapi.Result, int) {
	targets := set[resource.Key]{}
	for svc := range a.endpoints {
		for g := range x.idx.serviceGateways[svc] {
			if !hasKey(a.gateways, g) {
				targets.add(g)
			}
		}
	}
	if len(targets) == 0 {
		return res, 0
	}
	svcs := sortedKeys(a.endpoints)
	var gws []*ir.Gateway
	n := 0
	for i, gw := range res.Gateways {
		if !hasKey(targets, resource.Key{Namespace: gw.Namespace, Name: gw.Name}) {
			continue
		}
		p := gatewayapi.PatchEndpoints(snap, gw, svcs, x.cache)
		if p == gw {
			continue
		}
		if gws == nil {
			gws = slices.Clone(res.Gateways)
		}
		gws[i] = p
		n++
	}
	if gws == nil {
		return res, 0
	}
	out := *res
	out.Gateways = gws
	return &out, n
}

// gateway returns the IR of Gateway k in the previous result.
func (x *Translator) gateway(k resource.Key) *ir.Gateway {
	gws := x.res.Gateways
	i, ok := slices.BinarySearchFunc(gws, k, func(g *ir.Gateway, k resource.Key) int {
		return compareNames(g.Namespace, g.Name, k.Namespace, k.Name)
	})
	if !ok {
		return nil
	}
	return gws[i]
}

// sameClusters reports whether a and b are the same slice.
func sameClusters(a, b []*ir.Cluster) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// servicesOf lists the Services of a Gateway's clusters.
func servicesOf(gw *ir.Gateway) []resource.Key {
	out := make([]resource.Key, 0, len(gw.Clusters))
	for _, c := range gw.Clusters {
		k := resource.Key{Namespace: c.ServiceNamespace, Name: c.ServiceName}
		if len(out) == 0 || out[len(out)-1] != k {
			out = append(out, k)
		}
	}
	return out
}

func compareNames(nsa, na, nsb, nb string) int {
	if c := strings.Compare(nsa, nsb); c != 0 {
		return c
	}
	return strings.Compare(na, nb)
}

// mergeSorted merges prev, without its elements in scope, with part, both
// sorted by cmp, into a new sorted slice.
func mergeSorted[T any](prev, part []T, inScope func(*T) bool, cmp func(a, b *T) int) []T {
	out := make([]T, 0, len(prev)+len(part))
	j := 0
	for i := range prev {
		if inScope(&prev[i]) {
			continue
		}
		for j < len(part) && cmp(&part[j], &prev[i]) < 0 {
			out = append(out, part[j])
			j++
		}
		out = append(out, prev[i])
	}
	out = append(out, part[j:]...)
	if len(out) == 0 {
		return nil // as a full translation gives
	}
	return out
}
