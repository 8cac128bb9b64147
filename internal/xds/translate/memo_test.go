package translate

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/portico-dev/portico/internal/ir"
)

// sameAsFresh checks that got, from a Translator, is exactly what a fresh
// Translate of gw gives, and that its per-resource versions are the hashes
// of the fresh translation.
func sameAsFresh(t *testing.T, gw *ir.Gateway, got *Resources) {
	t.Helper()
	identical(t, got, mustTranslate(t, gw), "fresh translation")
}

// Copy-on-write edits of an IR: the result shares every object not on the
// path to the edit, as gatewayapi's incremental translation does.

func cowGateway(g *ir.Gateway) *ir.Gateway {
	c := *g
	c.Listeners = append([]*ir.Listener(nil), g.Listeners...)
	c.Clusters = append([]*ir.Cluster(nil), g.Clusters...)
	c.Secrets = append([]*ir.Secret(nil), g.Secrets...)
	return &c
}

// cowVirtualHost returns a copy of g in which virtual host vh of the route
// config of chain fc of listener l is a copy the caller may edit.
func cowVirtualHost(g *ir.Gateway, l, fc, vh int) (*ir.Gateway, *ir.VirtualHost) {
	c := cowGateway(g)
	ll := *c.Listeners[l]
	ll.FilterChains = append([]*ir.FilterChain(nil), ll.FilterChains...)
	chain := *ll.FilterChains[fc]
	rc := *chain.RouteConfig
	rc.VirtualHosts = append([]*ir.VirtualHost(nil), rc.VirtualHosts...)
	v := *rc.VirtualHosts[vh]
	v.Routes = append([]*ir.Route(nil), v.Routes...)
	rc.VirtualHosts[vh] = &v
	chain.RouteConfig = &rc
	ll.FilterChains[fc] = &chain
	c.Listeners[l] = &ll
	return c, &v
}

// withClientValidation returns a copy of g in which chain https-443/a
// (listener 1, chain 1) has the client validation cv.
func withClientValidation(g *ir.Gateway, cv *ir.ClientValidation) *ir.Gateway {
	c := cowGateway(g)
	l := *c.Listeners[1]
	l.FilterChains = append([]*ir.FilterChain(nil), l.FilterChains...)
	fc := *l.FilterChains[1]
	fc.ClientValidation = cv
	l.FilterChains[1] = &fc
	c.Listeners[1] = &l
	return c
}

