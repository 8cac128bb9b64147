package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/testenv/workload"
)

func TestQuantiles(t *testing.T) {
	var d Durations
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if got := d.Latency(); got != (Latency{P50: 50, P99: 99, Max: 100}) {
		t.Errorf("Latency = %+v", got)
	}
	if got := (Durations{3 * time.Millisecond}).Percentiles(); got != (Percentiles{P50: 3, P99: 3}) {
		t.Errorf("one sample: %+v", got)
	}
	if got := (Durations{}).Quantile(0.5); got != 0 {
		t.Errorf("no samples: %v", got)
	}
}

// results.json has exactly the keys issue 6 fixes, with N as string keys,
// even when nothing ran.
func TestResultsShape(t *testing.T) {
	r := NewResults()
	r.TranslateFull[Key(1000)] = TranslateFull{Ms: 1.5, Allocs: 10}
	r.Propagation[Key(100)] = Latency{P50: 1, P99: 2, Max: 3}
	r.EndpointPropagation[Key(100)] = Percentiles{P50: 1, P99: 2}
	r.BytesPerRouteChange[Key(100)] = 4.5
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"alloc_rate_churn_mb_s", "bytes_per_route_change", "end_to_end", "endpoint_propagation", "failover", "machine",
		"memory", "propagation", "propagation_churn", "status_convergence_1000", "tcp_propagation", "tcp_propagation_churn",
		"translate_full", "translate_full_tcp", "translate_incremental"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("keys = %v\nwant   %v", keys, want)
	}
	for k, sub := range map[string]string{
		"translate_full": `{"1000":{"ms":1.5,"allocs":10}}`, "propagation": `{"100":{"p50_ms":1,"p99_ms":2,"max_ms":3}}`,
		"endpoint_propagation": `{"100":{"p50_ms":1,"p99_ms":2}}`, "bytes_per_route_change": `{"100":4.5}`,
		"memory": `{}`, "failover": `null`, "tcp_propagation": `{}`, "translate_full_tcp": `null`,
	} {
		if string(top[k]) != sub {
			t.Errorf("%s = %s, want %s", k, top[k], sub)
		}
	}
	path := filepath.Join(t.TempDir(), "results.json")
	if err := WriteJSON(path, r); err != nil {
		t.Fatal(err)
	}
	back, err := ReadResults(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Errorf("round trip: %+v", back)
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP portico_status_writes_total Status write attempts.
# TYPE portico_status_writes_total counter
portico_status_writes_total{kind="HTTPRoute",result="written"} 1000
portico_status_writes_total{kind="Gateway",result="written"} 7
portico_status_writes_total{kind="Gateway",result="skipped-unchanged"} 3
portico_translation_duration_seconds_sum 1.5e-01
portico_translation_duration_seconds_count 12
weird{a="x,y",b="q\"z"} 2
go_memstats_heap_inuse_bytes 4.194304e+06
`
	ss, err := ParseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{"portico_status_writes_total", map[string]string{"kind": "Gateway", "result": "written"}, 7},
		{"portico_status_writes_total", map[string]string{"result": "written"}, 1007},
		{"portico_status_writes_total", nil, 1010},
		{"portico_translation_duration_seconds_sum", nil, 0.15},
		{"portico_translation_duration_seconds_count", nil, 12},
		{"weird", map[string]string{"a": "x,y", "b": `q"z`}, 2},
		{"go_memstats_heap_inuse_bytes", nil, 4194304},
		{"absent", nil, 0},
	} {
		if got := ss.Sum(c.name, c.match); got != c.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", c.name, c.match, got, c.want)
		}
	}
	if !ss.Has("weird") || ss.Has("absent") {
		t.Error("Has")
	}
}

