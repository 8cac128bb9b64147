package translate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/portico-dev/portico/internal/ir"
)

var splitOpts = Options{RouteSplit: RouteSplitHostname}

// splitGateway is fullGateway with exact hostnames only on its HTTP
// listener: "a.example.com" with every kind of route, "B.Example.com"
// (upper case in the IR) and "c.example.com" with a large direct response.
func splitGateway() *ir.Gateway {
	gw := fullGateway()
	rc := gw.Listeners[0].FilterChains[0].RouteConfig
	any := rc.VirtualHosts[0]
	big := strings.Repeat("x", 5000)
	rc.VirtualHosts = []*ir.VirtualHost{
		{Name: "a", Hostname: "a.example.com", Routes: any.Routes},
		{Name: "b", Hostname: "B.Example.com", Routes: []*ir.Route{{Name: "b-root", Forward: forwardTo(clusterA)}}},
		{Name: "c", Hostname: "c.example.com", Routes: []*ir.Route{{Name: "c-big", DirectResponse: &ir.DirectResponse{Status: 200, Body: big}}}},
	}
	return gw
}

func mustTranslateWith(t testing.TB, gw *ir.Gateway, opts Options) *Resources {
	t.Helper()
	res, err := TranslateWith(gw, opts)
	if err != nil {
		t.Fatalf("TranslateWith: %v", err)
	}
	return res
}

// checkValid checks every resource's validation rules (of the decoded
// form: route tables and load assignments are kept encoded), the wire
// forms (checkWire) and the consistency of the snapshot (every route
// config referenced by a listener or a scope exists, and no other).
func checkValid(t *testing.T, res *Resources) {
	t.Helper()
	for _, r := range res.All() {
		d, err := Decode(r)
		if err != nil {
			t.Fatalf("%T %s: %v", r, cachev3.GetResourceName(r), err)
		}
		if err := d.(validator).ValidateAll(); err != nil {
			t.Errorf("%T %s: %v", r, cachev3.GetResourceName(r), err)
		}
	}
	checkWire(t, res)
	snap, err := res.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Consistent(); err != nil {
		t.Fatal(err)
	}
}

