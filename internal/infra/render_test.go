package infra

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/proxyspec"
)

var params = Params{XDSAddress: "portico-xds.portico-system.svc:18000", XDSServerName: "portico-xds.portico-system.svc"}

func testGateway() *gwv1.Gateway {
	return &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "edge", UID: "uid-1"},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: "portico",
			Infrastructure: &gwv1.GatewayInfrastructure{
				Labels:      map[gwv1.LabelKey]gwv1.LabelValue{"team": "web", proxyspec.LabelManagedBy: "someone-else"},
				Annotations: map[gwv1.AnnotationKey]gwv1.AnnotationValue{"example.com/owner": "web"},
			},
		},
	}
}

func TestRenderObjects(t *testing.T) {
	pc := v1alpha1.ProxyConfigSpec{
		Image:    "envoy:test",
		Replicas: ptr.To[int32](3),
		Service:  v1alpha1.ProxyService{Type: corev1.ServiceTypeClusterIP, Annotations: map[string]string{"lb": "internal"}},
	}
	objs, err := RenderSpec(proxyspec.Spec{Gateway: testGateway(), Proxy: pc, Ports: []int32{443, 80, 8080}}, params)
	if err != nil {
		t.Fatal(err)
	}
	d := objs.Deployment
	if *d.Name != "portico-edge" || *d.Namespace != "apps" {
		t.Fatalf("deployment %s/%s", *d.Namespace, *d.Name)
	}
	// spec.infrastructure labels and annotations propagate, ours win.
	if d.Labels["team"] != "web" || d.Labels[proxyspec.LabelManagedBy] != proxyspec.ManagedByValue || d.Annotations["example.com/owner"] != "web" {
		t.Errorf("labels/annotations not propagated: %v %v", d.Labels, d.Annotations)
	}
	if d.Spec.Template.Labels["team"] != "web" {
		t.Errorf("pod labels not propagated: %v", d.Spec.Template.Labels)
	}
	if or := d.OwnerReferences[0]; *or.Kind != "Gateway" || *or.UID != "uid-1" || !*or.Controller {
		t.Errorf("owner reference = %+v", or)
	}
	if *d.Spec.Replicas != 3 || *d.Spec.Template.Spec.Containers[0].Image != "envoy:test" {
		t.Errorf("replicas/image not from ProxyConfig")
	}
	var ports []int32
	for _, p := range objs.Service.Spec.Ports {
		ports = append(ports, *p.Port)
	}
	if !reflect.DeepEqual(ports, []int32{80, 443, 8080}) {
		t.Errorf("service ports = %v", ports)
	}
	if *objs.Service.Spec.Type != corev1.ServiceTypeClusterIP || objs.Service.Annotations["lb"] != "internal" {
		t.Errorf("service type/annotations not from ProxyConfig")
	}
	// Deterministic.
	again, _ := RenderSpec(proxyspec.Spec{Gateway: testGateway(), Proxy: pc, Ports: []int32{8080, 443, 80}}, params)
	if !reflect.DeepEqual(objs, again) {
		t.Error("render is not deterministic")
	}
	// Defaults.
	def, _ := RenderSpec(proxyspec.Spec{Gateway: testGateway(), Proxy: v1alpha1.ProxyConfigSpec{}, Ports: []int32{80}}, params)
	if *def.Service.Spec.Type != corev1.ServiceTypeLoadBalancer || *def.Deployment.Spec.Replicas != 2 ||
		*def.Deployment.Spec.Template.Spec.Containers[0].Image != v1alpha1.DefaultEnvoyImage {
		t.Error("defaults not applied")
	}
}

func TestBootstrap(t *testing.T) {
	out, err := Bootstrap("apps", "edge", v1alpha1.ProxyConfigSpec{}, params)
	if err != nil {
		t.Fatal(err)
	}
	b := &bootstrapv3.Bootstrap{}
	if err := protojson.Unmarshal([]byte(out), b); err != nil {
		t.Fatal(err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	if b.Node.Cluster != "apps/edge" {
		t.Errorf("node.cluster = %q", b.Node.Cluster)
	}
	if a := b.Admin.Address.GetSocketAddress().Address; a != "127.0.0.1" {
		t.Errorf("admin listens on %s, want localhost only", a)
	}
	if got := b.DynamicResources.AdsConfig.ApiType.String(); got != "DELTA_GRPC" {
		t.Errorf("ADS api type = %s", got)
	}
	if !strings.Contains(out, "envoy.transport_sockets.tls") || !strings.Contains(out, sdsClientFile) || !strings.Contains(out, sdsCAFile) {
		t.Error("xDS connection is not mutual TLS with file-based SDS")
	}
	files, err := BootstrapFiles("apps", "edge", v1alpha1.ProxyConfigSpec{}, params)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{sdsClientFile, sdsCAFile} {
		dr := &discoveryv3.DiscoveryResponse{}
		if err := protojson.Unmarshal([]byte(files[name]), dr); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sec := &tlsv3.Secret{}
		if len(dr.Resources) != 1 || dr.Resources[0].UnmarshalTo(sec) != nil || sec.ValidateAll() != nil {
			t.Fatalf("%s does not hold one valid Secret", name)
		}
		if !strings.Contains(files[name], "/etc/portico/xds") || !strings.Contains(files[name], "watchedDirectory") {
			t.Errorf("%s does not watch the certificate directory: %s", name, files[name])
		}
	}
	if _, err := Bootstrap("apps", "edge", v1alpha1.ProxyConfigSpec{}, Params{XDSAddress: "no-port"}); err == nil {
		t.Error("a bad xDS address was accepted")
	}
	var js map[string]any
	if err := json.Unmarshal([]byte(out), &js); err != nil {
		t.Fatal(err)
	}
}