func TestTranslatorReusesAndMatchesFresh(t *testing.T) {
	x := NewTranslator()
	gw := fullGateway()
	first, err := x.Translate(gw)
	if err != nil {
		t.Fatal(err)
	}
	sameAsFresh(t, gw, first)
	if again, _ := x.Translate(gw); again != first {
		t.Error("the same IR gave new Resources")
	}
	// Equal content in new objects: same Resources, as the version is equal.
	x2 := NewTranslator()
	first2, _ := x2.Translate(fullGateway())
	if again, _ := x2.Translate(fullGateway()); again != first2 {
		t.Error("equal IR gave new Resources")
	}

	steps := []struct {
		name string
		edit func(*ir.Gateway) *ir.Gateway
		// same lists resource names (type/name) whose protos must be the
		// objects of the previous translation.
		same []string
		// unchanged: the output is the same, hence the same Resources.
		unchanged bool
	}{
		{"one route", func(g *ir.Gateway) *ir.Gateway {
			c, v := cowVirtualHost(g, 0, 0, 1)
			r := *v.Routes[0]
			r.Match = ir.Match{Path: prefix("/other")}
			v.Routes[0] = &r
			return c
		}, []string{"L/default/gw/http-80", "L/default/gw/https-443", "R/default/gw/https-443/a", "C/" + clusterA, "E/" + clusterA}, false},
		{"endpoints", func(g *ir.Gateway) *ir.Gateway {
			c := cowGateway(g)
			cl := *c.Clusters[0]
			cl.Endpoints = []ir.Endpoint{{Address: "10.9.9.9", Port: 80}}
			c.Clusters[0] = &cl
			return c
		}, []string{"L/default/gw/http-80", "R/default/gw/http-80", "C/" + clusterA, "E/" + clusterB}, false},
		{"protocol", func(g *ir.Gateway) *ir.Gateway {
			c := cowGateway(g)
			cl := *c.Clusters[2]
			cl.Protocol = ir.UpstreamHTTP2
			c.Clusters[2] = &cl
			return c
		}, []string{"R/default/gw/http-80", "E/" + clusterC, "C/" + clusterA}, false},
		{"cluster removed", func(g *ir.Gateway) *ir.Gateway {
			// Routes naming clusterC now name a cluster that does not exist:
			// they answer 500 and must be translated again.
			c := cowGateway(g)
			c.Clusters = c.Clusters[:2]
			return c
		}, []string{"L/default/gw/http-80", "R/default/gw/https-443/a"}, false},
		{"cluster back", func(g *ir.Gateway) *ir.Gateway {
			c := cowGateway(g)
			c.Clusters = append(c.Clusters, fullGateway().Clusters[2])
			return c
		}, nil, false},
		{"secret", func(g *ir.Gateway) *ir.Gateway {
			c := cowGateway(g)
			s := *c.Secrets[1]
			s.Key = []byte("other key")
			c.Secrets[1] = &s
			return c
		}, []string{"L/default/gw/https-443", "S/" + secretA}, false},
		{"client validation", func(g *ir.Gateway) *ir.Gateway {
			return withClientValidation(g, &ir.ClientValidation{CACertificates: "ca", Mode: ir.ClientValidationAllowValidOnly})
		}, []string{"L/default/gw/http-80", "R/default/gw/https-443/a", "S/" + secretA}, false},
		{"client validation mode", func(g *ir.Gateway) *ir.Gateway {
			return withClientValidation(g, &ir.ClientValidation{CACertificates: "ca", Mode: ir.ClientValidationAllowInsecureFallback})
		}, []string{"L/default/gw/http-80", "R/default/gw/https-443/a"}, false},
		{"client validation equal", func(g *ir.Gateway) *ir.Gateway {
			return withClientValidation(g, &ir.ClientValidation{CACertificates: "ca", Mode: ir.ClientValidationAllowInsecureFallback})
		}, nil, true},
		{"listener port", func(g *ir.Gateway) *ir.Gateway {
			c := cowGateway(g)
			l := *c.Listeners[0]
			l.Port = 8080
			c.Listeners[0] = &l
			return c
		}, []string{"L/default/gw/https-443", "R/default/gw/http-80"}, false},
		{"virtual hosts reordered", func(g *ir.Gateway) *ir.Gateway {
			c, _ := cowVirtualHost(g, 0, 0, 0)
			vhs := c.Listeners[0].FilterChains[0].RouteConfig.VirtualHosts
			vhs[0], vhs[1] = vhs[1], vhs[0]
			return c
		}, nil, true},
		{"virtual host removed", func(g *ir.Gateway) *ir.Gateway {
			c, _ := cowVirtualHost(g, 0, 0, 0)
			rc := c.Listeners[0].FilterChains[0].RouteConfig
			rc.VirtualHosts = rc.VirtualHosts[:1]
			return c
		}, []string{"L/default/gw/http-80"}, false},
	}
	prev := first
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			gw = s.edit(gw)
			got, err := x.Translate(gw)
			if err != nil {
				t.Fatal(err)
			}
			sameAsFresh(t, gw, got)
			if s.unchanged {
				if got != prev {
					t.Fatal("new Resources for the same output")
				}
				return
			}
			if got == prev || got.Version == prev.Version {
				t.Fatal("a change kept the previous Resources")
			}
			for _, id := range s.same {
				if a, b := byID(t, prev, id), byID(t, got, id); a != b {
					t.Errorf("%s translated again", id)
				}
			}
			prev = got
		})
	}
}

