package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/testenv/workload"
	"github.com/portico-dev/portico/internal/xds/translate"
)

func anyResource(t *testing.T, name string, m proto.Message) *discoveryv3.Resource {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return &discoveryv3.Resource{Name: name, Version: "1", Resource: a}
}

func socketAddress(port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: "0.0.0.0", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}}}}
}

// tcpListenerOf is a listener on port whose one chain is a tcp_proxy with
// stat prefix stat to clusters (weighted when several).
func tcpListenerOf(t *testing.T, name string, port uint32, stat string, clusters ...string) *discoveryv3.Resource {
	t.Helper()
	tp := &tcpproxyv3.TcpProxy{StatPrefix: stat}
	if len(clusters) == 1 {
		tp.ClusterSpecifier = &tcpproxyv3.TcpProxy_Cluster{Cluster: clusters[0]}
	} else {
		wc := &tcpproxyv3.TcpProxy_WeightedCluster{}
		for _, c := range clusters {
			wc.Clusters = append(wc.Clusters, &tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{Name: c, Weight: 1})
		}
		tp.ClusterSpecifier = &tcpproxyv3.TcpProxy_WeightedClusters{WeightedClusters: wc}
	}
	a, err := anypb.New(tp)
	if err != nil {
		t.Fatal(err)
	}
	return anyResource(t, name, &listenerv3.Listener{Name: name, Address: socketAddress(port),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{Name: "envoy.filters.network.tcp_proxy",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: a}}}}}})
}

func clusterOf(t *testing.T, name string) *discoveryv3.Resource {
	return anyResource(t, name, &clusterv3.Cluster{Name: name})
}

func respond(a *ADS, typeURL string, at time.Time, removed []string, rs ...*discoveryv3.Resource) {
	a.apply(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: typeURL, Resources: rs, RemovedResources: removed}, at)
}

// A Cond over tcpServed turns true with the response that completes the
// listener and its clusters (whichever comes last), false with the one
// that takes either away, and is evaluated for its types only.
func TestCondFollowsTCPServed(t *testing.T) {
	a := newTestADS()
	ctx := t.Context()
	const marker = "tcp-probe-100-3-z"
	const stat = "tcproute_bench-3_" + marker + "_rule_0"
	listener := "bench-infra/gw0/tcp-9000"
	respond(a, resourcev3.ListenerType, time.Unix(1, 0), nil,
		tcpListenerOf(t, listener, TCPProbePort, "tcproute_bench-infra_tcp-9000_none", "portico/invalid-backend"))
	calls := 0
	c := a.Cond(func(st map[string]map[string]*discoveryv3.Resource) bool {
		calls++
		return tcpServed(st, TCPProbePort, marker)
	}, resourcev3.ListenerType, resourcev3.ClusterType)
	if a.Holds(c) || calls != 1 {
		t.Fatalf("held %v after %d evaluations at registration", a.Holds(c), calls)
	}
	// The listener first, naming a cluster not yet held: not served.
	respond(a, resourcev3.ListenerType, time.Unix(2, 0), nil, tcpListenerOf(t, listener, TCPProbePort, stat, "bench-3/live/8080"))
	if a.Holds(c) {
		t.Fatal("served without its cluster")
	}
	// An endpoint response is not one of its types.
	respond(a, resourcev3.EndpointType, time.Unix(3, 0), nil, deltaResource(t, "bench-3/live/8080", cla("bench-3/live/8080", "10.0.0.1")))
	if calls != 2 {
		t.Errorf("%d evaluations after an EDS response, want 2", calls)
	}
	t4 := time.Unix(4, 0)
	respond(a, resourcev3.ClusterType, t4, nil, clusterOf(t, "bench-3/live/8080"))
	if got, err := a.WaitCond(ctx, c, true); err != nil || !got.Equal(t4) {
		t.Fatalf("served at %v (%v), want %v (the cluster's arrival)", got, err, t4)
	}
	// The cluster removed: no longer served.
	t5 := time.Unix(5, 0)
	respond(a, resourcev3.ClusterType, t5, []string{"bench-3/live/8080"})
	if got, err := a.WaitCond(ctx, c, false); err != nil || !got.Equal(t5) {
		t.Fatalf("unserved at %v (%v), want %v", got, err, t5)
	}
	// Back, then the listener returns to no route.
	respond(a, resourcev3.ClusterType, time.Unix(6, 0), nil, clusterOf(t, "bench-3/live/8080"))
	t7 := time.Unix(7, 0)
	respond(a, resourcev3.ListenerType, t7, nil,
		tcpListenerOf(t, listener, TCPProbePort, "tcproute_bench-infra_tcp-9000_none", "portico/invalid-backend"))
	if got, err := a.WaitCond(ctx, c, false); err != nil || !got.Equal(t7) {
		t.Fatalf("unserved at %v (%v), want %v", got, err, t7)
	}
	a.RemoveCond(c)
	if len(a.conds) != 0 {
		t.Errorf("%d conds left", len(a.conds))
	}
	n := calls
	respond(a, resourcev3.ListenerType, time.Unix(8, 0), nil, tcpListenerOf(t, listener, TCPProbePort, stat, "bench-3/live/8080"))
	if calls != n {
		t.Error("a removed Cond was evaluated")
	}
}

