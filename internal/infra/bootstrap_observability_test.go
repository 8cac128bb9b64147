package infra

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	overloadv3 "github.com/envoyproxy/go-control-plane/envoy/config/overload/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	connectionsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	fixedheapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/proxyspec"
	"github.com/portico-dev/portico/internal/testenv"
)

func parseBootstrap(t *testing.T, out string) *bootstrapv3.Bootstrap {
	t.Helper()
	b := &bootstrapv3.Bootstrap{}
	if err := protojson.Unmarshal([]byte(out), b); err != nil {
		t.Fatal(err)
	}
	if err := b.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	return b
}

func bootstrapOf(t *testing.T, pc v1alpha1.ProxyConfigSpec) *bootstrapv3.Bootstrap {
	t.Helper()
	out, err := Bootstrap("apps", "edge", pc, params)
	if err != nil {
		t.Fatal(err)
	}
	return parseBootstrap(t, out)
}

func listenerNamed(b *bootstrapv3.Bootstrap, name string) *listenerv3.Listener {
	for _, l := range b.GetStaticResources().GetListeners() {
		if l.Name == name {
			return l
		}
	}
	return nil
}

func withMemoryLimit(pc v1alpha1.ProxyConfigSpec, limit string) v1alpha1.ProxyConfigSpec {
	pc.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)}}
	return pc
}

// The metrics listener listens on all addresses at the metrics port and
// routes one exact path to the admin cluster; metrics.disabled removes it
// and a port the Pod uses otherwise is refused.
func TestBootstrapMetricsListener(t *testing.T) {
	for _, tc := range []struct {
		name    string
		metrics *v1alpha1.ProxyMetrics
		port    uint32 // 0: none
	}{
		{"default", nil, 19090},
		{"port", &v1alpha1.ProxyMetrics{Port: ptr.To[int32](9102)}, 9102},
		{"disabled", &v1alpha1.ProxyMetrics{Disabled: true, Port: ptr.To[int32](9102)}, 0},
	} {
		b := bootstrapOf(t, v1alpha1.ProxyConfigSpec{Metrics: tc.metrics})
		if listenerNamed(b, readyListenerName) == nil {
			t.Errorf("%s: no readiness listener", tc.name)
		}
		l := listenerNamed(b, metricsListenerName)
		if tc.port == 0 {
			if l != nil {
				t.Errorf("%s: metrics listener %v", tc.name, l)
			}
			continue
		}
		if l == nil {
			t.Fatalf("%s: no metrics listener", tc.name)
		}
		sa := l.GetAddress().GetSocketAddress()
		if sa.GetAddress() != "0.0.0.0" || sa.GetPortValue() != tc.port || !l.IgnoreGlobalConnLimit {
			t.Errorf("%s: metrics listener on %s:%d (ignores the connection cap: %v)", tc.name, sa.GetAddress(), sa.GetPortValue(), l.IgnoreGlobalConnLimit)
		}
		hcm := &hcmv3.HttpConnectionManager{}
		if err := l.FilterChains[0].Filters[0].GetTypedConfig().UnmarshalTo(hcm); err != nil {
			t.Fatal(err)
		}
		vhs := hcm.GetRouteConfig().GetVirtualHosts()
		if len(vhs) != 1 || len(vhs[0].Routes) != 1 {
			t.Fatalf("%s: routes %v, want one", tc.name, vhs)
		}
		r := vhs[0].Routes[0]
		if r.GetMatch().GetPath() != MetricsPath || r.GetRoute().GetCluster() != adminClusterName {
			t.Errorf("%s: route %v, want exact %s to %s", tc.name, r, MetricsPath, adminClusterName)
		}
	}
	for _, port := range []int32{proxyspec.AdminPort, proxyspec.ReadyPort, proxyspec.AgentPort} {
		if _, err := Bootstrap("apps", "edge", v1alpha1.ProxyConfigSpec{Metrics: &v1alpha1.ProxyMetrics{Port: ptr.To(port)}}, params); err == nil {
			t.Errorf("metrics port %d (taken) accepted", port)
		}
	}
}