// TestParseMetricsHistogramAndSummary: histograms and summaries come out
// as the samples their text shows (what the stages read: _sum and
// _count), and malformed text is an error.
func TestParseMetricsHistogramAndSummary(t *testing.T) {
	text := `# TYPE portico_translation_duration_seconds histogram
portico_translation_duration_seconds_bucket{mode="full",le="0.1"} 3
portico_translation_duration_seconds_bucket{mode="full",le="1"} 5
portico_translation_duration_seconds_bucket{mode="full",le="+Inf"} 6
portico_translation_duration_seconds_sum{mode="full"} 2.5
portico_translation_duration_seconds_count{mode="full"} 6
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0.5"} 0.001
go_gc_duration_seconds_sum 0.01
go_gc_duration_seconds_count 4
`
	ss, err := ParseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{"portico_translation_duration_seconds_sum", map[string]string{"mode": "full"}, 2.5},
		{"portico_translation_duration_seconds_count", nil, 6},
		{"portico_translation_duration_seconds_bucket", map[string]string{"le": "1"}, 5},
		{"portico_translation_duration_seconds_bucket", map[string]string{"le": "+Inf"}, 6},
		{"go_gc_duration_seconds", map[string]string{"quantile": "0.5"}, 0.001},
		{"go_gc_duration_seconds_count", nil, 4},
	} {
		if got := ss.Sum(c.name, c.match); got != c.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", c.name, c.match, got, c.want)
		}
	}
	for _, bad := range []string{"metric{a=\"x\" 1\n", "metric not-a-number\n"} {
		if _, err := ParseMetrics(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseMetrics(%q) accepted malformed text", bad)
		}
	}
}

func TestCountStatusWrites(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ev := func(verb, res, sub, ns, name, ua string, code int, at time.Time) string {
		b, _ := json.Marshal(map[string]any{
			"stage": "ResponseComplete", "verb": verb, "userAgent": ua,
			"objectRef":      map[string]string{"resource": res, "subresource": sub, "namespace": ns, "name": name},
			"responseStatus": map[string]int{"code": code}, "stageTimestamp": at,
		})
		return string(b)
	}
	log := strings.Join([]string{
		ev("update", "httproutes", "status", "a", "r1", "portico/bench-a", 200, t0.Add(time.Second)),
		ev("update", "httproutes", "status", "a", "r1", "portico/bench-a", 409, t0.Add(time.Second)), // conflict
		ev("update", "gateways", "status", "infra", "gw", "portico/bench-a", 200, t0.Add(2*time.Second)),
		ev("patch", "gateways", "status", "infra", "gw", "portico/bench-b", 200, t0.Add(3*time.Second)),
		ev("update", "gateways", "", "infra", "gw", "portico/bench-a", 200, t0.Add(3*time.Second)), // spec
		ev("update", "gateways", "status", "infra", "gw", "kubectl/v1", 200, t0.Add(3*time.Second)),
		ev("update", "gateways", "status", "infra", "gw", "portico/bench-a", 200, t0.Add(time.Hour)), // late
		`{"truncated`,
	}, "\n")
	w, err := countStatusWrites(strings.NewReader(log), t0, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if w.ByResource["httproutes"] != 1 || w.ByResource["gateways"] != 2 || w.ByObject["gateways/infra/gw"] != 2 {
		t.Errorf("got %+v", w)
	}
}

func deltaResource(t *testing.T, name string, msg any) *discoveryv3.Resource {
	t.Helper()
	var a *anypb.Any
	var err error
	switch m := msg.(type) {
	case *routev3.RouteConfiguration:
		a, err = anypb.New(m)
	case *endpointv3.ClusterLoadAssignment:
		a, err = anypb.New(m)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &discoveryv3.Resource{Name: name, Version: "1", Resource: a}
}

func routeConfig(name string, paths ...string) *routev3.RouteConfiguration {
	vh := &routev3.VirtualHost{Name: "vh", Domains: []string{"*"}}
	for _, p := range paths {
		vh.Routes = append(vh.Routes, &routev3.Route{Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: p}}})
	}
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{vh}}
}

func cla(name string, addrs ...string) *endpointv3.ClusterLoadAssignment {
	l := &endpointv3.LocalityLbEndpoints{}
	for _, a := range addrs {
		l.LbEndpoints = append(l.LbEndpoints, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{
			Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
				SocketAddress: &corev3.SocketAddress{Address: a, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 8080}}}}}}})
	}
	return &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{l}}
}

