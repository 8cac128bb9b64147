package server

import (
	"slices"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// scopedTypes are the types of a Gateway with a listener split by
// hostname: the five of every Gateway and the scoped routes.
var scopedTypes = append(slices.Clone(allTypes), resourcev3.ScopedRouteType)

// splitGateway has one HTTP listener with a virtual host per host, each
// with one route (path paths[i] for hosts[i]) to one cluster at endpoint.
func splitGateway(endpoint string, hosts, paths []string) *ir.Gateway {
	rc := &ir.RouteConfig{Name: "http-80"}
	for i, h := range hosts {
		rc.VirtualHosts = append(rc.VirtualHosts, &ir.VirtualHost{Name: h, Hostname: h, Routes: []*ir.Route{{
			Name:    "r-" + h,
			Match:   ir.Match{Path: &ir.PathMatch{Type: ir.PathPrefix, Value: paths[i]}},
			Forward: &ir.Forward{Backends: []*ir.WeightedBackend{{Cluster: "ns/svc/80", Weight: 1}}},
		}}})
	}
	return &ir.Gateway{
		Namespace: "ns", Name: "gw",
		Listeners: []*ir.Listener{{Name: "http-80", Port: 80, Protocol: ir.ProtocolHTTP,
			FilterChains: []*ir.FilterChain{{Name: "http-80", RouteConfig: rc}}}},
		Clusters: []*ir.Cluster{{Name: "ns/svc/80", Protocol: ir.UpstreamHTTP1, Endpoints: []ir.Endpoint{{Address: endpoint, Port: 8080}}}},
	}
}

func scopedNames(prefix string, hosts ...string) []string {
	var out []string
	for _, h := range hosts {
		out = append(out, prefix+h)
	}
	return out
}

// The scoped routes of a listener split by hostname are served over delta
// ADS; a change of one route sends that hostname's route config only, and
// a new hostname its scope and route config, never the Listener.
func TestDeltaADSScopedRoutes(t *testing.T) {
	e := startEnv(t)
	x := translate.NewTranslatorWith(translate.Options{RouteSplit: translate.RouteSplitHostname})
	translateAndUpdate := func(gw *ir.Gateway) {
		t.Helper()
		res, err := x.Translate(gw)
		if err != nil {
			t.Fatal(err)
		}
		e.update(t, res)
	}
	const prefix = "ns/gw/http-80/"
	ab := []string{"a.example.com", "b.example.com"}
	translateAndUpdate(splitGateway("10.0.0.1", ab, []string{"/a1", "/b1"}))

	c := newDeltaClient(t, e.conn)
	for i, typ := range scopedTypes {
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: typ, ResourceNamesSubscribe: []string{"*"}}
		if i == 0 {
			req.Node = node("ns/gw")
		}
		c.send(req)
	}
	got := recvTypes(t, c, deltaType, scopedTypes...)
	want := map[string][]string{
		resourcev3.ListenerType:    {"ns/gw/http-80"},
		resourcev3.RouteType:       scopedNames(prefix, ab...),
		resourcev3.ScopedRouteType: scopedNames(prefix, ab...),
		resourcev3.ClusterType:     {"ns/svc/80"},
		resourcev3.EndpointType:    {"ns/svc/80"},
	}
	for _, typ := range scopedTypes {
		if names := deltaNames(got[typ]); !slices.Equal(names, want[typ]) {
			t.Errorf("%s resources = %v, want %v", typ, names, want[typ])
		}
		deltaAck(c, got[typ])
	}
	for _, r := range got[resourcev3.ScopedRouteType].GetResources() {
		sc := &routev3.ScopedRouteConfiguration{}
		if err := r.GetResource().UnmarshalTo(sc); err != nil {
			t.Fatal(err)
		}
		if sc.GetName() != r.GetName() || sc.GetRouteConfigurationName() != r.GetName() ||
			prefix+sc.GetKey().GetFragments()[0].GetStringKey() != r.GetName() || r.GetVersion() == "" {
			t.Errorf("scope %s = %v (version %q)", r.GetName(), sc, r.GetVersion())
		}
	}
	eventually(t, "twelve requests (subscriptions and ACKs) received", func() bool { return e.requests(t, metrics.KindDelta) == 12 })

	// One route of b.example.com changes: its route config alone is sent.
	translateAndUpdate(splitGateway("10.0.0.1", ab, []string{"/a1", "/b2"}))
	r := c.recv()
	if r.GetTypeUrl() != resourcev3.RouteType || !slices.Equal(deltaNames(r), scopedNames(prefix, "b.example.com")) {
		t.Fatalf("got %s %v, want RDS [%sb.example.com]", r.GetTypeUrl(), deltaNames(r), prefix)
	}
	deltaAck(c, r)

	// A new hostname: its scope and route config, not the Listener.
	abc := append(ab, "c.example.com")
	translateAndUpdate(splitGateway("10.0.0.1", abc, []string{"/a1", "/b2", "/c1"}))
	got = recvTypes(t, c, deltaType, resourcev3.RouteType, resourcev3.ScopedRouteType)
	for typ, r := range got {
		if names := deltaNames(r); !slices.Equal(names, scopedNames(prefix, "c.example.com")) || len(r.GetRemovedResources()) != 0 {
			t.Errorf("%s: resources %v, removed %v", typ, names, r.GetRemovedResources())
		}
		deltaAck(c, r)
	}
	// An endpoint change is the next response: nothing else was sent.
	translateAndUpdate(splitGateway("10.0.0.2", abc, []string{"/a1", "/b2", "/c1"}))
	if r := c.recv(); r.GetTypeUrl() != resourcev3.EndpointType {
		t.Fatalf("got %s %v, want EDS", r.GetTypeUrl(), deltaNames(r))
	}
	deltaAck(c, r)

	// A removed hostname: its scope and route config are removed.
	translateAndUpdate(splitGateway("10.0.0.2", ab, []string{"/a1", "/b2"}))
	got = recvTypes(t, c, deltaType, resourcev3.RouteType, resourcev3.ScopedRouteType)
	for typ, r := range got {
		if rm := r.GetRemovedResources(); len(r.GetResources()) != 0 || !slices.Equal(rm, scopedNames(prefix, "c.example.com")) {
			t.Errorf("%s: resources %v, removed %v", typ, deltaNames(r), rm)
		}
	}
}

// A state-of-the-world proxy gets the scopes too.
func TestSotWADSScopedRoutes(t *testing.T) {
	e := startEnv(t)
	res, err := translate.TranslateWith(splitGateway("10.0.0.1", []string{"a.example.com", "b.example.com"}, []string{"/a", "/b"}),
		translate.Options{RouteSplit: translate.RouteSplitHostname})
	if err != nil {
		t.Fatal(err)
	}
	e.update(t, res)
	c := newSotwClient(t, e.conn)
	c.send(&discoveryv3.DiscoveryRequest{Node: node("ns/gw"), TypeUrl: resourcev3.ScopedRouteType})
	r := c.recv()
	want := scopedNames("ns/gw/http-80/", "a.example.com", "b.example.com")
	if r.GetTypeUrl() != resourcev3.ScopedRouteType || !slices.Equal(sotwNames(t, r), want) || r.GetVersionInfo() == "" {
		t.Errorf("got %s %v version %s, want %v", r.GetTypeUrl(), sotwNames(t, r), r.GetVersionInfo(), want)
	}
}
