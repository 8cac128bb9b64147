package translate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	luav3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/lua/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/portico-dev/portico/internal/ir"
)

// scopeAll serves every table of two virtual hosts or more in scoped form.
var scopeAll = Options{ScopeAtRoutes: 1}

// listenerHCM is the connection manager of the first chain of listener
// name.
func listenerHCM(t *testing.T, res *Resources, name string) *hcmv3.HttpConnectionManager {
	t.Helper()
	return hcmOf(t, find[*listenerv3.Listener](t, res.Listeners, name).FilterChains[0])
}

func TestScopedForm(t *testing.T) {
	res := mustTranslateWith(t, vhdsGateway(), scopeAll)
	checkValid(t, res)
	table := "default/gw/http-80"
	hcm := listenerHCM(t, res, table)
	sr := hcm.GetScopedRoutes()
	if sr == nil || sr.Name != table || sr.GetScopedRds().GetScopedRdsConfigSource().GetAds() == nil ||
		sr.GetScopeKeyBuilder().GetFragments()[0].GetHeaderValueExtractor().GetName() != scopeHeader {
		t.Fatalf("route specifier %v", hcm.RouteSpecifier)
	}
	first := hcm.HttpFilters[0]
	if first.Name != table+"#host-scope" || first.GetConfigDiscovery().GetConfigSource().GetAds() == nil {
		t.Fatalf("first HTTP filter %v", first)
	}
	domains := []string{"*", "*.example.com", "a.example.com", "b.example.com", "c.example.com"}
	for _, d := range domains {
		name := table + "/" + d
		sc := find[*routev3.ScopedRouteConfiguration](t, res.ScopedRoutes, name)
		if sc.RouteConfigurationName != name || sc.Key.Fragments[0].GetStringKey() != name {
			t.Errorf("scope %v", sc)
		}
		rcd, err := Decode(find[*routev3.RouteConfiguration](t, res.Routes(), name))
		if err != nil {
			t.Fatal(err)
		}
		rc := rcd.(*routev3.RouteConfiguration)
		if len(rc.VirtualHosts) != 1 || rc.VirtualHosts[0].Domains[0] != d || !rc.IgnorePortInHostMatching ||
			!slices.Equal(rc.RequestHeadersToRemove, []string{scopeHeader}) {
			t.Errorf("route config %s: %v", name, rc)
		}
	}
	// The big body's limit goes with its host only.
	rcd, _ := Decode(find[*routev3.RouteConfiguration](t, res.Routes(), table+"/c.example.com"))
	if rcd.(*routev3.RouteConfiguration).GetMaxDirectResponseBodySizeBytes().GetValue() != 5000 {
		t.Errorf("c.example.com has no body limit: %v", rcd)
	}
	// The filter maps each domain to its key, wildcards by suffix length.
	var lua luav3.Lua
	f := find[*corev3.TypedExtensionConfig](t, res.HostScopeFilters, table+"#host-scope")
	if err := f.TypedConfig.UnmarshalTo(&lua); err != nil {
		t.Fatal(err)
	}
	src := lua.GetDefaultSourceCode().GetInlineString()
	for _, want := range []string{
		`["a.example.com"] = "default/gw/http-80/a.example.com"`,
		`{12, {[".example.com"] = "default/gw/http-80/*.example.com", }}`,
		`local catch_all = "default/gw/http-80/*"`,
		"function envoy_on_request",
	} {
		if !strings.Contains(src, want) {
			t.Errorf("host-scope filter lacks %s:\n%s", want, src)
		}
	}
	// The HTTPS chains of one virtual host each keep RDS.
	if l := find[*listenerv3.Listener](t, res.Listeners, "default/gw/https-443"); l == nil {
		t.Fatal("no HTTPS listener")
	}
	if n := len(res.HostScopeFilters); n != 1 {
		t.Errorf("%d host-scope filters, want 1", n)
	}
}

