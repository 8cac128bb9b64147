package translate

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/portico-dev/portico/internal/ir"
)

// vhdsGateway is fullGateway whose HTTP listener has exact hostnames in
// several letter cases, a wildcard, the catch-all and a large direct
// response (which sets the table's own limit).
func vhdsGateway() *ir.Gateway {
	gw := fullGateway()
	rc := gw.Listeners[0].FilterChains[0].RouteConfig
	any := rc.VirtualHosts[0]
	big := strings.Repeat("x", 5000)
	rc.VirtualHosts = []*ir.VirtualHost{
		{Name: "a", Hostname: "a.example.com", Routes: any.Routes},
		{Name: "b", Hostname: "B.Example.com", Routes: []*ir.Route{{Name: "b-root", Forward: forwardTo(clusterA)}}},
		{Name: "c", Hostname: "c.example.com", Routes: []*ir.Route{{Name: "c-big", DirectResponse: &ir.DirectResponse{Status: 200, Body: big}}}},
		{Name: "w", Hostname: "*.example.com", Routes: []*ir.Route{{Name: "w-root", Forward: forwardTo(clusterC)}}},
		{Name: "all", Routes: []*ir.Route{{Name: "all-root", Forward: forwardTo(clusterA)}}},
	}
	return gw
}

// checkValid checks every resource's validation rules (of the decoded
// form: route tables and load assignments are kept encoded), the wire
// forms (checkWire), the consistency of the snapshot (every route config
// referenced by a listener exists, and no other) and the VHDS forms
// (checkVHDS).
func checkValid(t *testing.T, res *Resources) {
	t.Helper()
	for _, r := range slices.Concat(res.All(), res.VHDSRoutes, res.VirtualHosts) {
		d, err := Decode(r)
		if err != nil {
			t.Fatalf("%T %s: %v", r, cachev3.GetResourceName(r), err)
		}
		if err := d.(validator).ValidateAll(); err != nil {
			t.Errorf("%T %s: %v", r, cachev3.GetResourceName(r), err)
		}
	}
	checkWire(t, res)
	checkVHDS(t, res)
	snap, err := res.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Consistent(); err != nil {
		t.Fatal(err)
	}
}

// checkVHDS checks that the VHDS form of every route table is the table:
// the route config in VHDS form is the whole one without virtual hosts and
// with VHDS over ADS; its virtual hosts are the VirtualHosts named
// "<route config>/…", each the table's virtual host of that domain with
// that name; and nothing else is in either list.
func checkVHDS(t *testing.T, res *Resources) {
	t.Helper()
	if len(res.VHDSRoutes) != len(res.Routes()) {
		t.Fatalf("%d route configs in VHDS form, %d whole", len(res.VHDSRoutes), len(res.Routes()))
	}
	scopedHosts := map[string]bool{}
	for _, r := range res.ScopedRoutes {
		scopedHosts[r.(*routev3.ScopedRouteConfiguration).RouteConfigurationName] = true
	}
	vhosts := map[string]*routev3.VirtualHost{}
	for _, r := range res.VirtualHosts {
		d, err := Decode(r)
		if err != nil {
			t.Fatal(err)
		}
		vh := d.(*routev3.VirtualHost)
		vhosts[vh.Name] = vh
	}
	if len(vhosts) != len(res.VirtualHosts) {
		t.Fatalf("virtual host names are not unique: %v", names(res.VirtualHosts))
	}
	for i, r := range res.Routes() {
		d, err := Decode(r)
		if err != nil {
			t.Fatal(err)
		}
		whole := d.(*routev3.RouteConfiguration)
		if scopedHosts[whole.Name] {
			// A scoped table's host: the same resource in both lists.
			if res.VHDSRoutes[i] != r {
				t.Fatalf("scoped route config %s differs in VHDS form", whole.Name)
			}
			continue
		}
		v := res.VHDSRoutes[i].(*routev3.RouteConfiguration)
		if v.Name != whole.Name || v.GetVhds().GetConfigSource().GetAds() == nil || len(v.VirtualHosts) != 0 {
			t.Fatalf("VHDS form of %s: %v", whole.Name, v)
		}
		shell := proto.Clone(v).(*routev3.RouteConfiguration)
		shell.Vhds = nil
		for _, vh := range whole.VirtualHosts {
			served := proto.Clone(vh).(*routev3.VirtualHost)
			served.Name = whole.Name + "/" + vh.Domains[0]
			got, ok := vhosts[served.Name]
			if !ok {
				t.Fatalf("%s: no VHDS virtual host %s", whole.Name, served.Name)
			}
			if !proto.Equal(got, served) {
				t.Errorf("VHDS virtual host %s differs from the table's", served.Name)
			}
			delete(vhosts, served.Name)
		}
		whole.VirtualHosts = nil
		if !proto.Equal(shell, whole) {
			t.Errorf("VHDS form of %s: %v, want %v", whole.Name, shell, whole)
		}
	}
	if len(vhosts) != 0 {
		t.Errorf("virtual hosts of no route config: %v", vhosts)
	}
}