// WaitCond gives up with the context, naming what it waited for.
func TestWaitCondTimeout(t *testing.T) {
	a := newTestADS()
	c := a.Cond(func(map[string]map[string]*discoveryv3.Resource) bool { return false }, resourcev3.ListenerType)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := a.WaitCond(ctx, c, true); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "condition not true") {
		t.Errorf("err = %v", err)
	}
}

func TestTCPServed(t *testing.T) {
	const marker = "tcp-probe-1-2-z"
	stat := "tcproute_bench-2_" + marker + "_rule_0"
	a, b := "bench-2/live/8080", "bench-2/other/8080"
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{StatPrefix: stat})
	if err != nil {
		t.Fatal(err)
	}
	httpListener := anyResource(t, "l", &listenerv3.Listener{Name: "l", Address: socketAddress(TCPProbePort),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{Name: "hcm",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm}}}}}})
	defaultChain := func() *discoveryv3.Resource {
		tp, err := anypb.New(&tcpproxyv3.TcpProxy{StatPrefix: stat, ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: a}})
		if err != nil {
			t.Fatal(err)
		}
		return anyResource(t, "l", &listenerv3.Listener{Name: "l", Address: socketAddress(TCPProbePort),
			DefaultFilterChain: &listenerv3.FilterChain{Filters: []*listenerv3.Filter{{Name: "tcp",
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: tp}}}}})
	}
	for _, c := range []struct {
		name     string
		listener *discoveryv3.Resource
		clusters []string
		want     bool
	}{
		{"served", tcpListenerOf(t, "l", TCPProbePort, stat, a), []string{a}, true},
		{"cluster missing", tcpListenerOf(t, "l", TCPProbePort, stat, a), []string{b}, false},
		{"another port", tcpListenerOf(t, "l", TCPProbePort+1, stat, a), []string{a}, false},
		{"another route", tcpListenerOf(t, "l", TCPProbePort, "tcproute_bench-2_tcp-probe-1-20-z_rule_0", a), []string{a}, false},
		{"weighted, both held", tcpListenerOf(t, "l", TCPProbePort, stat, a, b), []string{a, b}, true},
		{"weighted, one missing", tcpListenerOf(t, "l", TCPProbePort, stat, a, b), []string{a}, false},
		{"no cluster named", tcpListenerOf(t, "l", TCPProbePort, stat, []string{}...), []string{a}, false},
		{"marker in an HTTP filter", httpListener, []string{a}, false},
		{"default filter chain", defaultChain(), []string{a}, true},
	} {
		st := map[string]map[string]*discoveryv3.Resource{
			resourcev3.ListenerType: {"l": c.listener}, resourcev3.ClusterType: {},
		}
		for _, n := range c.clusters {
			st[resourcev3.ClusterType][n] = clusterOf(t, n)
		}
		if got := tcpServed(st, TCPProbePort, marker); got != c.want {
			t.Errorf("%s: tcpServed = %v, want %v", c.name, got, c.want)
		}
	}
}