func newTestADS() *ADS {
	a := &ADS{state: map[string]map[string]*discoveryv3.Resource{}, claAddrs: map[string][]string{},
		addrCount: map[string]int{}, addrSince: map[string]time.Time{}, changed: make(chan struct{})}
	for _, t := range ADSTypes {
		a.state[t] = map[string]*discoveryv3.Resource{}
	}
	return a
}

// A Track sees a marker appear in one resource and disappear, whether the
// resource is updated or removed, and reports the arrival of the response
// that made it so; bytes are counted per response.
func TestTrackAndBytes(t *testing.T) {
	a := newTestADS()
	t1 := time.Unix(100, 0)
	a.apply(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resourcev3.RouteType, Resources: []*discoveryv3.Resource{
		deltaResource(t, "http-80", routeConfig("http-80", "/a/")),
	}}, t1)
	tr := a.Track("/bench-probe-1/")
	b0, n0, _ := a.Stats()
	if n0 != 1 || b0 <= 0 {
		t.Fatalf("stats after one response: %d bytes, %d responses", b0, n0)
	}
	ctx := t.Context()
	t2 := time.Unix(200, 0)
	go a.apply(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resourcev3.RouteType, Resources: []*discoveryv3.Resource{
		deltaResource(t, "http-80", routeConfig("http-80", "/a/", "/bench-probe-1/")),
	}}, t2)
	got, err := a.Wait(ctx, tr, true)
	if err != nil || !got.Equal(t2) {
		t.Fatalf("present at %v (%v), want %v", got, err, t2)
	}
	b1, _, _ := a.Stats()
	r := deltaResource(t, "http-80", routeConfig("http-80", "/a/", "/bench-probe-1/"))
	if b1-b0 != int64(len(mustMarshal(t, r))) {
		t.Errorf("bytes of the change = %d, want %d", b1-b0, len(mustMarshal(t, r)))
	}
	// An empty response of another type does not move the track; a removal does.
	a.apply(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resourcev3.ClusterType}, time.Unix(250, 0))
	t3 := time.Unix(300, 0)
	a.apply(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resourcev3.RouteType, RemovedResources: []string{"http-80"}}, t3)
	got, err = a.Wait(ctx, tr, false)
	if err != nil || !got.Equal(t3) {
		t.Fatalf("absent at %v (%v), want %v", got, err, t3)
	}
	// A track registered while the marker is held starts present.
	a.apply(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resourcev3.RouteType, Resources: []*discoveryv3.Resource{
		deltaResource(t, "http-81", routeConfig("http-81", "/bench-probe-2/")),
	}}, time.Unix(400, 0))
	tr2 := a.Track("/bench-probe-2/")
	if _, err := a.Wait(ctx, tr2, true); err != nil {
		t.Fatal(err)
	}
	a.Untrack(tr)
	a.Untrack(tr2)
	if len(a.tracks) != 0 {
		t.Errorf("%d tracks left", len(a.tracks))
	}
}