// byID finds a resource by "<L|R|C|E|S>/<name>".
func byID(t *testing.T, r *Resources, id string) any {
	t.Helper()
	typ := map[byte]resourcev3.Type{'L': resourcev3.ListenerType, 'R': resourcev3.RouteType, 'C': resourcev3.ClusterType,
		'E': resourcev3.EndpointType, 'S': resourcev3.SecretType}[id[0]]
	for _, res := range r.slice(typ) {
		if resourceNameOf(res) == id[2:] {
			return res
		}
	}
	t.Fatalf("no resource %s", id)
	return nil
}

func TestTranslatorErrorKeepsMemory(t *testing.T) {
	x := NewTranslator()
	gw := fullGateway()
	first, err := x.Translate(gw)
	if err != nil {
		t.Fatal(err)
	}
	bad, v := cowVirtualHost(gw, 0, 0, 0)
	r := *v.Routes[2]
	r.DirectResponse = &ir.DirectResponse{Status: 99}
	v.Routes[2] = &r
	res, err := x.Translate(bad)
	if err != nil || len(res.Problems) != 1 || res.Problems[0].Route != r.Name {
		t.Fatalf("an invalid route: err %v, problems %+v; want it alone left out", err, res)
	}
	// A fresh translation of the same IR leaves out the same route: the
	// memo carries what it dropped.
	if fresh, _ := Translate(bad); fresh.Version != res.Version || !slices.Equal(fresh.Problems, res.Problems) {
		t.Errorf("memo and fresh translations differ: %s %+v, %s %+v", res.Version, res.Problems, fresh.Version, fresh.Problems)
	}
	if again, err := x.Translate(fullGateway()); err != nil || again.Version != first.Version || len(again.Problems) != 0 {
		t.Errorf("after a problem: %v, version %s (want %s), problems %+v", err, again.Version, first.Version, again.Problems)
	}
	// A reused listener still needs its certificates.
	noSecret := cowGateway(gw)
	noSecret.Secrets = noSecret.Secrets[:1]
	if res, err := x.Translate(noSecret); err != nil || len(res.Problems) == 0 || res.Problems[0].Listener == "" {
		t.Errorf("listener reused although its certificate is gone: %v %+v", err, res)
	}
	x.Forget(func(string) bool { return false })
	if len(x.memos) != 0 {
		t.Error("Forget kept memories")
	}
}

// TestTranslatorRandomEdits applies random copy-on-write edits to a large
// generated IR and compares every translation with a fresh one.
func TestTranslatorRandomEdits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := NewTranslator()
	gw := generatedGateway(500)
	if _, err := x.Translate(gw); err != nil {
		t.Fatal(err)
	}
	nvh := len(gw.Listeners[0].FilterChains[0].RouteConfig.VirtualHosts)
	for i := 0; i < 60; i++ {
		switch rng.IntN(4) {
		case 0, 1: // edit a route
			c, v := cowVirtualHost(gw, 0, 0, rng.IntN(nvh))
			k := rng.IntN(len(v.Routes))
			r := *v.Routes[k]
			r.Match = ir.Match{Path: prefix(fmt.Sprintf("/edit/%d", i))}
			if rng.IntN(3) == 0 {
				r.Forward = forwardTo(c.Clusters[rng.IntN(len(c.Clusters))].Name)
			}
			v.Routes[k] = &r
			gw = c
		case 2: // endpoints
			c := cowGateway(gw)
			k := rng.IntN(len(c.Clusters))
			cl := *c.Clusters[k]
			cl.Endpoints = []ir.Endpoint{{Address: fmt.Sprintf("10.1.%d.%d", i, k%256), Port: 80}}
			c.Clusters[k] = &cl
			gw = c
		case 3: // remove or restore the last cluster
			c := cowGateway(gw)
			if len(c.Clusters) == len(generatedGateway(500).Clusters) {
				c.Clusters = c.Clusters[:len(c.Clusters)-1]
			} else {
				c.Clusters = generatedGateway(500).Clusters
			}
			gw = c
		}
		got, err := x.Translate(gw)
		if err != nil {
			t.Fatal(err)
		}
		sameAsFresh(t, gw, got)
		checkWire(t, got)
	}
}

func resourceNameOf(r types.Resource) string { return cachev3.GetResourceName(r) }

