package render

import (
	"bytes"
	"encoding/json"
	"github.com/portico-dev/portico/internal/resource"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/types/known/durationpb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/xds/translate"
)

var now = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))

func testResult() *gatewayapi.Result {
	return &gatewayapi.Result{StatusSet: gatewayapi.NewStatusSet([]gatewayapi.Status{
		{Kind: resource.KindGatewayClass, Name: "portico", GatewayClass: &gwv1.GatewayClassStatus{
			Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: now, ObservedGeneration: 1}},
		}},
		{Kind: resource.KindHTTPRoute, Namespace: "default", Name: "web", Route: &gwv1.RouteStatus{
			Parents: []gwv1.RouteParentStatus{{ControllerName: "portico.dev/gateway-controller", ParentRef: gwv1.ParentReference{Name: "gw"}}},
		}},
	})}
}

func testResources(gw string) *translate.Resources {
	return &translate.Resources{
		Gateway: gw,
		Version: "v-" + gw,
		Listeners: []types.Resource{&listenerv3.Listener{
			Name: "http-80",
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080},
			}}},
		}},
		Clusters: []types.Resource{&clusterv3.Cluster{
			Name:           "default/web/80",
			ConnectTimeout: durationpb.New(2 * time.Second),
			LbPolicy:       clusterv3.Cluster_ROUND_ROBIN,
		}},
		Secrets: []types.Resource{&tlsv3.Secret{
			Name: "default/cert",
			Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
				CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte("CERT")}},
				PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: []byte("TOPSECRETKEY")}},
			}},
		}},
	}
}