func mustMarshal(t *testing.T, r *discoveryv3.Resource) []byte {
	t.Helper()
	b, err := proto.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Endpoint addresses match exactly (10.0.0.1 is not 10.0.0.10), appear
// when the first CLA has them and leave when the last one drops them.
func TestEndpointAddresses(t *testing.T) {
	a := newTestADS()
	ctx := t.Context()
	t1, t2, t3 := time.Unix(1, 0), time.Unix(2, 0), time.Unix(3, 0)
	a.apply(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resourcev3.EndpointType, Resources: []*discoveryv3.Resource{
		deltaResource(t, "c1", cla("c1", "10.0.0.10")),
	}}, t1)
	if _, ok := a.addrSince["10.0.0.1"]; ok {
		t.Fatal("10.0.0.1 matched 10.0.0.10")
	}
	a.apply(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resourcev3.EndpointType, Resources: []*discoveryv3.Resource{
		deltaResource(t, "c1", cla("c1", "10.0.0.10", "10.0.0.1")),
		deltaResource(t, "c2", cla("c2", "10.0.0.1")),
	}}, t2)
	if got, err := a.WaitAddress(ctx, "10.0.0.1", true); err != nil || !got.Equal(t2) {
		t.Fatalf("10.0.0.1 since %v (%v), want %v", got, err, t2)
	}
	// Still in c2 after c1 drops it: the first arrival stays.
	a.apply(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resourcev3.EndpointType, Resources: []*discoveryv3.Resource{
		deltaResource(t, "c1", cla("c1", "10.0.0.10")),
	}}, t3)
	if got, _ := a.WaitAddress(ctx, "10.0.0.1", true); !got.Equal(t2) {
		t.Errorf("since %v after c1 dropped it, want %v", got, t2)
	}
	a.apply(&discoveryv3.DeltaDiscoveryResponse{TypeUrl: resourcev3.EndpointType, RemovedResources: []string{"c2"}}, time.Unix(4, 0))
	if _, err := a.WaitAddress(ctx, "10.0.0.1", false); err != nil {
		t.Fatal(err)
	}
	if len(a.addrCount) != 1 || a.addrCount["10.0.0.10"] != 1 {
		t.Errorf("address counts %v", a.addrCount)
	}
}

func sampleResults() (*Results, *Details) {
	r := NewResults()
	r.Machine = Machine{NProc: 2, CPU: "AMD EPYC", Go: "go1.26.8", Mode: "full", XDSTLS: true, Replicas: 2}
	for i, n := range []int{100, 1000, 5000, 10000} {
		k := Key(n)
		r.TranslateFull[k] = TranslateFull{Ms: float64(n) / 50, Allocs: int64(n * 100)}
		inProcess := 0.4 * float64(i)
		r.TranslateIncremental[k] = Millis{Ms: 0.5, InProcessMs: &inProcess}
		r.Propagation[k] = Latency{P50: 10, P99: 50 + float64(i), Max: 70}
		r.PropagationChurn[k] = Latency{P50: 15, P99: 150, Max: 300}
		r.EndpointPropagation[k] = Percentiles{P50: 12, P99: 40}
		r.Memory[k] = Memory{RSSMiB: 50 + float64(n)/50, HeapMiB: 20 + float64(n)/100}
		r.BytesPerRouteChange[k] = 3.5
	}
	rate, probesRate := 2.5, 40.0
	r.AllocRateChurnMBs, r.AllocRateChurnProbesMBs = &rate, &probesRate
	floor := 1.25
	r.StatusConvergence1000 = &StatusConvergence{Seconds: 1.5, GatewayStatusWrites: 4, RouteStatusWrites: 1000, FloorSeconds: &floor}
	r.Failover = &Failover{GracefulMs: 300, CrashMs: 18000, LeaseDurationS: 15}
	r.Fleet = &Fleet{Routes: 10000, Streams: 1000, Gateways: 4, Probes: 10, Propagation: Latency{P50: 40, P99: 200, Max: 240},
		RSSBeforeMiB: 250, RSSAfterMiB: 300, RSSPerStreamKiB: 51.2, CPUSecondsPerProbe: 0.4, BytesPerStreamKB: 3.1, ConnectSeconds: 30}
	d := &Details{Mode: "full", Stages: map[string]*Stage{"100": {Routes: 100, Propagation: &ProbeStats{Probes: 100},
		AllocQuietMBs: map[string]float64{"bench-a": 1, "bench-b": 1.5}, AllocChurnMBs: map[string]float64{"bench-a": 2.5},
		AllocChurnProbesMBs: map[string]float64{"bench-a": 40}}},
		Workload: map[string]any{"gateways": 4}, Errors: []string{"something"},
		StatusConvergence: &ConvergenceDetails{Routes: 1000, Converged: true, AttachedSeconds: 1.5, AllAcceptedSeconds: 1.4, CreateSeconds: 1},
		StatusFloor:       &FloorDetails{Routes: 1000, Seconds: 1.25, CreateSeconds: 1.125, CPUSeconds: CPUUsage{"etcd": 0.5, "kube-apiserver": 2}},
		Failover:          []*FailoverDetails{{Signal: "SIGKILL", LeaderMs: 18000, ConvergedMs: 19000, Converged: check(true)}}}
	return r, d
}