func TestVHDSForms(t *testing.T) {
	res := mustTranslate(t, vhdsGateway())
	checkValid(t, res)
	want := []string{"*", "*.example.com", "a.example.com", "b.example.com", "c.example.com"}
	var got []string
	for _, n := range names(res.VirtualHosts) {
		if rest, ok := strings.CutPrefix(n, "default/gw/http-80/"); ok {
			got = append(got, rest)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("VHDS virtual hosts of the HTTP listener: %v, want %v", got, want)
	}
	// The route config's own fields are kept: port ignored, the body limit.
	v := find[*routev3.RouteConfiguration](t, res.VHDSRoutes, "default/gw/http-80")
	if !v.IgnorePortInHostMatching || v.GetMaxDirectResponseBodySizeBytes().GetValue() != 5000 {
		t.Errorf("VHDS route config %v", v)
	}
	// Derived forms do not change the Gateway's version.
	if got, err := vhdsName("rc", "a/b"); err == nil {
		t.Errorf("vhdsName with a '/' = %q", got)
	}
}

// Names and versions depend on the content only.
func TestVHDSDeterministic(t *testing.T) {
	a := mustTranslate(t, vhdsGateway())
	gw := vhdsGateway()
	slices.Reverse(gw.Listeners[0].FilterChains[0].RouteConfig.VirtualHosts)
	slices.Reverse(gw.Listeners)
	identical(t, mustTranslate(t, gw), a, "translation in IR order")
}

// changedNames returns, per type (the VHDS forms included), the names of
// the resources of cur that are new or have another version than in prev,
// and of those removed ("-name").
func changedNames(prev, cur *Resources) map[resourcev3.Type][]string {
	out := map[resourcev3.Type][]string{}
	for _, typ := range allTypes {
		pv, cv := prev.ResourceVersions(typ), cur.ResourceVersions(typ)
		for name, v := range cv {
			if pv[name] != v {
				out[typ] = append(out[typ], name)
			}
		}
		for name := range pv {
			if _, ok := cv[name]; !ok {
				out[typ] = append(out[typ], "-"+name)
			}
		}
		slices.Sort(out[typ])
	}
	return out
}

// Edits of generatedGateway(1000) shared by the translator-change tests
// (copy on write): a route of host-00003 changed, a hostname added,
// host-00005 removed, host-00000 renamed to a wildcard.
func editOneRoute(g *ir.Gateway) *ir.Gateway {
	c, v := cowVirtualHost(g, 0, 0, 3)
	r := *v.Routes[7]
	r.Match = ir.Match{Path: prefix("/changed")}
	v.Routes[7] = &r
	return c
}

func editNewHost(g *ir.Gateway) *ir.Gateway {
	c, _ := cowVirtualHost(g, 0, 0, 0)
	rc := c.Listeners[0].FilterChains[0].RouteConfig
	rc.VirtualHosts = append(rc.VirtualHosts, &ir.VirtualHost{Name: "new", Hostname: "new.example.com",
		Routes: []*ir.Route{{Name: "new-root", Forward: forwardTo(g.Clusters[0].Name)}}})
	return c
}

func editRemoveHost(g *ir.Gateway) *ir.Gateway {
	c, _ := cowVirtualHost(g, 0, 0, 0)
	rc := c.Listeners[0].FilterChains[0].RouteConfig
	rc.VirtualHosts = slices.Delete(rc.VirtualHosts, 5, 6)
	return c
}

func editWildcardHost(g *ir.Gateway) *ir.Gateway {
	c, v := cowVirtualHost(g, 0, 0, 0)
	v.Hostname = "*.example.com"
	return c
}

// A Translator: a changed route changes its virtual host only (and the
// whole table of the state-of-the-world form); a new or removed hostname
// adds or removes one virtual host; the listener and the route config in
// VHDS form stay.
func TestVHDSTranslatorChanges(t *testing.T) {
	x := NewTranslatorWith(vhdsOnly)
	gw := generatedGateway(1000) // hosts host-00000 … host-00009
	prev, err := x.Translate(gw)
	if err != nil {
		t.Fatal(err)
	}
	identical(t, prev, mustTranslateWith(t, gw, vhdsOnly), "fresh translation")
	rc := "bench/gw/http-80"
	steps := []struct {
		name string
		edit func(*ir.Gateway) *ir.Gateway
		want map[resourcev3.Type][]string
	}{
		{"one route", editOneRoute, map[resourcev3.Type][]string{
			resourcev3.RouteType:       {rc},
			resourcev3.VirtualHostType: {rc + "/host-00003.example.com"},
		}},
		{"new hostname", editNewHost, map[resourcev3.Type][]string{
			resourcev3.RouteType:       {rc},
			resourcev3.VirtualHostType: {rc + "/new.example.com"},
		}},
		{"hostname removed", editRemoveHost, map[resourcev3.Type][]string{
			resourcev3.RouteType:       {rc},
			resourcev3.VirtualHostType: {"-" + rc + "/host-00005.example.com"},
		}},
		{"wildcard host", editWildcardHost, map[resourcev3.Type][]string{
			resourcev3.RouteType:       {rc},
			resourcev3.VirtualHostType: {"-" + rc + "/host-00000.example.com", rc + "/*.example.com"},
		}},
		{"a cluster disappears", func(g *ir.Gateway) *ir.Gateway {
			c := cowGateway(g)
			c.Clusters = c.Clusters[:len(c.Clusters)-1] // named by host-00009's routes only
			return c
		}, map[resourcev3.Type][]string{
			resourcev3.RouteType:       {rc},
			resourcev3.VirtualHostType: {rc + "/host-00009.example.com"},
			resourcev3.ClusterType:     {"-" + gw.Clusters[len(gw.Clusters)-1].Name},
			resourcev3.EndpointType:    {"-" + gw.Clusters[len(gw.Clusters)-1].Name},
		}},
	}
	for _, s := range steps {
		gw = s.edit(gw)
		got, err := x.Translate(gw)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		identical(t, got, mustTranslateWith(t, gw, vhdsOnly), s.name+": fresh translation")
		if ch := changedNames(prev, got); fmt.Sprint(ch) != fmt.Sprint(s.want) {
			t.Errorf("%s: changed %v, want %v", s.name, ch, s.want)
		}
		if !slices.Equal(prev.Listeners, got.Listeners) || !slices.Equal(prev.VHDSRoutes, got.VHDSRoutes) {
			t.Errorf("%s: a listener or a route config in VHDS form translated again", s.name)
		}
		prev = got
	}
}

// Random copy-on-write edits give what a fresh translation gives, VHDS
// forms included.
func TestVHDSTranslatorRandomEdits(t *testing.T) {
	checkRandomEdits(t, vhdsOnly, rand.New(rand.NewPCG(3, 4)), 40)
}