func TestBuildShape(t *testing.T) {
	out, err := Build(testResult(), []*translate.Resources{testResources("ns/b"), nil, testResources("ns/a")}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := out.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Statuses []struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Metadata   map[string]string `json:"metadata"`
			Status     map[string]any    `json:"status"`
		} `json:"statuses"`
		XDS []map[string]any `json:"xds"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if len(doc.Statuses) != 2 {
		t.Fatalf("statuses = %d, want 2", len(doc.Statuses))
	}
	gc := doc.Statuses[0]
	if gc.APIVersion != APIVersion || gc.Kind != "GatewayClass" || gc.Metadata["name"] != "portico" {
		t.Errorf("gatewayclass status = %+v", gc)
	}
	if _, ok := gc.Metadata["namespace"]; ok {
		t.Errorf("cluster-scoped object has a namespace: %+v", gc.Metadata)
	}
	if _, ok := gc.Status["conditions"]; !ok {
		t.Errorf("gatewayclass status has no conditions: %v", gc.Status)
	}
	if r := doc.Statuses[1]; r.Kind != "HTTPRoute" || r.Metadata["namespace"] != "default" || r.Status["parents"] == nil {
		t.Errorf("route status = %+v", r)
	}
	if len(doc.XDS) != 2 || doc.XDS[0]["gateway"] != "ns/a" || doc.XDS[1]["gateway"] != "ns/b" {
		t.Fatalf("xds gateways not sorted: %v", doc.XDS)
	}
	g := doc.XDS[0]
	if g["version"] != "v-ns/a" {
		t.Errorf("version = %v", g["version"])
	}
	for _, k := range []string{"listeners", "routes", "clusters", "endpoints", "secrets"} {
		if _, ok := g[k].([]any); !ok {
			t.Errorf("%s is %T, want a list (even when empty)", k, g[k])
		}
	}
	l := g["listeners"].([]any)[0].(map[string]any)
	port := l["address"].(map[string]any)["socketAddress"].(map[string]any)["portValue"]
	if port != float64(8080) {
		t.Errorf("listener portValue = %v (lowerCamel protojson expected)", port)
	}
	c := g["clusters"].([]any)[0].(map[string]any)
	if c["connectTimeout"] != "2s" || c["name"] != "default/web/80" {
		t.Errorf("cluster = %v", c)
	}
	if !bytes.Contains(b, []byte(`"statuses": [`)) || bytes.Index(b, []byte(`"statuses"`)) > bytes.Index(b, []byte(`"xds"`)) {
		t.Errorf("top-level key order: %s", b)
	}
	if !bytes.Contains(b, []byte("VE9QU0VDUkVUS0VZ")) { // base64("TOPSECRETKEY")
		t.Errorf("unredacted output lacks the key")
	}
}

func TestDeterministic(t *testing.T) {
	var first []byte
	for i := 0; i < 20; i++ {
		out, err := Build(testResult(), []*translate.Resources{testResources("ns/a")}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := out.JSON()
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = b
		} else if !bytes.Equal(first, b) {
			t.Fatalf("output differs between runs:\n%s\n%s", first, b)
		}
	}
}

func TestEmpty(t *testing.T) {
	out, err := Build(nil, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := out.JSON()
	if got := string(b); got != "{\n  \"statuses\": [],\n  \"xds\": []\n}\n" {
		t.Errorf("empty output = %q", got)
	}
	y, _ := out.YAML()
	if got := string(y); got != "statuses: []\nxds: []\n" {
		t.Errorf("empty yaml = %q", got)
	}
}

func TestRedactSecrets(t *testing.T) {
	res := testResources("ns/a")
	g, err := GatewayXDSOf(res, Options{RedactSecrets: true})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := JSON(g)
	if bytes.Contains(b, []byte("VE9QU0VDUkVUS0VZ")) || bytes.Contains(b, []byte("TOPSECRETKEY")) {
		t.Fatalf("private key not redacted: %s", b)
	}
	if !bytes.Contains(b, []byte(Redacted)) {
		t.Errorf("no redaction marker: %s", b)
	}
	if !bytes.Contains(b, []byte("Q0VSVA==")) { // base64("CERT")
		t.Errorf("certificate should be kept: %s", b)
	}
	// The served resource must not be modified.
	key := res.Secrets[0].(*tlsv3.Secret).GetTlsCertificate().GetPrivateKey().GetInlineBytes()
	if string(key) != "TOPSECRETKEY" {
		t.Errorf("input secret modified: %q", key)
	}
}

func TestYAMLKeepsKeyOrder(t *testing.T) {
	out, err := Build(testResult(), []*translate.Resources{testResources("ns/a")}, Options{RedactSecrets: true})
	if err != nil {
		t.Fatal(err)
	}
	y, err := out.YAML()
	if err != nil {
		t.Fatal(err)
	}
	s := string(y)
	order := []string{"statuses:", "apiVersion: gateway.networking.k8s.io/v1", "kind: GatewayClass", "xds:", "gateway: ns/a", "version: v-ns/a", "listeners:", "routes: []", "clusters:", "endpoints: []", "secrets:"}
	last := -1
	for _, k := range order {
		i := strings.Index(s, k)
		if i < 0 || i < last {
			t.Fatalf("%q missing or out of order in\n%s", k, s)
		}
		last = i
	}
	if !strings.Contains(s, "portValue: 8080") {
		t.Errorf("yaml numbers: %s", s)
	}
	// Only-status and only-xds documents.
	so, _ := JSON(StatusOutput{Statuses: out.Statuses})
	if bytes.Contains(so, []byte(`"xds"`)) || !bytes.Contains(so, []byte(`"statuses"`)) {
		t.Errorf("status output: %s", so)
	}
}

func TestResourceKeepsFieldOrderAndText(t *testing.T) {
	v, err := Resource(&listenerv3.Listener{Name: "l", StatPrefix: "a&b<c>", Address: &corev3.Address{}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	obj, ok := v.(Object)
	if !ok {
		t.Fatalf("Resource returned %T", v)
	}
	if obj[0].Key != "name" {
		t.Errorf("first key %q, want name (protojson field order)", obj[0].Key)
	}
	if sp, _ := obj.Get("statPrefix"); sp != "a&b<c>" {
		t.Errorf("statPrefix = %v", sp)
	}
	b, err := JSON(v)
	if err != nil {
		t.Fatal(err)
	}
	if want := "{\n  \"name\": \"l\",\n  \"address\": {},\n  \"statPrefix\": \"a&b<c>\"\n}\n"; string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
	y, err := YAML(v)
	if err != nil {
		t.Fatal(err)
	}
	if want := "name: l\naddress: {}\nstatPrefix: a&b<c>\n"; string(y) != want {
		t.Errorf("YAML = %q, want %q", y, want)
	}
}
