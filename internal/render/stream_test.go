package render_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/render"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/resource/load"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// translateCase is the translation of one golden input: the result and
// each Gateway's resources (in wire form, as the pipeline serves them).
func translateCase(t *testing.T, file string, opts translate.Options) (*gatewayapi.Result, []*translate.Resources) {
	t.Helper()
	snap, _, err := load.Paths(file)
	if err != nil {
		t.Fatalf("load %s: %v", file, err)
	}
	res := gatewayapi.Translate(snap, gatewayapi.Options{ControllerName: gatewayapi.DefaultControllerName})
	tr := translate.NewTranslatorWith(opts)
	var xds []*translate.Resources
	for _, gw := range res.Gateways {
		r, err := tr.Translate(gw)
		if err != nil {
			t.Fatalf("translate %s: %v", gw.Key(), err)
		}
		xds = append(xds, r)
	}
	return res, xds
}

// recorder records the size of every Write.
type recorder struct {
	bytes.Buffer
	writes, largest int
}

func (r *recorder) Write(p []byte) (int, error) {
	r.writes++
	r.largest = max(r.largest, len(p))
	return r.Buffer.Write(p)
}

// The streamed document is byte for byte the rendered one, for every
// golden case, and so are the statuses.
func TestStreamEqualsRender(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.in.yaml"))
	if err != nil || len(inputs) < minGoldenCases {
		t.Fatalf("%d golden inputs (%v)", len(inputs), err)
	}
	wire := 0
	for _, in := range inputs {
		{
			res, xds := translateCase(t, in, translate.Options{})
			for _, r := range xds {
				for _, rc := range r.Routes() {
					if len(rc.ProtoReflect().GetUnknown()) > 0 {
						wire++
					}
				}
				for _, redactSecrets := range []bool{false, true} {
					opts := render.Options{RedactSecrets: redactSecrets}
					g, err := render.GatewayXDSOf(r, opts)
					if err != nil {
						t.Fatal(err)
					}
					want, err := render.JSON(g)
					if err != nil {
						t.Fatal(err)
					}
					var got bytes.Buffer
					if err := render.WriteGatewayXDS(&got, r, render.StreamOptions{Options: opts}); err != nil {
						t.Fatalf("%s %s: %v", in, r.Gateway, err)
					}
					if !bytes.Equal(got.Bytes(), want) {
						t.Errorf("%s %s (redact %v): stream differs (-render +stream):\n%s",
							in, r.Gateway, redactSecrets, goldenDiff(want, got.Bytes()))
					}
				}
			}
			want, err := render.JSON(render.Statuses(res))
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := render.WriteStatuses(&got, res); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("%s: streamed statuses differ (-render +stream):\n%s", in, goldenDiff(want, got.Bytes()))
			}
		}
	}
	if wire == 0 {
		t.Error("no route configuration in wire form: the piecewise path was not exercised")
	}
	var empty bytes.Buffer
	if err := render.WriteStatuses(&empty, nil); err != nil || empty.String() != "[]\n" {
		t.Errorf("WriteStatuses(nil) = %q, %v", empty.String(), err)
	}
}