// clusterMemo.with keeps every earlier memo as it was and reads like a
// map with the changes applied, across overlay folds.
func TestClusterMemoWith(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	base := map[string]*clusterEntry{}
	for i := range 300 {
		base[fmt.Sprint("c", i)] = &clusterEntry{}
	}
	type version struct {
		m    clusterMemo
		want map[string]*clusterEntry
	}
	versions := []version{{clusterMemo{base: base}, maps.Clone(base)}}
	for range 400 {
		last := versions[len(versions)-1]
		changed := map[string]*clusterEntry{}
		for range rng.IntN(5) {
			changed[fmt.Sprint("c", rng.IntN(300))] = &clusterEntry{}
		}
		want := maps.Clone(last.want)
		maps.Copy(want, changed)
		versions = append(versions, version{last.m.with(changed), want})
	}
	// A memo with nothing yet takes changes too.
	if got := (clusterMemo{}).with(map[string]*clusterEntry{"a": base["c1"]}).get("a"); got != base["c1"] {
		t.Errorf("empty memo with a change: %p", got)
	}
	for i, v := range versions {
		if n := len(v.m.over); n > overlayMax {
			t.Fatalf("version %d: overlay of %d entries", i, n)
		}
		for name, ce := range v.want {
			if got := v.m.get(name); got != ce {
				t.Fatalf("version %d: %s is %p, want %p", i, name, got, ce)
			}
		}
	}
}

// Clusters added and removed (a route to a new Service, a Service no
// longer used): the result is that of a fresh translation, and with the
// IR sorted by name (as gatewayapi makes it) the cluster memo takes each
// change as an overlay instead of being rebuilt (it folds now and then).
// Unsorted IR takes the full path, with the same result.
func TestTranslatorClustersAddedAndRemoved(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	all := generatedGateway(500).Clusters
	byName := func(a, b *ir.Cluster) int { return strings.Compare(a.Name, b.Name) }
	for _, sorted := range []bool{true, false} {
		x := NewTranslator()
		gw := cowGateway(generatedGateway(500))
		if !sorted {
			slices.Reverse(gw.Clusters)
		}
		if _, err := x.Translate(gw); err != nil {
			t.Fatal(err)
		}
		const edits = 40
		shared := 0
		for i := range edits {
			c := cowGateway(gw)
			switch rng.IntN(3) {
			case 0: // one or two clusters removed
				for range 1 + rng.IntN(2) {
					k := rng.IntN(len(c.Clusters))
					c.Clusters = slices.Delete(c.Clusters, k, k+1)
				}
			case 1: // a new cluster, and a route to it
				nc := &ir.Cluster{Name: fmt.Sprintf("bench/svc-%05d-new%d/80", rng.IntN(len(all)), i), Protocol: ir.UpstreamHTTP2,
					Endpoints: []ir.Endpoint{{Address: fmt.Sprintf("10.9.%d.1", i), Port: 80}}}
				c.Clusters = append(c.Clusters, nc)
				vhosts := c.Listeners[0].FilterChains[0].RouteConfig.VirtualHosts
				cc, v := cowVirtualHost(c, 0, 0, rng.IntN(len(vhosts)))
				k := rng.IntN(len(v.Routes))
				r := *v.Routes[k]
				r.Forward = forwardTo(nc.Name)
				v.Routes[k] = &r
				c = cc
			case 2: // a removed cluster comes back, with other endpoints
				for _, ac := range all {
					if !slices.ContainsFunc(c.Clusters, func(x *ir.Cluster) bool { return x.Name == ac.Name }) {
						cl := *ac
						cl.Endpoints = []ir.Endpoint{{Address: "10.8.0.1", Port: 80}}
						c.Clusters = append(c.Clusters, &cl)
						break
					}
				}
			}
			if sorted {
				slices.SortFunc(c.Clusters, byName)
			}
			gw = c
			prev := x.memos[gw.Key()]
			got, err := x.Translate(gw)
			if err != nil {
				t.Fatal(err)
			}
			sameAsFresh(t, gw, got)
			checkWire(t, got)
			next := x.memos[gw.Key()]
			if sameMap(prev.clusters.base, next.clusters.base) {
				shared++
			}
			for _, c := range gw.Clusters {
				if ce := next.clusters.get(c.Name); ce == nil || ce.protocol != c.Protocol || !slices.Equal(ce.endpoints, c.Endpoints) {
					t.Fatalf("edit %d: memo entry of cluster %s is %+v", i, c.Name, ce)
				}
			}
			for _, c := range all {
				if !slices.ContainsFunc(gw.Clusters, func(x *ir.Cluster) bool { return x.Name == c.Name }) && next.clusters.get(c.Name) != nil {
					t.Errorf("edit %d: removed cluster %s still in the memo", i, c.Name)
				}
			}
			for name, ce := range next.clusters.base {
				if ce == nil {
					t.Errorf("edit %d: the memo's base keeps a removed cluster %s", i, name)
				}
			}
		}
		// Folding the overlay (at most every overlayMax/3 edits here)
		// makes a new base; otherwise it is shared.
		if sorted && shared < edits-3 {
			t.Errorf("sorted: the cluster memo was shared across %d of %d edits", shared, edits)
		}
		if !sorted && shared > edits/2 {
			t.Errorf("unsorted: the cluster memo was shared across %d of %d edits, want it rebuilt", shared, edits)
		}
	}
}