func TestScopeThreshold(t *testing.T) {
	gw := generatedGateway(1000) // 10 hosts of 100 routes
	for _, c := range []struct {
		opts   Options
		scoped bool
	}{
		{Options{}, true},                       // 1,000 routes: the default threshold
		{Options{ScopeAtRoutes: 1001}, false},   // one short
		{Options{ScopeAtRoutes: -1}, false},     // off
		{Options{ScopeAtRoutes: 1000}, true},    // exactly
		{Options{ScopeAtRoutes: 2}, true},       // any table of two hosts
		{Options{ScopeAtRoutes: 100000}, false}, // far above
	} {
		res := mustTranslateWith(t, gw, c.opts)
		checkValid(t, res)
		if got := listenerHCM(t, res, "bench/gw/http-80").GetScopedRoutes() != nil; got != c.scoped || (len(res.ScopedRoutes) > 0) != c.scoped {
			t.Errorf("%+v: scoped %v (%d scopes), want %v", c.opts, got, len(res.ScopedRoutes), c.scoped)
		}
	}
	// One virtual host: scoping would not make the table smaller.
	one := generatedGateway(50)
	c, _ := cowVirtualHost(one, 0, 0, 0)
	c.Listeners[0].FilterChains[0].RouteConfig.VirtualHosts = c.Listeners[0].FilterChains[0].RouteConfig.VirtualHosts[:1]
	res := mustTranslateWith(t, c, scopeAll)
	if len(res.ScopedRoutes) != 0 {
		t.Errorf("a table of one virtual host is scoped")
	}
	// A prefix wildcard (not a Gateway API hostname) keeps the VHDS form.
	c, v := cowVirtualHost(one, 0, 0, 0)
	v.Hostname = "foo.*"
	if res = mustTranslateWith(t, c, scopeAll); len(res.ScopedRoutes) != 0 {
		t.Errorf("a table with a prefix wildcard is scoped")
	}
}

// A Translator changes only what a change touches: one host's route
// config for a route, a scope, a route config and the filter for a host;
// never the Listener.
func TestScopedTranslatorChanges(t *testing.T) {
	x := NewTranslatorWith(scopeAll)
	gw := generatedGateway(1000) // hosts host-00000 … host-00009
	prev, err := x.Translate(gw)
	if err != nil {
		t.Fatal(err)
	}
	identical(t, prev, mustTranslateWith(t, gw, scopeAll), "fresh translation")
	rc := "bench/gw/http-80"
	host := func(h string) string { return rc + "/" + h }
	filter := rc + "#host-scope"
	steps := []struct {
		name string
		edit func(*ir.Gateway) *ir.Gateway
		want map[resourcev3.Type][]string
	}{
		{"one route", editOneRoute, map[resourcev3.Type][]string{
			resourcev3.RouteType: {host("host-00003.example.com")},
			VHDSRouteType:        {host("host-00003.example.com")},
		}},
		{"new hostname", editNewHost, map[resourcev3.Type][]string{
			resourcev3.RouteType:           {host("new.example.com")},
			resourcev3.ScopedRouteType:     {host("new.example.com")},
			resourcev3.ExtensionConfigType: {filter},
			VHDSRouteType:                  {host("new.example.com")},
		}},
		{"hostname removed", editRemoveHost, map[resourcev3.Type][]string{
			resourcev3.RouteType:           {"-" + host("host-00005.example.com")},
			resourcev3.ScopedRouteType:     {"-" + host("host-00005.example.com")},
			resourcev3.ExtensionConfigType: {filter},
			VHDSRouteType:                  {"-" + host("host-00005.example.com")},
		}},
		{"wildcard host", editWildcardHost, map[resourcev3.Type][]string{
			resourcev3.RouteType:           {"-" + host("host-00000.example.com"), host("*.example.com")},
			resourcev3.ScopedRouteType:     {"-" + host("host-00000.example.com"), host("*.example.com")},
			resourcev3.ExtensionConfigType: {filter},
			VHDSRouteType:                  {"-" + host("host-00000.example.com"), host("*.example.com")},
		}},
	}
	for _, s := range steps {
		gw = s.edit(gw)
		got, err := x.Translate(gw)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		identical(t, got, mustTranslateWith(t, gw, scopeAll), s.name+": fresh translation")
		ch := changedNames(prev, got)
		for _, names := range ch {
			slices.Sort(names)
		}
		if fmt.Sprint(ch) != fmt.Sprint(s.want) {
			t.Errorf("%s: changed %v, want %v", s.name, ch, s.want)
		}
		if !slices.Equal(prev.Listeners, got.Listeners) {
			t.Errorf("%s: the listener was translated again", s.name)
		}
		prev = got
	}
	// Crossing the threshold changes the form, and so the Listener.
	y := NewTranslatorWith(Options{ScopeAtRoutes: 1000})
	big, err := y.Translate(generatedGateway(1000))
	if err != nil || len(big.ScopedRoutes) == 0 {
		t.Fatalf("1,000 routes not scoped: %v", err)
	}
	c, v := cowVirtualHost(generatedGateway(1000), 0, 0, 0)
	v.Routes = v.Routes[:1]
	small, err := y.Translate(c)
	if err != nil {
		t.Fatal(err)
	}
	identical(t, small, mustTranslateWith(t, c, Options{ScopeAtRoutes: 1000}), "below the threshold")
	if len(small.ScopedRoutes) != 0 || slices.Equal(small.Listeners, big.Listeners) {
		t.Errorf("below the threshold: %d scopes, listener reused %v", len(small.ScopedRoutes), slices.Equal(small.Listeners, big.Listeners))
	}
}