// The assumption tcpServed rests on, against the real translator: a TCP
// listener serves its oldest TCPRoute, with a tcp_proxy whose stat prefix
// carries that route's name (with the probes' naming), to clusters the
// Gateway has; the route it displaced is not served.
func TestTCPServedByTranslation(t *testing.T) {
	c := workload.Copy(workload.WithTCPRoutes(workload.Snapshot(10), 2)) // infra/tcp0: tcp0 (port 10000, tcproute0), tcp1 (10001, tcproute1)
	const probe = "tcp-probe-100-3-z"
	r := TCPRoute("team0", probe, tcpProbeLabel, "tcp0", "svc0", 8080)
	r.Spec.ParentRefs = []gwv1.ParentReference{{Namespace: ptr.To(gwv1.Namespace("infra")), Name: "tcp0", SectionName: ptr.To(gwv1.SectionName("tcp0"))}}
	r.Generation = 1
	r.CreationTimestamp = metav1.NewTime(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)) // older than the workload's routes
	c.TCPRoutes.Set(resource.Key{Namespace: "team0", Name: probe}, r)
	res := gatewayapi.Translate(c.Build(), gatewayapi.Options{ControllerName: workload.ControllerName})
	out, errs := translate.TranslateAll(res.Gateways)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var gw *translate.Resources
	for _, o := range out {
		if o.Gateway == "infra/tcp0" {
			gw = o
		}
	}
	if gw == nil {
		t.Fatal("no resources for infra/tcp0")
	}
	if len(gw.Problems) > 0 {
		t.Fatalf("problems: %v", gw.Problems)
	}
	st := map[string]map[string]*discoveryv3.Resource{resourcev3.ListenerType: {}, resourcev3.ClusterType: {}}
	for typ, list := range map[string][]proto.Message{resourcev3.ListenerType: messages(gw.Listeners), resourcev3.ClusterType: messages(gw.Clusters)} {
		for _, m := range list {
			name := m.(interface{ GetName() string }).GetName()
			st[typ][name] = anyResource(t, name, m)
		}
	}
	for _, c := range []struct {
		port   uint32
		marker string
		want   bool
	}{{10000, probe, true}, {10000, "tcproute0", false}, {10001, "tcproute1", true}, {10001, probe, false}} {
		if got := tcpServed(st, c.port, c.marker); got != c.want {
			t.Errorf("port %d, %s: served %v, want %v", c.port, c.marker, got, c.want)
		}
	}
	st[resourcev3.ClusterType] = map[string]*discoveryv3.Resource{}
	if tcpServed(st, 10000, probe) {
		t.Error("served without clusters")
	}
}

func messages[T proto.Message](in []T) []proto.Message {
	out := make([]proto.Message, len(in))
	for i, m := range in {
		out[i] = m
	}
	return out
}

// The mixed snapshot translates fully with the Gateways it adds, and a
// wrong Gateway count is an error: the checks FullTranslationWithTCP's
// measurement relies on, without running the benchmark.
func TestTranslateFullWithTCPRoutes(t *testing.T) {
	snap := workload.WithTCPRoutes(workload.Snapshot(100), 60) // 2 TCP Gateways (50 listeners each at most)
	if err := translateFull(snap, workload.Gateways+2, true, "mixed"); err != nil {
		t.Fatal(err)
	}
	if err := translateFull(snap, workload.Gateways+2, false, "mixed"); err != nil {
		t.Fatal(err)
	}
	if err := translateFull(snap, workload.Gateways, true, "mixed"); err == nil || !strings.Contains(err.Error(), "mixed") {
		t.Errorf("wrong gateway count: err = %v", err)
	}
}