func TestSplitByHostname(t *testing.T) {
	gw := splitGateway()
	single := mustTranslateWith(t, gw, Options{})
	res := mustTranslateWith(t, gw, splitOpts)
	checkValid(t, res)
	if res.Version == single.Version {
		t.Error("the split has the version of the single table")
	}

	// The HTTP listener's connection manager selects a scope by host.
	l := find[*listenerv3.Listener](t, res.Listeners, "default/gw/http-80")
	h := hcmOf(t, l.FilterChains[0])
	sr := h.GetScopedRoutes()
	if sr == nil || h.GetRds() != nil {
		t.Fatalf("route specifier = %v", h.RouteSpecifier)
	}
	if sr.Name != "default/gw/http-80" || sr.GetScopedRds().GetScopedRdsConfigSource().GetAds() == nil ||
		sr.GetRdsConfigSource().GetAds() == nil || sr.GetScopedRouteConfigurationsList() != nil {
		t.Errorf("scoped routes = %v", sr)
	}
	frags := sr.GetScopeKeyBuilder().GetFragments()
	if len(frags) != 1 {
		t.Fatalf("key fragments = %v", frags)
	}
	if x := frags[0].GetHeaderValueExtractor(); x.GetName() != ":authority" || x.GetElementSeparator() != ":" || x.GetIndex() != 0 ||
		x.GetExtractType() == nil {
		t.Errorf("key builder = %v", x)
	}
	// The rest of the connection manager is the single table's.
	hs := hcmOf(t, find[*listenerv3.Listener](t, single.Listeners, "default/gw/http-80").FilterChains[0])
	h.RouteSpecifier, hs.RouteSpecifier = nil, nil
	if !proto.Equal(h, hs) {
		t.Errorf("connection manager differs beyond its routes:\n%v\n%v", h, hs)
	}

	// One scope and one route config per hostname; the route config holds
	// the single table's virtual host.
	hosts := []string{"a.example.com", "b.example.com", "c.example.com"}
	if got := names(res.ScopedRoutes); !slices.Equal(got, prefixed("default/gw/http-80/", hosts)) {
		t.Errorf("scoped routes %v", got)
	}
	table := find[*routev3.RouteConfiguration](t, single.Routes, "default/gw/http-80")
	for i, host := range hosts {
		name := "default/gw/http-80/" + host
		sc := find[*routev3.ScopedRouteConfiguration](t, res.ScopedRoutes, name)
		keys := sc.GetKey().GetFragments()
		if sc.RouteConfigurationName != name || len(keys) != 1 || keys[0].GetStringKey() != host || sc.OnDemand || sc.RouteConfiguration != nil {
			t.Errorf("scope %s = %v", name, sc)
		}
		rc := find[*routev3.RouteConfiguration](t, res.Routes, name)
		if len(rc.VirtualHosts) != 1 || !proto.Equal(rc.VirtualHosts[0], vhost(t, table, string('a'+rune(i)))) {
			t.Errorf("route config %s has virtual hosts %v", name, rc.VirtualHosts)
		}
		if !rc.IgnorePortInHostMatching || rc.ValidateClusters.GetValue() {
			t.Errorf("route config %s = %v", name, rc)
		}
		if big := rc.GetMaxDirectResponseBodySizeBytes(); (host == "c.example.com") != (big != nil) || (big != nil && big.Value != 5000) {
			t.Errorf("route config %s: max direct response body %v", name, big)
		}
	}
	// Nothing else changes: the HTTPS listener, its route configs, the
	// clusters and secrets are the single table's.
	for _, typ := range []resourcev3.Type{resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.SecretType} {
		if res.TypeVersion(typ) != single.TypeVersion(typ) {
			t.Errorf("%s differ", typ)
		}
	}
	for _, n := range []string{"default/gw/https-443/a", "default/gw/https-443/b", "default/gw/https-443/any"} {
		if res.ResourceVersions(resourcev3.RouteType)[n] != single.ResourceVersions(resourcev3.RouteType)[n] {
			t.Errorf("route config %s differs", n)
		}
	}
	wantRoutes := append(prefixed("default/gw/http-80/", hosts), "default/gw/https-443/a", "default/gw/https-443/any", "default/gw/https-443/b")
	if got := names(res.Routes); !slices.Equal(got, wantRoutes) {
		t.Errorf("route configs %v, want %v", got, wantRoutes)
	}
	if bt := res.ByType(); len(bt) != 6 || len(bt[resourcev3.ScopedRouteType]) != 3 {
		t.Errorf("ByType has %d types", len(bt))
	}
	if _, ok := single.ByType()[resourcev3.ScopedRouteType]; ok {
		t.Error("ByType of a translation without split lists scoped routes")
	}
}

func prefixed(p string, s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = p + v
	}
	return out
}

// Names and versions depend on the content only.
func TestSplitDeterministic(t *testing.T) {
	a := mustTranslateWith(t, splitGateway(), splitOpts)
	gw := splitGateway()
	slices.Reverse(gw.Listeners[0].FilterChains[0].RouteConfig.VirtualHosts)
	slices.Reverse(gw.Listeners)
	identical(t, mustTranslateWith(t, gw, splitOpts), a, "translation in IR order")
}

