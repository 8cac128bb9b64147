package server

import (
	"fmt"
	"sort"
	"strings"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/portico-dev/portico/internal/xds/translate"
)

// typeDiff is how the resources of one type change in an update.
type typeDiff struct {
	changed []types.Resource // added or changed
	// names are the names of the changed resources when changed is not
	// given (route tables not assembled: see gatewayCache).
	names   []string
	removed []string
}

// changedNames returns the names of the added or changed resources.
func (d typeDiff) changedNames() []string {
	if d.names != nil {
		return d.names
	}
	out := make([]string, len(d.changed))
	for i, res := range d.changed {
		out[i] = cachev3.GetResourceName(res)
	}
	return out
}

// refKey names a resource of a type.
type refKey struct{ typ, name string }

// refIndex keeps the references of a Gateway's listeners to route
// configurations, and of its clusters to load assignments, so that
// each update can be checked in proportion to its size for what
// cachev3.Snapshot.Consistent checks over all resources: every referenced
// route configuration and load assignment is served, and no other. The
// resources set before are consistent, so only the references and
// resources an update touches need checking.
type refIndex struct {
	count map[refKey]int      // references to a route configuration or load assignment
	from  map[refKey][]refKey // references of a listener or cluster
}

// refPlan is a checked update of a refIndex.
type refPlan struct {
	delta map[refKey]int
	from  map[refKey][]refKey // nil value: the referrer is removed
}

// referrers are the types whose resources reference others; targets the
// types the references point to.
var (
	referrers = []resourcev3.Type{resourcev3.ListenerType, resourcev3.ClusterType, resourcev3.ScopedRouteType}
	targets   = []resourcev3.Type{resourcev3.RouteType, resourcev3.EndpointType}
)

// plan computes the reference changes of an update to next, given the
// changes of each type, and checks that next is consistent.
func (x *refIndex) plan(diffs map[resourcev3.Type]typeDiff, next *translate.Resources) (refPlan, error) {
	p := refPlan{delta: map[refKey]int{}, from: map[refKey][]refKey{}}
	for _, t := range referrers {
		d := diffs[t]
		for _, res := range d.changed {
			k := refKey{t, cachev3.GetResourceName(res)}
			for _, old := range x.from[k] {
				p.delta[old]--
			}
			refs := referencesOf(res)
			for _, r := range refs {
				p.delta[r]++
			}
			p.from[k] = refs
		}
		for _, name := range d.removed {
			k := refKey{t, name}
			for _, old := range x.from[k] {
				p.delta[old]--
			}
			p.from[k] = nil
		}
	}
	var problems []string
	check := func(k refKey) {
		n, has := x.count[k]+p.delta[k], next.Has(k.typ, k.name)
		switch {
		case n > 0 && !has:
			problems = append(problems, fmt.Sprintf("%s %q is referenced but missing", shortType(k.typ), k.name))
		case n <= 0 && has:
			problems = append(problems, fmt.Sprintf("%s %q is not referenced", shortType(k.typ), k.name))
		}
	}
	for k := range p.delta {
		check(k)
	}
	for _, t := range targets {
		for _, name := range diffs[t].changedNames() {
			if k := (refKey{t, name}); p.delta[k] == 0 {
				check(k)
			}
		}
		for _, name := range diffs[t].removed {
			if k := (refKey{t, name}); p.delta[k] == 0 {
				check(k)
			}
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		if len(problems) > 5 {
			problems = append(problems[:5], fmt.Sprintf("and %d more", len(problems)-5))
		}
		return refPlan{}, fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return p, nil
}

// commit applies a plan returned by plan.
func (x *refIndex) commit(p refPlan) {
	if x.count == nil {
		x.count, x.from = map[refKey]int{}, map[refKey][]refKey{}
	}
	for k, d := range p.delta {
		if n := x.count[k] + d; n > 0 {
			x.count[k] = n
		} else {
			delete(x.count, k)
		}
	}
	for k, refs := range p.from {
		if refs == nil {
			delete(x.from, k)
		} else {
			x.from[k] = refs
		}
	}
}

// referencesOf returns the route configurations and load assignments res
// references.
func referencesOf(res types.Resource) []refKey {
	refs := cachev3.GetResourceReferences(map[string]types.ResourceWithTTL{"": {Resource: res}})
	var out []refKey
	for _, t := range targets {
		for name := range refs[t] {
			out = append(out, refKey{t, name})
		}
	}
	if out == nil {
		out = []refKey{}
	}
	return out
}

func shortType(t string) string {
	if i := strings.LastIndexByte(t, '.'); i >= 0 {
		return t[i+1:]
	}
	return t
}