func TestRowsAndMarkdown(t *testing.T) {
	r, d := sampleResults()
	verdicts := map[string]string{}
	for _, row := range Rows(r) {
		verdicts[row.Figure+"@"+row.N] = row.verdict()
	}
	for k, want := range map[string]string{
		"Full translation (ms; allocs)@1000":                                             "met",         // 20 ms
		"Full translation (ms; allocs)@100":                                              "—",           // no target
		"Propagation under churn p99 (ms)@10000":                                         "**not met**", // 150 ms
		"Propagation p99 (ms)@5000":                                                      "met",
		"Crash failover, to a new leader (ms)@—":                                         "**not met**", // 18 s > 17 s
		"Controller RSS / Go heap (MiB)@10000":                                           "met",         // 250 MiB
		"Controller RSS / Go heap (MiB)@5000":                                            "—",
		"Route create → all 1000 ADS streams on one replica (4 Gateways) p99 (ms)@10000": "met",
		"Fleet: stream-probes that missed the route@10000":                               "met",
		"Bytes pushed per route change (kB)@10000":                                       "met",
		"Status convergence, 1,000 routes (s)@1000":                                      "met",
		"Translation of one changed route (ms)@10000":                                    "met",
		"Translation of one changed route, in-process (ms)@10000":                        "**not met**", // 1.2 ms
		"Translation of one changed route, in-process (ms)@1000":                         "—",
	} {
		if verdicts[k] != want {
			t.Errorf("%s: %q, want %q", k, verdicts[k], want)
		}
	}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, r, d, "docs/bench", "Baseline.\nSecond line."); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"![Propagation latency against route count](docs/bench/latency.png)",
		"| CPU | AMD EPYC (nproc 2) |", "make bench-suite", "targets met.", "- something", "Failover by SIGKILL", "> Baseline.\n> Second line.\n",
		"| Status floor: the same creates and status writes, no controller (s) | 1000 | 1.25 |",
		"| Allocation rate under churn (MB/s) | 10000 | 2.5 | ≤ 3 MB/s | met |",
		"| Fleet: follower RSS before / after the streams (MiB); per stream (KiB) | 10000 | 250 / 300; 51.2 |",
		"| Allocation rate under churn, during the propagation probes (MB/s) | 10000 | 40 |",
		"| 1.5 / 2.5 / 40 |\n",
		"writing each one's status itself took 1.25 s (creates 1.125 s). CPU time meanwhile (s): kube-apiserver 2, etcd 0.5."} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}

func TestRenderCharts(t *testing.T) {
	dir := t.TempDir()
	r, _ := sampleResults()
	if err := Render(r, dir); err != nil {
		t.Fatal(err)
	}
	if err := Render(NewResults(), filepath.Join(dir)); err != nil {
		t.Fatalf("empty results: %v", err)
	}
	for _, c := range Charts {
		b, err := os.ReadFile(filepath.Join(dir, c.File))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s is not a PNG", c.File)
		}
	}
}

func TestWorkloadShape(t *testing.T) {
	seen := map[string]bool{}
	live := map[string]bool{}
	for i := range 200 {
		r := Route(i)
		if string(r.Spec.ParentRefs[0].Name) != GatewayName(i%Gateways) {
			t.Fatalf("route %d on %s", i, r.Spec.ParentRefs[0].Name)
		}
		seen[string(r.Spec.Hostnames[0])] = true
		if r.Spec.Rules[1].BackendRefs[0].Name == "live" {
			live[r.Namespace] = true
		}
		svc, es := Service(i)
		if svc.Namespace != r.Namespace || es.Labels["kubernetes.io/service-name"] != svc.Name {
			t.Fatalf("route %d: service %s/%s, slice %v", i, svc.Namespace, svc.Name, es.Labels)
		}
	}
	if len(seen) != Gateways*HostsPerGW {
		t.Errorf("%d hostnames over 200 routes, want %d", len(seen), Gateways*HostsPerGW)
	}
	if len(live) != RouteNS {
		t.Errorf("live Services used in %d namespaces, want %d", len(live), RouteNS)
	}
}