// A listener that cannot be split, or several that could, keep the single
// table: the output is exactly that of a translation without split.
func TestSplitNotApplied(t *testing.T) {
	withHost := func(host string) *ir.Gateway {
		gw := splitGateway()
		rc := gw.Listeners[0].FilterChains[0].RouteConfig
		rc.VirtualHosts = append(rc.VirtualHosts, &ir.VirtualHost{Name: "w", Hostname: host,
			Routes: []*ir.Route{{Name: "w-root", Forward: forwardTo(clusterC)}}})
		return gw
	}
	twoHTTP := splitGateway()
	second := *twoHTTP.Listeners[0]
	second.Name, second.Port = "http-8080", 8080
	second.FilterChains = []*ir.FilterChain{{Name: "http-8080", RouteConfig: &ir.RouteConfig{Name: "http-8080",
		VirtualHosts: []*ir.VirtualHost{{Name: "d", Hostname: "d.example.com", Routes: []*ir.Route{{Name: "d-root", Forward: forwardTo(clusterA)}}}}}}}
	twoHTTP.Listeners = append(twoHTTP.Listeners, &second)
	for name, gw := range map[string]*ir.Gateway{
		"wildcard host":  withHost("*.example.com"),
		"catch-all":      withHost("*"),
		"empty host":     withHost(""),
		"fullGateway":    fullGateway(),
		"two listeners":  twoHTTP,
		"https only":     {Namespace: "default", Name: "gw", Listeners: fullGateway().Listeners[1:], Clusters: fullGateway().Clusters, Secrets: fullGateway().Secrets},
		"no HTTP routes": {Namespace: "default", Name: "gw"},
	} {
		t.Run(name, func(t *testing.T) {
			res, single := mustTranslateWith(t, gw, splitOpts), mustTranslate(t, gw)
			if res.Version != single.Version || len(res.ScopedRoutes) != 0 {
				t.Fatalf("version %s (%d scopes), without split %s", res.Version, len(res.ScopedRoutes), single.Version)
			}
			if len(res.ByType()[resourcev3.ScopedRouteType]) != 0 {
				t.Error("scoped routes listed")
			}
		})
	}
	// With the split on, ByType lists the scoped routes even when there
	// are none, so that a snapshot removes those a proxy still holds.
	if s, ok := mustTranslateWith(t, fullGateway(), splitOpts).ByType()[resourcev3.ScopedRouteType]; !ok || s == nil {
		t.Error("ByType without the scoped route type")
	}
}

// An HTTP listener without virtual hosts is split: its first hostname will
// not change the Listener.
func TestSplitEmptyListener(t *testing.T) {
	gw := splitGateway()
	gw.Listeners[0].FilterChains[0].RouteConfig.VirtualHosts = nil
	res := mustTranslateWith(t, gw, splitOpts)
	checkValid(t, res)
	l := find[*listenerv3.Listener](t, res.Listeners, "default/gw/http-80")
	if hcmOf(t, l.FilterChains[0]).GetScopedRoutes() == nil || len(res.ScopedRoutes) != 0 {
		t.Errorf("listener %v, %d scopes", l, len(res.ScopedRoutes))
	}
	if got := names(res.Routes); slices.ContainsFunc(got, func(n string) bool { return strings.HasPrefix(n, "default/gw/http-80") }) {
		t.Errorf("route configs %v", got)
	}
}

// changedNames returns, per type, the names of the resources of cur that
// are new or have another version than in prev, and of those removed.
func changedNames(prev, cur *Resources) map[resourcev3.Type][]string {
	out := map[resourcev3.Type][]string{}
	pv, cv := prev.VersionMap(), cur.VersionMap()
	for _, typ := range allTypes {
		for name, v := range cv[typ] {
			if pv[typ][name] != v {
				out[typ] = append(out[typ], name)
			}
		}
		for name := range pv[typ] {
			if _, ok := cv[typ][name]; !ok {
				out[typ] = append(out[typ], "-"+name)
			}
		}
		slices.Sort(out[typ])
	}
	return out
}

func sameAsFreshWith(t *testing.T, gw *ir.Gateway, got *Resources) {
	t.Helper()
	identical(t, got, mustTranslateWith(t, gw, splitOpts), "fresh translation")
}