// Random copy-on-write edits of a scoped table give what a fresh
// translation gives, the table crossing the threshold either way.
func TestScopedTranslatorRandomEdits(t *testing.T) {
	checkRandomEdits(t, Options{ScopeAtRoutes: 300}, rand.New(rand.NewPCG(5, 6)), 60)
}

// checkRandomEdits translates steps random copy-on-write edits of
// generatedGateway(300) with one Translator and opts, and checks that each
// result is what a fresh translation gives, and valid.
func checkRandomEdits(t *testing.T, opts Options, rng *rand.Rand, steps int) {
	t.Helper()
	x := NewTranslatorWith(opts)
	gw := generatedGateway(300)
	if _, err := x.Translate(gw); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < steps; i++ {
		nvh := len(gw.Listeners[0].FilterChains[0].RouteConfig.VirtualHosts)
		c, v := cowVirtualHost(gw, 0, 0, rng.IntN(nvh))
		switch rng.IntN(5) {
		case 0, 1: // edit a route
			k := rng.IntN(len(v.Routes))
			r := *v.Routes[k]
			r.Match = ir.Match{Path: prefix(fmt.Sprintf("/edit/%d", i))}
			v.Routes[k] = &r
		case 2: // rename the host, sometimes to a wildcard or the catch-all
			v.Hostname = fmt.Sprintf("h%d.example.com", i)
			switch rng.IntN(4) {
			case 0:
				v.Hostname = "*." + v.Hostname
			case 1:
				v.Hostname = ""
				for _, o := range c.Listeners[0].FilterChains[0].RouteConfig.VirtualHosts {
					if o != v && o.Hostname == "" {
						v.Hostname = fmt.Sprintf("h%d.example.com", i)
					}
				}
			}
		case 3: // add a host
			rc := c.Listeners[0].FilterChains[0].RouteConfig
			rc.VirtualHosts = append(rc.VirtualHosts, &ir.VirtualHost{Name: fmt.Sprintf("added-%d", i),
				Hostname: fmt.Sprintf("added-%d.example.com", i), Routes: v.Routes[:1]})
		case 4: // drop routes, crossing the threshold either way
			if len(v.Routes) > 1 {
				v.Routes = v.Routes[:len(v.Routes)/2]
			} else {
				v.Routes = append(v.Routes, gw.Listeners[0].FilterChains[0].RouteConfig.VirtualHosts[0].Routes...)
			}
		}
		gw = c
		got, err := x.Translate(gw)
		if err != nil {
			t.Fatal(err)
		}
		identical(t, got, mustTranslateWith(t, gw, opts), "fresh translation")
		checkValid(t, got)
	}
}

func TestLuaString(t *testing.T) {
	for in, want := range map[string]string{
		"a.example.com":  `"a.example.com"`,
		`q"uote\`:        `"q\034uote\092"`,
		"new\nline1":     `"new\010line1"`,
		"ns/gw/rc/*.x-y": `"ns/gw/rc/*.x-y"`,
	} {
		if got := luaString(in); got != want {
			t.Errorf("luaString(%q) = %s, want %s", in, got, want)
		}
	}
}