func monitorNamed(om *overloadv3.OverloadManager, name string) *overloadv3.ResourceMonitor {
	for _, m := range om.GetResourceMonitors() {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Every bootstrap caps client connections; with a memory limit the heap
// is watched against maxHeapPercent of it, and the actions trigger at the
// documented fractions of that.
func TestBootstrapOverload(t *testing.T) {
	conns := func(om *overloadv3.OverloadManager) int64 {
		t.Helper()
		m := monitorNamed(om, connectionsMonitor)
		if m == nil {
			t.Fatal("no connection monitor")
		}
		c := &connectionsv3.DownstreamConnectionsConfig{}
		if err := m.GetTypedConfig().UnmarshalTo(c); err != nil {
			t.Fatal(err)
		}
		return c.MaxActiveDownstreamConnections
	}
	heap := func(om *overloadv3.OverloadManager) uint64 {
		t.Helper()
		m := monitorNamed(om, heapMonitor)
		if m == nil {
			return 0
		}
		c := &fixedheapv3.FixedHeapConfig{}
		if err := m.GetTypedConfig().UnmarshalTo(c); err != nil {
			t.Fatal(err)
		}
		return c.MaxHeapSizeBytes
	}

	om := bootstrapOf(t, v1alpha1.ProxyConfigSpec{}).OverloadManager
	if conns(om) != DefaultMaxDownstreamConnections || heap(om) != 0 || len(om.Actions) != 0 || len(om.LoadshedPoints) != 0 {
		t.Errorf("without a memory limit: %v", om)
	}
	om = bootstrapOf(t, v1alpha1.ProxyConfigSpec{Overload: &v1alpha1.ProxyOverload{MaxDownstreamConnections: ptr.To[int64](1000)}}).OverloadManager
	if conns(om) != 1000 {
		t.Errorf("maxDownstreamConnections 1000: %d", conns(om))
	}

	om = bootstrapOf(t, withMemoryLimit(v1alpha1.ProxyConfigSpec{}, "1000Mi")).OverloadManager
	if got, want := heap(om), uint64(1000<<20)*9/10; got != want {
		t.Errorf("heap of a 1000Mi limit: %d, want %d (90%%)", got, want)
	}
	want := map[string]float64{
		"envoy.overload_actions.shrink_heap":             0.90,
		"envoy.overload_actions.disable_http_keepalive":  0.95,
		"envoy.overload_actions.stop_accepting_requests": 0.95,
		"envoy.load_shed_points.tcp_listener_accept":     0.98,
	}
	got := map[string]float64{}
	for _, a := range om.Actions {
		got[a.Name] = a.Triggers[0].GetThreshold().GetValue()
	}
	for _, p := range om.LoadshedPoints {
		got[p.Name] = p.Triggers[0].GetThreshold().GetValue()
	}
	if len(got) != len(want) {
		t.Errorf("actions and load-shed points %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s at %v, want %v", k, got[k], v)
		}
	}

	pc := withMemoryLimit(v1alpha1.ProxyConfigSpec{Overload: &v1alpha1.ProxyOverload{MaxHeapPercent: ptr.To[int32](50)}}, "1Gi")
	if got := heap(bootstrapOf(t, pc).OverloadManager); got != 1<<29 {
		t.Errorf("50%% of 1Gi: %d", got)
	}
	// Out of bounds (refused by the Gateway API stage): the defaults.
	pc = withMemoryLimit(v1alpha1.ProxyConfigSpec{Overload: &v1alpha1.ProxyOverload{
		MaxHeapPercent: ptr.To[int32](500), MaxDownstreamConnections: ptr.To[int64](-1),
	}}, "1000Mi")
	om = bootstrapOf(t, pc).OverloadManager
	if heap(om) != uint64(1000<<20)*9/10 || conns(om) != DefaultMaxDownstreamConnections {
		t.Errorf("out-of-bounds values: heap %d, connections %d", heap(om), conns(om))
	}
	// No overflow for the largest limit.
	if h, ok := MaxHeapBytes(withMemoryLimit(v1alpha1.ProxyConfigSpec{}, "8Ei")); !ok || h < 1<<62 {
		t.Errorf("heap of 8Ei: %d %v", h, ok)
	}
	if _, ok := MaxHeapBytes(withMemoryLimit(v1alpha1.ProxyConfigSpec{}, "0")); ok {
		t.Error("a zero memory limit gives a heap limit")
	}
}

// envoyValidate runs `envoy --mode validate` on the bootstrap files,
// their /etc/envoy paths moved into a temporary directory.
func envoyValidate(t *testing.T, files map[string]string, args ...string) {
	t.Helper()
	bin := testenv.RequireEnvoy(t)
	dir := t.TempDir()
	for name, content := range files {
		content = strings.ReplaceAll(content, bootstrapDir, dir)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--mode", "validate", "--config-path", filepath.Join(dir, bootstrapFile),
		"--log-level", "warning", "--disable-hot-restart"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), " OK") {
		t.Errorf("envoy --mode validate: %v\n%s", err, out)
	}
}

