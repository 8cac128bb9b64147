package controller

import (
	"slices"
	"sort"
	"strings"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/proxysync"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/status"
)

// routeTracer is the proxysync.Tracer of a leader term: it finds the
// routes behind rejected resources in the IR of the latest translation.
// Its index is built on the first NACK after each translation and used by
// the collector's goroutine only, so a term without NACKs costs nothing.
type routeTracer struct {
	latest func() *gatewayapi.Result
	of     *gatewayapi.Result
	index  map[string]*gatewayRoutes // by Gateway "ns/name"
}

// gatewayRoutes are the routes of one Gateway: by the clusters they send
// to, and by their IR names' route part ("httproute/ns/name").
type gatewayRoutes struct {
	byCluster map[string][]proxysync.RouteRef
	routes    map[string]proxysync.RouteRef
	// byRegex are the routes by the regular expressions of their matches:
	// Envoy quotes the one it refuses ("regex '…' RE2 program size …").
	byRegex map[string][]proxysync.RouteRef
}

func (t *routeTracer) trace(gateway, _ string, resources []string, errText string) []proxysync.RouteRef {
	if r := t.latest(); r != t.of {
		t.of, t.index = r, nil
	}
	if t.of == nil {
		return nil
	}
	if t.index == nil {
		t.index = map[string]*gatewayRoutes{}
		for _, gw := range t.of.Gateways {
			t.index[gw.Key()] = indexRoutes(gw)
		}
	}
	g := t.index[gateway]
	if g == nil {
		return nil
	}
	seen := map[proxysync.RouteRef]bool{}
	var out []proxysync.RouteRef
	add := func(r proxysync.RouteRef) {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	for _, name := range resources {
		for _, r := range g.byCluster[name] {
			add(r)
		}
	}
	// Clusters named in the error ("Error adding/updating cluster(s) …"),
	// whatever the report kept of the rejected responses.
	if errText != "" {
		for name, rs := range g.byCluster {
			if proxysync.Mentions(errText, name) {
				for _, r := range rs {
					add(r)
				}
			}
		}
	}
	for re, rs := range g.byRegex {
		if strings.Contains(errText, "'"+re+"'") {
			for _, r := range rs {
				add(r)
			}
		}
	}
	// Route names quoted in the error ("httproute/ns/name/rule/0/…").
	for _, prefix := range routePrefixes {
		for rest := errText; ; {
			i := strings.Index(rest, prefix)
			if i < 0 {
				break
			}
			rest = rest[i:]
			parts := strings.SplitN(rest, "/", 4)
			rest = rest[len(prefix):]
			if len(parts) < 3 {
				continue
			}
			if r, ok := g.routes[parts[0]+"/"+parts[1]+"/"+parts[2]]; ok {
				add(r)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// routePrefixes are the IR name prefixes of the route kinds
// ("httproute/"), and routeKinds their kinds by prefix.
var routePrefixes, routeKinds = func() ([]string, map[string]resource.Kind) {
	var ps []string
	ks := map[string]resource.Kind{}
	for _, k := range resource.RouteKinds {
		p := strings.ToLower(k.String()) + "/"
		ps = append(ps, p)
		ks[p] = k
	}
	return ps, ks
}()

// routeOf parses the route of an IR name "<kind>/<ns>/<name>/rule/…".
func routeOf(irName string) (string, proxysync.RouteRef, bool) {
	parts := strings.SplitN(irName, "/", 4)
	if len(parts) < 3 {
		return "", proxysync.RouteRef{}, false
	}
	k, ok := routeKinds[parts[0]+"/"]
	if !ok {
		return "", proxysync.RouteRef{}, false
	}
	return parts[0] + "/" + parts[1] + "/" + parts[2], proxysync.RouteRef{Kind: k.String(), Namespace: parts[1], Name: parts[2]}, true
}

func indexRoutes(gw *ir.Gateway) *gatewayRoutes {
	g := &gatewayRoutes{byCluster: map[string][]proxysync.RouteRef{}, routes: map[string]proxysync.RouteRef{}, byRegex: map[string][]proxysync.RouteRef{}}
	seen := map[string]map[proxysync.RouteRef]bool{}
	seenRegex := map[string]map[proxysync.RouteRef]bool{}
	regex := func(irName, re string) {
		_, r, ok := routeOf(irName)
		if !ok || re == "" {
			return
		}
		if seenRegex[re] == nil {
			seenRegex[re] = map[proxysync.RouteRef]bool{}
		}
		if !seenRegex[re][r] {
			seenRegex[re][r] = true
			g.byRegex[re] = append(g.byRegex[re], r)
		}
	}
	use := func(irName, cluster string) {
		key, r, ok := routeOf(irName)
		if !ok {
			return
		}
		g.routes[key] = r
		if cluster == "" {
			return
		}
		if seen[cluster] == nil {
			seen[cluster] = map[proxysync.RouteRef]bool{}
		}
		if !seen[cluster][r] {
			seen[cluster][r] = true
			g.byCluster[cluster] = append(g.byCluster[cluster], r)
		}
	}
	for _, l := range gw.Listeners {
		if l.UDP != nil {
			for _, b := range l.UDP.Backends {
				use(l.UDP.Name, b.Cluster)
			}
		}
		for _, fc := range l.FilterChains {
			if fc.TCP != nil {
				for _, b := range fc.TCP.Backends {
					use(fc.TCP.Name, b.Cluster)
				}
			}
			if fc.RouteConfig == nil {
				continue
			}
			for _, vh := range fc.RouteConfig.VirtualHosts {
				for _, rt := range vh.Routes {
					use(rt.Name, "")
					if p := rt.Match.Path; p != nil && p.Type == ir.PathRegex {
						regex(rt.Name, p.Value)
					}
					for _, m := range append(slices.Clone(rt.Match.Headers), rt.Match.QueryParams...) {
						if m.Type == ir.StringRegex {
							regex(rt.Name, m.Value)
						}
					}
					if rt.Forward == nil {
						continue
					}
					for _, b := range rt.Forward.Backends {
						use(rt.Name, b.Cluster)
					}
					for _, m := range rt.Forward.Mirrors {
						use(rt.Name, m.Cluster)
					}
				}
			}
		}
	}
	return g
}

// routeConditions converts the collector's traced route conditions into
// the status writer's, by status key; an empty, non-nil map when there are
// none (the source has reported: routes have no condition).
func routeConditions(in map[proxysync.RouteRef][]proxysync.RouteCondition) map[string][]status.RouteParentCondition {
	out := make(map[string][]status.RouteParentCondition, len(in))
	for r, cs := range in {
		for _, c := range cs {
			out[r.String()] = append(out[r.String()], status.RouteParentCondition{Gateway: c.Gateway, Condition: c.Condition})
		}
	}
	return out
}