// A route configuration whose virtual hosts are plain fields (not wire
// form), mixed with one in wire form, streams like it renders.
func TestStreamKnownVirtualHosts(t *testing.T) {
	vh := func(name string, routes ...string) *routev3.VirtualHost {
		v := &routev3.VirtualHost{Name: name, Domains: []string{name}}
		for _, r := range routes {
			v.Routes = append(v.Routes, &routev3.Route{Name: r, Match: &routev3.RouteMatch{
				PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/" + r}}})
		}
		return v
	}
	plain := &routev3.RouteConfiguration{Name: "plain", VirtualHosts: []*routev3.VirtualHost{vh("a.example", "r1", "r2"), vh("b.example")},
		ValidateClusters: nil, RequestHeadersToRemove: []string{"x-internal"}}
	mixed := proto.Clone(plain).(*routev3.RouteConfiguration)
	mixed.Name = "mixed"
	enc, err := proto.Marshal(vh("c.example", "r3"))
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	raw = append(raw, 0x12) // field 2 (virtual_hosts), length-delimited
	raw = append(raw, byte(len(enc)))
	raw = append(raw, enc...)
	mixed.ProtoReflect().SetUnknown(raw)
	r := &translate.Resources{Gateway: "ns/gw", Version: "v"}
	r.SetRoutes([]types.Resource{plain, mixed, &routev3.RouteConfiguration{Name: "empty"}})
	g, err := render.GatewayXDSOf(r, render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := render.JSON(g)
	var got bytes.Buffer
	if err := render.WriteGatewayXDS(&got, r, render.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("stream differs (-render +stream):\n%s", goldenDiff(want, got.Bytes()))
	}
	if !strings.Contains(got.String(), `"c.example"`) {
		t.Errorf("the wire-form virtual host is missing:\n%s", got.String())
	}
}

// manyRoutes is a Gateway with one plaintext listener and n routes on one
// hostname, each adding an Authorization header and matching a token.
func manyRoutes(n int) string {
	var b strings.Builder
	b.WriteString(`apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: portico
  listeners: [{name: http, protocol: HTTP, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {ports: [{port: 80}]}
`)
	for i := range n {
		fmt.Fprintf(&b, `---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r%[1]d, namespace: default}
spec:
  parentRefs: [{name: gw}]
  hostnames: [app.example.com]
  rules:
  - matches:
    - path: {type: PathPrefix, value: /p%[1]d}
      method: GET
      headers:
      - {name: X-Api-Token, value: match-secret-%[1]d}
      - {name: X-Signature, type: RegularExpression, value: "sig-secret-[0-9]+"}
      queryParams:
      - {name: token, value: query-secret-%[1]d}
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set: [{name: Authorization, value: "Bearer modifier-secret-%[1]d"}]
        add: [{name: X-Added, value: added-secret}]
        remove: [X-Remove-Me]
    - type: ResponseHeaderModifier
      responseHeaderModifier:
        set: [{name: X-Response, value: response-secret}]
    backendRefs: [{name: web, port: 80}]
`, i)
	}
	return b.String()
}

func loadString(t *testing.T, yaml string) *resource.Snapshot {
	t.Helper()
	s := resource.New()
	if _, err := load.AddYAML(s, "test.yaml", []byte(yaml)); err != nil {
		t.Fatal(err)
	}
	return s.Build()
}

func translateSnap(t *testing.T, snap *resource.Snapshot) *translate.Resources {
	t.Helper()
	res := gatewayapi.Translate(snap, gatewayapi.Options{ControllerName: gatewayapi.DefaultControllerName})
	if len(res.Gateways) != 1 {
		t.Fatalf("%d gateways, want 1", len(res.Gateways))
	}
	r, err := translate.NewTranslator().Translate(res.Gateways[0])
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// With RedactHeaders, no value set by a header modifier and no header or
// query match value is in the document; names, pseudo-header matches and
// the served resources themselves are unchanged.
func TestStreamRedactsHeaders(t *testing.T) {
	r := translateSnap(t, loadString(t, manyRoutes(3)))
	var got bytes.Buffer
	if err := render.WriteGatewayXDS(&got, r, render.StreamOptions{Options: render.Options{RedactSecrets: true}, RedactHeaders: true}); err != nil {
		t.Fatal(err)
	}
	doc := got.String()
	if !json.Valid(got.Bytes()) {
		t.Fatalf("not JSON:\n%s", doc)
	}
	for _, secret := range []string{"modifier-secret", "Bearer", "added-secret", "response-secret", "match-secret", "sig-secret", "query-secret"} {
		if strings.Contains(doc, secret) {
			t.Errorf("document contains %q:\n%.3000s", secret, doc)
		}
	}
	for _, kept := range []string{`"authorization"`, `"x-added"`, `"x-response"`, `"x-api-token"`, `"x-signature"`, `"token"`,
		`"x-remove-me"`, `":method"`, `"exact": "GET"`, `"value": "[redacted]"`, `"exact": "[redacted]"`, `"regex": "[redacted]"`} {
		if !strings.Contains(doc, kept) {
			t.Errorf("document lacks %s:\n%.3000s", kept, doc)
		}
	}
	// The resources served to Envoy keep their values.
	g, err := render.GatewayXDSOf(r, render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := render.JSON(g)
	for _, v := range []string{"Bearer modifier-secret-0", "match-secret-2", "query-secret-1", "sig-secret-[0-9]+"} {
		if !bytes.Contains(plain, []byte(v)) {
			t.Errorf("the served resources lost %q: redaction modified them", v)
		}
	}
}

// Header values in a resource that is not a route table (here a cluster's
// health check, packed nowhere special) and in an Any are redacted too,
// and the shared resource is not modified.
func TestStreamRedactsHeadersAnywhere(t *testing.T) {
	r := testResourcesWithHeaders()
	before := proto.Clone(r.Clusters[0])
	var got bytes.Buffer
	if err := render.WriteGatewayXDS(&got, r, render.StreamOptions{RedactHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got.String(), "hc-secret") || strings.Contains(got.String(), "any-secret") {
		t.Errorf("header values not redacted:\n%s", got.String())
	}
	if !strings.Contains(got.String(), `"x-hc"`) || !strings.Contains(got.String(), `"x-any"`) {
		t.Errorf("header names lost:\n%s", got.String())
	}
	if !proto.Equal(before, r.Clusters[0]) {
		t.Error("the cluster was modified in place")
	}
}

// The stream is written in pieces: no write is larger than a few
// kilobytes, however large the document.
func TestStreamWritesInPieces(t *testing.T) {
	r := translateSnap(t, loadString(t, manyRoutes(400)))
	var rec recorder
	if err := render.WriteGatewayXDS(&rec, r, render.StreamOptions{RedactHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if rec.Len() < 400*1000 {
		t.Fatalf("document of %d bytes, want at least 400 kB", rec.Len())
	}
	if rec.largest > 16<<10 {
		t.Errorf("largest write %d bytes of a %d-byte document: not streamed route by route", rec.largest, rec.Len())
	}
}

func testResourcesWithHeaders() *translate.Resources {
	hv := func(k, v string) *corev3.HeaderValueOption {
		return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, Value: v}}
	}
	cl := clusterWithHealthCheck(hv("x-hc", "hc-secret"))
	vh := &routev3.VirtualHost{Name: "vh", Domains: []string{"*"}, RequestHeadersToAdd: []*corev3.HeaderValueOption{hv("x-any", "any-secret")}}
	rc := &routev3.RouteConfiguration{Name: "rc", VirtualHosts: []*routev3.VirtualHost{vh}}
	return &translate.Resources{Gateway: "ns/gw", Version: "v", Clusters: []types.Resource{cl}, Listeners: []types.Resource{listenerWithAny(rc)}}
}

func clusterWithHealthCheck(h *corev3.HeaderValueOption) *clusterv3.Cluster {
	return &clusterv3.Cluster{Name: "c", HealthChecks: []*corev3.HealthCheck{{
		HealthChecker: &corev3.HealthCheck_HttpHealthCheck_{HttpHealthCheck: &corev3.HealthCheck_HttpHealthCheck{
			Path: "/healthz", RequestHeadersToAdd: []*corev3.HeaderValueOption{h},
		}},
	}}}
}

// listenerWithAny is a listener whose HTTP connection manager (an Any)
// holds rc inline.
func listenerWithAny(rc *routev3.RouteConfiguration) *listenerv3.Listener {
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix:     "http",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: rc},
	})
	if err != nil {
		panic(err)
	}
	return &listenerv3.Listener{Name: "l", FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
		Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm},
	}}}}}
}