func TestParallel(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	err := parallel(t.Context(), 5, 105, 7, func(i int) error {
		mu.Lock()
		defer mu.Unlock()
		seen[i]++
		return nil
	})
	if err != nil || len(seen) != 100 || seen[5] != 1 || seen[104] != 1 || seen[105] != 0 {
		t.Fatalf("err %v, %d indexes seen", err, len(seen))
	}
	boom := errors.New("boom")
	err = parallel(t.Context(), 0, 1000, 4, func(i int) error {
		if i == 10 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
}

func TestKBStat(t *testing.T) {
	if got := kbStat([]float64{3000, 1000, 2000, 10000}); *got != (Stat{P50: 2, Max: 10}) {
		t.Errorf("kbStat = %+v", *got)
	}
}

func TestProcStatCPU(t *testing.T) {
	// A command name with spaces and parentheses; utime 250, stime 50.
	line := "4242 (kube (api) server) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 0 0\n"
	got, err := parseProcStatCPU([]byte(line))
	if err != nil || got != 3 {
		t.Errorf("parseProcStatCPU = %v, %v; want 3 s", got, err)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x 1"} {
		if _, err := parseProcStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseProcStatCPU(%q) succeeded", bad)
		}
	}
	// This process has used some CPU, and the reading only grows.
	a, err := procCPUSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3e6; i++ {
		_ = fmt.Sprint(i)
		if i%1e5 == 0 {
			if b, _ := procCPUSeconds(os.Getpid()); b > a {
				break
			}
		}
	}
	if b, err := procCPUSeconds(os.Getpid()); err != nil || b <= a {
		t.Errorf("CPU time did not grow: %v then %v (%v)", a, b, err)
	}
}

func TestCPUUsageSinceAndRoles(t *testing.T) {
	before := CPUUsage{"kube-apiserver": 10, "bench-a": 1, "bench-b": 2, "gone": 5}
	after := CPUUsage{"kube-apiserver": 17.5, "bench-a": 1.25, "bench-b": 3, "new": 1}
	d := after.Since(before).byRole(&Replica{Name: "bench-b"})
	want := CPUUsage{"kube-apiserver": 7.5, "leader": 1, "follower": 0.25}
	if !maps.Equal(d, want) {
		t.Errorf("usage %v, want %v", d, want)
	}
	if got := cpuText(d); got != "kube-apiserver 7.5, leader 1, follower 0.25" {
		t.Errorf("cpuText = %q", got)
	}
}

// TestFindRepo: run from this package's directory (go test's working
// directory, inside the bench's own module), FindRepo passes over
// test/bench/go.mod and finds the product's module two levels up.
func TestFindRepo(t *testing.T) {
	repo, err := FindRepo()
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Dir(filepath.Dir(wd)); repo != want {
		t.Errorf("FindRepo() = %s, want %s", repo, want)
	}
	if _, err := os.Stat(filepath.Join(repo, "cmd", "portico")); err != nil {
		t.Errorf("%s is not the repository: %v", repo, err)
	}
}

// BenchmarkFullTranslation is the controller's full translation of
// workload.Snapshot(10000), as FullTranslation measures it, for profiling
// with -cpuprofile and -memprofile.
func BenchmarkFullTranslation(b *testing.B) {
	snap := workload.Snapshot(10000)
	b.ReportAllocs()
	for b.Loop() {
		if err := translateFull(snap, workload.Gateways, true, "10000 routes"); err != nil {
			b.Fatal(err)
		}
	}
}