// A route config is served only while a served listener refers to it: a
// listener left out (Problem) takes its route configs with it, unless
// another listener still uses them, fresh or with the other listener's
// translation reused.
func TestDroppedListenerTakesItsRouteConfigs(t *testing.T) {
	good := fullGateway()
	// The first HTTPS chain shares the HTTP listener's route config.
	https := *good.Listeners[1]
	https.FilterChains = append([]*ir.FilterChain(nil), https.FilterChains...)
	shared := *https.FilterChains[0]
	shared.RouteConfig = good.Listeners[0].FilterChains[0].RouteConfig
	https.FilterChains[0] = &shared
	good.Listeners[1] = &https
	all := names(mustTranslate(t, good).Routes())

	breakHTTP := func(g *ir.Gateway) { // a port Envoy refuses
		l := *g.Listeners[0]
		l.Port = 70000
		g.Listeners[0] = &l
	}
	breakHTTPS := func(g *ir.Gateway) { // two chains for one server name
		l := *g.Listeners[1]
		l.FilterChains = append([]*ir.FilterChain(nil), l.FilterChains...)
		fc := *l.FilterChains[1]
		fc.ServerNames = l.FilterChains[0].ServerNames
		l.FilterChains[1] = &fc
		g.Listeners[1] = &l
	}
	cases := map[string]struct {
		breaks    []func(*ir.Gateway)
		listeners []string
		routes    []string
	}{
		"both left out": {[]func(*ir.Gateway){breakHTTP, breakHTTPS}, nil, nil},
		"HTTP left out, its route config shared": {[]func(*ir.Gateway){breakHTTP},
			[]string{"default/gw/https-443"}, all},
		"HTTPS left out": {[]func(*ir.Gateway){breakHTTPS},
			[]string{"default/gw/http-80"}, []string{"default/gw/http-80"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			bad := cowGateway(good)
			for _, b := range c.breaks {
				b(bad)
			}
			fresh := mustTranslate(t, bad)
			if len(fresh.Problems) != len(c.breaks) {
				t.Fatalf("problems %+v, want %d", fresh.Problems, len(c.breaks))
			}
			if got := names(fresh.Listeners); !slices.Equal(got, c.listeners) {
				t.Errorf("listeners %v, want %v", got, c.listeners)
			}
			if got := names(fresh.Routes()); !slices.Equal(got, c.routes) {
				t.Errorf("route configs %v, want %v", got, c.routes)
			}
			checkValid(t, fresh)
			// After the good Gateway, the unbroken listener is reused.
			x := NewTranslator()
			if _, err := x.Translate(good); err != nil {
				t.Fatal(err)
			}
			got, err := x.Translate(bad)
			if err != nil {
				t.Fatal(err)
			}
			checkValid(t, got)
			sameAsFresh(t, bad, got)
		})
	}
}