// A Translator with the split: a changed route re-sends its hostname's
// route config only; a new hostname adds a scope and a route config and
// leaves the Listener; a wildcard host turns the split off and back on.
func TestSplitTranslatorChanges(t *testing.T) {
	x := NewTranslatorWith(splitOpts)
	gw := generatedGateway(1000) // hosts host-00000 … host-00009
	prev, err := x.Translate(gw)
	if err != nil {
		t.Fatal(err)
	}
	sameAsFreshWith(t, gw, prev)
	if len(prev.ScopedRoutes) != 10 || len(prev.Routes) != 10 {
		t.Fatalf("%d scopes, %d route configs", len(prev.ScopedRoutes), len(prev.Routes))
	}
	steps := []struct {
		name string
		edit func(*ir.Gateway) *ir.Gateway
		want map[resourcev3.Type][]string
	}{
		{"one route", func(g *ir.Gateway) *ir.Gateway {
			c, v := cowVirtualHost(g, 0, 0, 3)
			r := *v.Routes[7]
			r.Match = ir.Match{Path: prefix("/changed")}
			v.Routes[7] = &r
			return c
		}, map[resourcev3.Type][]string{resourcev3.RouteType: {"bench/gw/http-80/host-00003.example.com"}}},
		{"new hostname", func(g *ir.Gateway) *ir.Gateway {
			c, _ := cowVirtualHost(g, 0, 0, 0)
			rc := c.Listeners[0].FilterChains[0].RouteConfig
			rc.VirtualHosts = append(rc.VirtualHosts, &ir.VirtualHost{Name: "new", Hostname: "new.example.com",
				Routes: []*ir.Route{{Name: "new-root", Forward: forwardTo(g.Clusters[0].Name)}}})
			return c
		}, map[resourcev3.Type][]string{
			resourcev3.RouteType:       {"bench/gw/http-80/new.example.com"},
			resourcev3.ScopedRouteType: {"bench/gw/http-80/new.example.com"},
		}},
		{"hostname removed", func(g *ir.Gateway) *ir.Gateway {
			c, _ := cowVirtualHost(g, 0, 0, 0)
			rc := c.Listeners[0].FilterChains[0].RouteConfig
			rc.VirtualHosts = slices.Delete(rc.VirtualHosts, 5, 6)
			return c
		}, map[resourcev3.Type][]string{
			resourcev3.RouteType:       {"-bench/gw/http-80/host-00005.example.com"},
			resourcev3.ScopedRouteType: {"-bench/gw/http-80/host-00005.example.com"},
		}},
		{"wildcard host: single table", func(g *ir.Gateway) *ir.Gateway {
			c, v := cowVirtualHost(g, 0, 0, 0)
			v.Hostname = "*.example.com"
			return c
		}, nil},
		{"exact again: split", func(g *ir.Gateway) *ir.Gateway {
			c, v := cowVirtualHost(g, 0, 0, 0)
			v.Hostname = "host-00000.example.com"
			return c
		}, nil},
		{"a cluster disappears", func(g *ir.Gateway) *ir.Gateway {
			c := cowGateway(g)
			c.Clusters = c.Clusters[:len(c.Clusters)-1] // named by host-00009's routes only
			return c
		}, map[resourcev3.Type][]string{
			resourcev3.RouteType:    {"bench/gw/http-80/host-00009.example.com"},
			resourcev3.ClusterType:  {"-" + gw.Clusters[len(gw.Clusters)-1].Name},
			resourcev3.EndpointType: {"-" + gw.Clusters[len(gw.Clusters)-1].Name},
		}},
	}
	for _, s := range steps {
		gw = s.edit(gw)
		got, err := x.Translate(gw)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		sameAsFreshWith(t, gw, got)
		if s.want != nil {
			if ch := changedNames(prev, got); fmt.Sprint(ch) != fmt.Sprint(s.want) {
				t.Errorf("%s: changed %v, want %v", s.name, ch, s.want)
			}
			// Unchanged resources are the previous translation's objects.
			for _, typ := range []resourcev3.Type{resourcev3.ListenerType, resourcev3.ScopedRouteType} {
				if len(s.want[typ]) == 0 && !sameResources(prev.ByType()[typ], got.ByType()[typ]) {
					t.Errorf("%s: %s translated again", s.name, typ)
				}
			}
		} else if changedNames(prev, got)[resourcev3.ListenerType] == nil {
			t.Errorf("%s: the listener did not change", s.name)
		}
		prev = got
	}
}

func sameResources(a, b []types.Resource) bool { return slices.Equal(a, b) }