// A real Envoy accepts the bootstraps: with and without a memory limit,
// metrics on another port or off, and the standalone one with metrics.
func TestBootstrapEnvoyValidates(t *testing.T) {
	testenv.RequireEnvoy(t)
	for name, pc := range map[string]v1alpha1.ProxyConfigSpec{
		"defaults":     {},
		"memory limit": withMemoryLimit(v1alpha1.ProxyConfigSpec{Overload: &v1alpha1.ProxyOverload{MaxHeapPercent: ptr.To[int32](80), MaxDownstreamConnections: ptr.To[int64](10)}}, "256Mi"),
		"metrics off":  {Metrics: &v1alpha1.ProxyMetrics{Disabled: true}},
		"metrics port": {Metrics: &v1alpha1.ProxyMetrics{Port: ptr.To[int32](9102)}},
	} {
		t.Run(name, func(t *testing.T) {
			files, err := BootstrapFiles("apps", "edge", pc, params)
			if err != nil {
				t.Fatal(err)
			}
			envoyValidate(t, files, "--service-node", "edge-abc12")
		})
	}
	t.Run("standalone", func(t *testing.T) {
		out, err := StandaloneBootstrapWith(StandaloneOptions{Gateway: "default/quickstart", NodeID: "e1",
			XDSAddress: "127.0.0.1:18000", AdminAddress: "127.0.0.1:9901", MetricsAddress: "127.0.0.1:19090"})
		if err != nil {
			t.Fatal(err)
		}
		envoyValidate(t, map[string]string{bootstrapFile: out})
	})
}

// The quickstart's hand-written bootstrap has the metrics listener, the
// admin cluster behind it and the overload manager that Portico renders
// for an Envoy run by hand with metrics on 127.0.0.1:19090.
func TestQuickstartBootstrapMatchesStandalone(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "examples", "quickstart", ".envoy", "envoy-bootstrap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	quick := parseBootstrap(t, string(js))
	out, err := StandaloneBootstrapWith(StandaloneOptions{Gateway: "default/quickstart", NodeID: "quickstart-envoy-1",
		XDSAddress: "127.0.0.1:18000", AdminAddress: "127.0.0.1:9901", MetricsAddress: "127.0.0.1:19090"})
	if err != nil {
		t.Fatal(err)
	}
	rendered := parseBootstrap(t, out)
	if q, r := listenerNamed(quick, metricsListenerName), listenerNamed(rendered, metricsListenerName); q == nil || !proto.Equal(q, r) {
		t.Errorf("the quickstart's metrics listener differs from the rendered one:\n%v\n%v", q, r)
	}
	var q, r proto.Message
	for _, c := range quick.GetStaticResources().GetClusters() {
		if c.Name == adminClusterName {
			q = c
		}
	}
	for _, c := range rendered.GetStaticResources().GetClusters() {
		if c.Name == adminClusterName {
			r = c
		}
	}
	if q == nil || !proto.Equal(q, r) {
		t.Errorf("the quickstart's admin cluster differs from the rendered one:\n%v\n%v", q, r)
	}
	if !proto.Equal(quick.OverloadManager, rendered.OverloadManager) {
		t.Errorf("the quickstart's overload manager differs from the rendered one:\n%v\n%v", quick.OverloadManager, rendered.OverloadManager)
	}
	// Without a metrics address, no listener and no admin cluster.
	plain, err := StandaloneBootstrap("default/quickstart", "e1", "127.0.0.1:18000", "127.0.0.1:9901", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b := parseBootstrap(t, plain); len(b.StaticResources.Listeners) != 0 || len(b.StaticResources.Clusters) != 1 || b.OverloadManager == nil {
		t.Errorf("standalone bootstrap without metrics: %v", b.StaticResources)
	}
	if _, err := StandaloneBootstrapWith(StandaloneOptions{Gateway: "a/b", XDSAddress: "127.0.0.1:18000",
		AdminAddress: "127.0.0.1:9901", MetricsAddress: "127.0.0.1:9901"}); err == nil {
		t.Error("a metrics address equal to the admin address was accepted")
	}
}
