// Package quickstart_test checks that the quickstart example loads,
// translates cleanly and that its Envoy bootstrap is valid.
package quickstart_test

import (
	"os"
	"slices"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3" // Any type of the bootstrap
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"                           // Any type of the bootstrap
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/encoding/protojson"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/re2"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/resource/load"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// gatewayKey is the Gateway of the example, and the node.cluster of the
// bootstrap.
const gatewayKey = "default/quickstart"

// negative are the condition types whose healthy status is False.
var negative = []string{
	string(gwv1.ListenerConditionConflicted),
	string(gwv1.ListenerConditionOverlappingTLSConfig),
	string(gwv1.RouteConditionPartiallyInvalid),
	string(gwv1.GatewayConditionInsecureFrontendValidationMode),
}

func TestQuickstartTranslatesCleanly(t *testing.T) {
	snap, warnings, err := load.Paths(".")
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	for _, w := range warnings {
		t.Errorf("load warning: %s", w)
	}
	res := gatewayapi.Translate(snap, gatewayapi.Options{
		ControllerName: gatewayapi.DefaultControllerName,
	})

	kinds := map[resource.Kind]int{}
	for _, s := range res.Statuses {
		kinds[s.Kind]++
		if s.Route != nil && len(s.Route.Parents) != 1 {
			t.Errorf("%s: %d parent statuses, want 1", s.Key(), len(s.Route.Parents))
		}
		if s.Gateway != nil {
			for _, l := range s.Gateway.Listeners {
				// app and greeter on both listeners, beta on http only.
				want := map[gwv1.SectionName]int32{"http": 3, "https": 2}[l.Name]
				if l.AttachedRoutes != want {
					t.Errorf("listener %s: attachedRoutes %d, want %d", l.Name, l.AttachedRoutes, want)
				}
			}
		}
		for _, c := range conditionsOf(s) {
			healthy := c.Status == metav1.ConditionTrue
			if slices.Contains(negative, c.Type) {
				healthy = c.Status != metav1.ConditionTrue
			}
			if !healthy {
				t.Errorf("%s: condition %s=%s reason %s: %s", s.Key(), c.Type, c.Status, c.Reason, c.Message)
			}
		}
	}
	want := map[resource.Kind]int{
		resource.KindGatewayClass: 1, resource.KindGateway: 1,
		resource.KindHTTPRoute: 2, resource.KindGRPCRoute: 1,
	}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("%d %s statuses, want %d (all: %v)", kinds[k], k, n, kinds)
		}
	}

	if len(res.Gateways) != 1 || res.Gateways[0].Key() != gatewayKey {
		t.Fatalf("gateways %v, want only %s", gatewayKeys(res), gatewayKey)
	}
	xds, err := translate.Translate(res.Gateways[0])
	if err != nil {
		t.Fatalf("translate: %v", err)
	}
	if xds.Gateway != gatewayKey {
		t.Errorf("resources of %q, want %q", xds.Gateway, gatewayKey)
	}
	for _, r := range slices.Concat(xds.Listeners, xds.Routes(), xds.Clusters, xds.Endpoints, xds.Secrets) {
		r, err := translate.Decode(r) // route tables are kept encoded
		if err != nil {
			t.Fatal(err)
		}
		if err := r.(interface{ ValidateAll() error }).ValidateAll(); err != nil {
			t.Errorf("%T: %v", r, err)
		}
	}
	cache, err := xds.Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if err := cache.Consistent(); err != nil {
		t.Errorf("snapshot not consistent: %v", err)
	}

	if got := listenerPorts(xds.Listeners); !slices.Equal(got, []uint32{8080, 8443}) {
		t.Errorf("listener ports %v, want [8080 8443]", got)
	}
	// app-v1, app-v2, api and greeter.
	if len(xds.Clusters) != 4 || len(xds.Endpoints) != 4 {
		t.Errorf("%d clusters and %d endpoints, want 4 of each", len(xds.Clusters), len(xds.Endpoints))
	}
	if len(xds.Secrets) != 1 {
		t.Errorf("%d secrets, want 1", len(xds.Secrets))
	}
}

func TestQuickstartEnvoyBootstrap(t *testing.T) {
	data, err := os.ReadFile(".envoy/envoy-bootstrap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatalf("yaml: %v", err)
	}
	var b bootstrapv3.Bootstrap
	if err := protojson.Unmarshal(js, &b); err != nil {
		t.Fatalf("decode bootstrap: %v", err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatalf("invalid bootstrap: %v", err)
	}
	// The RE2 limit Portico's checks rely on (internal/re2).
	var level float64
	for _, l := range b.GetLayeredRuntime().GetLayers() {
		if v, ok := l.GetStaticLayer().GetFields()["re2.max_program_size.error_level"]; ok {
			level = v.GetNumberValue()
		}
	}
	if level != re2.MaxProgramSize {
		t.Errorf("re2.max_program_size.error_level = %v, want %d", level, re2.MaxProgramSize)
	}
	if got := b.GetNode().GetCluster(); got != gatewayKey {
		t.Errorf("node.cluster %q, want %q", got, gatewayKey)
	}
	ads := b.GetDynamicResources().GetAdsConfig()
	if ads.GetApiType().String() != "GRPC" || len(ads.GetGrpcServices()) != 1 {
		t.Fatalf("ads_config is not one gRPC service: %v", ads)
	}
	xdsCluster := ads.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName()
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() != xdsCluster {
			continue
		}
		addr := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
		if addr.GetAddress() != "127.0.0.1" || addr.GetPortValue() != 18000 {
			t.Errorf("xDS cluster points at %s:%d, want 127.0.0.1:18000", addr.GetAddress(), addr.GetPortValue())
		}
		if len(c.GetTypedExtensionProtocolOptions()) == 0 {
			t.Errorf("xDS cluster has no HTTP/2 protocol options")
		}
		return
	}
	t.Errorf("no static cluster %q for ADS", xdsCluster)
}

func conditionsOf(s gatewayapi.Status) []metav1.Condition {
	var cs []metav1.Condition
	switch {
	case s.GatewayClass != nil:
		cs = append(cs, s.GatewayClass.Conditions...)
	case s.Gateway != nil:
		cs = append(cs, s.Gateway.Conditions...)
		for _, l := range s.Gateway.Listeners {
			cs = append(cs, l.Conditions...)
		}
	case s.ListenerSet != nil:
		cs = append(cs, s.ListenerSet.Conditions...)
		for _, l := range s.ListenerSet.Listeners {
			cs = append(cs, l.Conditions...)
		}
	case s.Route != nil:
		for _, p := range s.Route.Parents {
			cs = append(cs, p.Conditions...)
		}
	}
	return cs
}

func gatewayKeys(res *gatewayapi.Result) []string {
	var keys []string
	for _, g := range res.Gateways {
		keys = append(keys, g.Key())
	}
	return keys
}

func listenerPorts(rs []types.Resource) []uint32 {
	var ports []uint32
	for _, r := range rs {
		if l, ok := r.(*listenerv3.Listener); ok {
			ports = append(ports, l.GetAddress().GetSocketAddress().GetPortValue())
		}
	}
	slices.Sort(ports)
	return ports
}