// compareRounds alternates the order, takes each round's ratio and the
// medians, and stops at the first error.
func TestCompareRounds(t *testing.T) {
	var order []int
	alone := []time.Duration{100, 120, 90} // ms, per round
	with := []time.Duration{110, 150, 99}  // ratios 1.1, 1.25, 1.1
	allocs := [2][]uint64{{10, 12, 11}, {20, 22, 21}}
	calls := [2]int{}
	fake := func(w int, d []time.Duration) func() (testing.BenchmarkResult, error) {
		return func() (testing.BenchmarkResult, error) {
			i := calls[w]
			calls[w]++
			order = append(order, w)
			return testing.BenchmarkResult{N: 2, T: 2 * d[i] * time.Millisecond, MemAllocs: 2 * allocs[w][i]}, nil
		}
	}
	m, err := compareRounds(3, [2]func() (testing.BenchmarkResult, error){fake(0, alone), fake(1, with)})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 1, 1, 0, 0, 1}; !reflect.DeepEqual(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	want := &TranslateMixed{Rounds: 3, Alone: TranslateFull{Ms: 100, Allocs: 11}, With: TranslateFull{Ms: 110, Allocs: 21},
		Ratio: 1.1, RoundRatios: []float64{1.1, 1.25, 1.1}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("got %+v\nwant %+v", m, want)
	}
	boom := errors.New("boom")
	_, err = compareRounds(2, [2]func() (testing.BenchmarkResult, error){
		func() (testing.BenchmarkResult, error) {
			return testing.BenchmarkResult{N: 1, T: time.Millisecond}, nil
		},
		func() (testing.BenchmarkResult, error) { return testing.BenchmarkResult{}, boom },
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "round 1") {
		t.Errorf("err = %v", err)
	}
	if _, err := compareRounds(0, [2]func() (testing.BenchmarkResult, error){}); err == nil {
		t.Error("0 rounds accepted")
	}
	if got := median([]float64{3, 1, 2, 4}); got != 2 {
		t.Errorf("median of an even count = %v, want the lower middle 2", got)
	}
}

// serveOnce listens on loopback and hands each connection to f.
func serveOnce(t *testing.T, f func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); f(c) }()
		}
	}()
	return l.Addr().String()
}