// Random copy-on-write edits with the split on give what a fresh
// translation gives.
func TestSplitTranslatorRandomEdits(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := NewTranslatorWith(splitOpts)
	gw := generatedGateway(300)
	if _, err := x.Translate(gw); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		nvh := len(gw.Listeners[0].FilterChains[0].RouteConfig.VirtualHosts)
		c, v := cowVirtualHost(gw, 0, 0, rng.IntN(nvh))
		switch rng.IntN(4) {
		case 0, 1: // edit a route
			k := rng.IntN(len(v.Routes))
			r := *v.Routes[k]
			r.Match = ir.Match{Path: prefix(fmt.Sprintf("/edit/%d", i))}
			v.Routes[k] = &r
		case 2: // rename the host, sometimes to a wildcard
			v.Hostname = fmt.Sprintf("h%d.example.com", i)
			if rng.IntN(3) == 0 {
				v.Hostname = "*." + v.Hostname
			}
		case 3: // add a host
			rc := c.Listeners[0].FilterChains[0].RouteConfig
			rc.VirtualHosts = append(rc.VirtualHosts, &ir.VirtualHost{Name: fmt.Sprintf("added-%d", i),
				Hostname: fmt.Sprintf("added-%d.example.com", i), Routes: v.Routes[:1]})
		}
		gw = c
		got, err := x.Translate(gw)
		if err != nil {
			t.Fatal(err)
		}
		sameAsFreshWith(t, gw, got)
		checkValid(t, got)
	}
}

func TestParseRouteSplit(t *testing.T) {
	for in, want := range map[string]RouteSplit{"": RouteSplitNone, "none": RouteSplitNone, "hostname": RouteSplitHostname} {
		if got, err := ParseRouteSplit(in); err != nil || got != want {
			t.Errorf("ParseRouteSplit(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseRouteSplit("vhds"); err == nil {
		t.Error("unknown split accepted")
	}
}

// FuzzTranslateSplit is FuzzTranslate with the split by hostname: every
// resource valid, the snapshot consistent, the output deterministic.
func FuzzTranslateSplit(f *testing.F) {
	f.Add("foo.example.com", "*.example.com", "/foo/", uint8(1), "^/re/[0-9]+$", "x-h", "v", "/", "10.0.0.1", uint32(1), uint32(2), 50.0, uint16(302), uint32(8080))
	f.Add("Host", "", "/a?b", uint8(2), "a{2,3}", "Host", "a\nb", "", "bad", uint32(1<<32-1), uint32(1<<32-1), 100.5, uint16(99), uint32(70000))
	f.Fuzz(func(t *testing.T, host, sni, path string, pathKind uint8, regex, header, value, rewrite, addr string, w1, w2 uint32, percent float64, status uint16, port uint32) {
		gw := fuzzGateway(host, sni, path, pathKind, regex, header, value, rewrite, addr, w1, w2, percent, status, port)
		res, err := TranslateWith(gw, splitOpts)
		if err != nil {
			return
		}
		checkValid(t, res)
		again, err := TranslateWith(fuzzGateway(host, sni, path, pathKind, regex, header, value, rewrite, addr, w1, w2, percent, status, port), splitOpts)
		if err != nil {
			t.Fatalf("second translation failed: %v", err)
		}
		if again.Version != res.Version {
			t.Fatalf("not deterministic: %s != %s", again.Version, res.Version)
		}
	})
}

// A route config of another listener with the name of a hostname's route
// config is an error, whichever listener comes first.
func TestSplitNameClash(t *testing.T) {
	for _, port := range []uint32{443, 79} {
		gw := splitGateway()
		https := gw.Listeners[1]
		https.Port = port
		https.FilterChains[1].RouteConfig.Name = "http-80/a.example.com"
		if port < 80 {
			gw.Listeners = []*ir.Listener{https, gw.Listeners[0]}
		}
		if _, err := TranslateWith(gw, splitOpts); err == nil || !strings.Contains(err.Error(), "a.example.com") {
			t.Errorf("port %d: error %v", port, err)
		}
		if _, err := Translate(gw); err != nil {
			t.Errorf("port %d without split: %v", port, err)
		}
	}
}