// A connection reaches the backend only when the echo's answer to its own
// token comes back: not when it is refused, closed at once (Envoy's
// listener without a route), or answered otherwise.
func TestTCPExchange(t *testing.T) {
	ctx := t.Context()
	e, err := startTCPEcho("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	echo := e.Addr().String()
	if err := tcpExchange(ctx, echo, "tok-1", time.Second); err != nil {
		t.Fatalf("through the echo: %v", err)
	}
	closer := serveOnce(t, func(net.Conn) {})
	other := serveOnce(t, func(c net.Conn) {
		line, _ := bufio.NewReader(c).ReadString('\n')
		_, _ = io.WriteString(c, tcpEchoReply(strings.TrimSpace(line)+"x"))
	})
	for name, addr := range map[string]string{"closed at once": closer, "another answer": other} {
		if err := tcpExchange(ctx, addr, "tok-2", time.Second); err == nil {
			t.Errorf("%s: reached the backend", name)
		}
	}
	// A client that sends nothing does not hold Close up.
	idle, err := net.Dial("tcp", echo)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if err := tcpExchange(ctx, echo, "tok-3", time.Second); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for an idle connection")
	}
	if err := tcpExchange(ctx, echo, "tok-4", time.Second); err == nil {
		t.Error("reached the echo after its Close")
	}
	// The idle connection was closed by the echo.
	_ = idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := idle.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
		t.Errorf("idle connection after Close: %d bytes, %v", n, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// The probe Gateway keeps the HTTP listener the HTTP probes use and adds
// one TCP listener per TCPRoute role, on distinct ports; TCPRoute pins
// its listener by section.
func TestProbeGatewayAndTCPRoute(t *testing.T) {
	gw := ProbeGatewayObject()
	if gw.Name != ProbeGateway || gw.Namespace != InfraNamespace {
		t.Fatalf("probe Gateway %s/%s", gw.Namespace, gw.Name)
	}
	if !reflect.DeepEqual(gw.Spec.Listeners[0], Gateway(ProbeGateway).Spec.Listeners[0]) {
		t.Error("the HTTP listener changed")
	}
	names, ports := map[gwv1.SectionName]bool{}, map[gwv1.PortNumber]bool{}
	tcp := map[gwv1.SectionName]gwv1.PortNumber{}
	for _, l := range gw.Spec.Listeners {
		if names[l.Name] || ports[l.Port] {
			t.Errorf("listener %s (port %d) repeats a name or port", l.Name, l.Port)
		}
		names[l.Name], ports[l.Port] = true, true
		if l.Protocol == gwv1.TCPProtocolType {
			tcp[l.Name] = l.Port
		}
	}
	want := map[gwv1.SectionName]gwv1.PortNumber{TCPProbeListener: TCPProbePort, e2eTCPListener: e2eTCPPort, e2eTCPStableListener: e2eTCPStablePort}
	if !reflect.DeepEqual(tcp, want) {
		t.Errorf("TCP listeners %v, want %v", tcp, want)
	}
	r := TCPRoute("bench-1", "x", tcpProbeLabel, TCPProbeListener, "live", 8080)
	p := r.Spec.ParentRefs[0]
	if string(p.Name) != ProbeGateway || string(*p.Namespace) != InfraNamespace || string(*p.SectionName) != TCPProbeListener ||
		r.Labels[benchLabel] != tcpProbeLabel || string(r.Spec.Rules[0].BackendRefs[0].Name) != "live" || *r.Spec.Rules[0].BackendRefs[0].Port != 8080 {
		t.Errorf("TCPRoute %+v", r)
	}
}

func sampleTCP(r *Results) {
	for _, k := range []string{"100", "1000"} {
		r.TCPPropagation[k] = Latency{P50: 9, P99: 30, Max: 41}
		r.TCPPropagationChurn[k] = Latency{P50: 12, P99: 60, Max: 70}
		r.EndToEnd[k] = EndToEnd{RouteToFirst200: &Latency{P50: 20, P99: 50, Max: 60},
			TCPRouteToFirstConnection: &Latency{P50: 25, P99: 70, Max: 80}, TCPRouteToFirstConnectionChurn: &Latency{P50: 31, P99: 90, Max: 95}}
	}
	r.TranslateFullTCP = &TranslateMixed{HTTPRoutes: 10000, TCPRoutes: 1000, Rounds: 3, Ratio: 1.08,
		Alone: TranslateFull{Ms: 200, Allocs: 900000}, With: TranslateFull{Ms: 216, Allocs: 990000}, RoundRatios: []float64{1.08, 1.1, 1.05}}
}

// The TCPRoute rows sit beside the HTTPRoute ones with the same
// statistics and no target; the mixed translation row holds the ratio to
// 1.2.
func TestRowsTCP(t *testing.T) {
	r, d := sampleResults()
	sampleTCP(r)
	rows := map[string]Row{}
	var order []string
	for _, row := range Rows(r) {
		rows[row.Figure+"@"+row.N] = row
		order = append(order, row.Figure+"@"+row.N)
	}
	for k, want := range map[string]string{
		"TCPRoute propagation p50 (ms)@100":                                                         "9",
		"TCPRoute propagation p99 (ms)@1000":                                                        "30",
		"TCPRoute propagation max (ms)@1000":                                                        "41",
		"TCPRoute propagation under churn p99 (ms)@100":                                             "60",
		"TCPRoute create → first connection through Envoy to the backend p50 (ms)@1000":             "25",
		"TCPRoute create → first connection through Envoy to the backend, under churn max (ms)@100": "95",
	} {
		row, ok := rows[k]
		if !ok || row.Value != want || row.Met != nil || row.Target != "" {
			t.Errorf("%s: %+v (present %v), want value %s and no target", k, row, ok, want)
		}
	}
	mix := rows["Full translation, 10,000 HTTPRoutes + 1,000 TCPRoutes against the HTTPRoutes alone@10000+1000"]
	if mix.verdict() != "met" || mix.Target != "≤ 1.2×" || !strings.HasPrefix(mix.Value, "1.08× (216 ms against 200 ms; 990000 against 900000 allocs") {
		t.Errorf("mixed row %+v", mix)
	}
	r.TranslateFullTCP.Ratio = 1.25
	for _, row := range Rows(r) {
		if strings.HasPrefix(row.Figure, "Full translation, 10,000") && row.verdict() != "**not met**" {
			t.Errorf("ratio 1.25: %s", row.verdict())
		}
	}
	// Beside the HTTP rows: the TCP propagation rows follow the HTTP ones,
	// and the TCP Envoy rows follow the HTTP Envoy rows of their N.
	idx := func(k string) int {
		for i, o := range order {
			if o == k {
				return i
			}
		}
		t.Fatalf("no row %s", k)
		return -1
	}
	if !(idx("Propagation under churn max (ms)@10000") < idx("TCPRoute propagation p50 (ms)@100") &&
		idx("TCPRoute propagation under churn max (ms)@1000") < idx("Endpoint propagation p50 / p99 (ms)@100")) {
		t.Error("TCPRoute propagation rows are not after the HTTPRoute ones")
	}
	if e, tcp := idx("Route create → first 200 through Envoy max (ms)@100"), idx("TCPRoute create → first connection through Envoy to the backend p50 (ms)@100"); tcp != e+1 {
		t.Errorf("TCP Envoy row at %d, HTTP's last at %d", tcp, e)
	}
	d.Stages["100"].TCPPropagation = &ProbeStats{Probes: 20}
	d.Stages["100"].TCPChurn = &ProbeStats{Probes: 18, Failures: 2}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, r, d, "docs/bench", ""); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| TCPRoute propagation p50 (ms) | 100 | 9 | — | — |",
		"| TCPRoute create → first connection through Envoy to the backend p99 (ms) | 1000 | 70 | — | — |",
		"| Full translation, 10,000 HTTPRoutes + 1,000 TCPRoutes against the HTTPRoutes alone | 10000+1000 | 1.25× ",
		"| ≤ 1.2× | **not met** |",
		"| 100 / — / — | 20 / 18 (2 failed) |",
		"- **TCPRoute propagation**", "*TCPRoute create → first connection*", "- **Full translation with TCPRoutes**",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}

// A results.json and details.json from before TCPRoutes render as before:
// no TCPRoute rows (they are left out, not shown as n/a), and "—" in the
// details' TCPRoute column.
func TestOldResultsWithoutTCP(t *testing.T) {
	old := `{"machine":{"nproc":2,"mode":"full"},"translate_full":{"10000":{"ms":219.37,"allocs":887442}},
"propagation":{"100":{"p50_ms":7.97,"p99_ms":12.12,"max_ms":18.45}},"propagation_churn":{},
"end_to_end":{"100":{"route_to_first_200":{"p50_ms":20,"p99_ms":40,"max_ms":50},"route_to_first_200_churn":null,
"endpoint_to_new_pod":null,"failed_requests_churn":0,"requests_churn":2000,"envoy_rss_mib":40}},"failover":null}`
	path := filepath.Join(t.TempDir(), "results.json")
	if err := writeFile(path, old); err != nil {
		t.Fatal(err)
	}
	r, err := ReadResults(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.TCPPropagation == nil || r.TCPPropagationChurn == nil || r.TranslateFullTCP != nil {
		t.Fatalf("old file read as %+v / %+v / %+v", r.TCPPropagation, r.TCPPropagationChurn, r.TranslateFullTCP)
	}
	var figures []string
	for _, row := range Rows(r) {
		figures = append(figures, row.Figure)
		if strings.Contains(row.Figure, "TCPRoute") {
			t.Errorf("row %q from a file without TCPRoute figures", row.Figure)
		}
	}
	if !contains2(figures, "Propagation p50 (ms)") || !contains2(figures, "Route create → first 200 through Envoy p50 (ms)") {
		t.Errorf("HTTPRoute rows missing: %v", figures)
	}
	d := &Details{Stages: map[string]*Stage{"100": {Routes: 100, Propagation: &ProbeStats{Probes: 100}}}}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, r, d, "docs/bench", ""); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| 100 / — / — | — / — |") {
		t.Error("details row of an old stage lacks the empty TCPRoute column")
	}
}

func contains2(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }
