// Package bench is Portico's benchmark suite (issue 6): full and
// incremental translation, propagation of a route change to a proxy
// connected to a follower replica (quiet and under churn), endpoint
// propagation, status convergence, memory, failover and bytes pushed per
// change, on a kwok cluster with a real API server and two controller
// processes. cmd/portico-bench runs it and writes results.json, charts and
// BENCHMARKS.md.
//
// It only uses Portico's public entry points (the portico binary, its admin
// endpoints and xDS server, gatewayapi.Translate, translate.Translate,
// gen.Snapshot and gen.WithTCPRoutes), so it keeps working while the
// internals change; the TCPRoute probes also read the tcp_proxy stat
// prefix Portico gives a route (tcproute.go, checked by a test).
package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Results is results.json, in the shape issue 6 fixes: N is a string key,
// times are in milliseconds unless the name says otherwise. A scenario that
// did not run (or failed) is null or missing from its map; details.json says
// why. Files written before a figure existed lack its key: it reads as
// missing, and Rows leaves its rows out.
type Results struct {
	Machine               Machine                  `json:"machine"`
	TranslateFull         map[string]TranslateFull `json:"translate_full"`
	TranslateIncremental  map[string]Millis        `json:"translate_incremental"`
	Propagation           map[string]Latency       `json:"propagation"`
	PropagationChurn      map[string]Latency       `json:"propagation_churn"`
	EndpointPropagation   map[string]Percentiles   `json:"endpoint_propagation"`
	StatusConvergence1000 *StatusConvergence       `json:"status_convergence_1000"`
	Memory                map[string]Memory        `json:"memory"`
	AllocRateChurnMBs     *float64                 `json:"alloc_rate_churn_mb_s"`
	// AllocRateChurnProbesMBs is the rate during the probes under churn
	// (each probe adds a route create and delete to the churn).
	AllocRateChurnProbesMBs *float64           `json:"alloc_rate_churn_probes_mb_s,omitempty"`
	Failover                *Failover          `json:"failover"`
	BytesPerRouteChange     map[string]float64 `json:"bytes_per_route_change"` // kB
	// EndToEnd are the figures through a real Envoy (issue 13).
	EndToEnd map[string]EndToEnd `json:"end_to_end"`
	// TCPPropagation and TCPPropagationChurn are Propagation's figures
	// for a TCPRoute (tcproute.go): until the follower's ADS client holds
	// the listener and clusters that serve it.
	TCPPropagation      map[string]Latency `json:"tcp_propagation"`
	TCPPropagationChurn map[string]Latency `json:"tcp_propagation_churn"`
	// TranslateFullTCP is the full translation of 10,000 HTTPRoutes with
	// 1,000 TCPRoutes against the HTTPRoutes alone, in one run.
	TranslateFullTCP *TranslateMixed `json:"translate_full_tcp"`
	// Fleet is the fleet scenario (fleet.go): many delta ADS streams on
	// the follower, one route change reaching all of them.
	Fleet *Fleet `json:"fleet,omitempty"`
}

// EndToEnd are one N's figures through a real Envoy connected to the
// follower: a route's create to Envoy's first 200 for it (quiet and
// under churn), an EndpointSlice change to the first response from the
// new backend, the requests of a constant stream that failed while
// routes and endpoints churned, Envoy's RSS, and a TCPRoute's create to
// the first connection through Envoy that reaches its backend (quiet and
// under churn).
type EndToEnd struct {
	RouteToFirst200      *Latency `json:"route_to_first_200"`
	RouteToFirst200Churn *Latency `json:"route_to_first_200_churn"`
	EndpointToNewPod     *Latency `json:"endpoint_to_new_pod"`
	FailedRequestsChurn  *int64   `json:"failed_requests_churn"`
	RequestsChurn        int64    `json:"requests_churn"`
	EnvoyRSSMiB          float64  `json:"envoy_rss_mib"`
	// TCPRouteToFirstConnection[Churn]: nil when not measured, and in
	// files from before TCPRoutes.
	TCPRouteToFirstConnection      *Latency `json:"tcp_route_to_first_connection"`
	TCPRouteToFirstConnectionChurn *Latency `json:"tcp_route_to_first_connection_churn"`
}

// NewResults returns Results with every map present (empty maps encode as
// {}, so the shape holds even when a scenario is skipped).
func NewResults() *Results {
	return &Results{
		TranslateFull:        map[string]TranslateFull{},
		TranslateIncremental: map[string]Millis{},
		Propagation:          map[string]Latency{},
		PropagationChurn:     map[string]Latency{},
		TCPPropagation:       map[string]Latency{},
		TCPPropagationChurn:  map[string]Latency{},
		EndpointPropagation:  map[string]Percentiles{},
		Memory:               map[string]Memory{},
		BytesPerRouteChange:  map[string]float64{},
		EndToEnd:             map[string]EndToEnd{},
	}
}

// Machine describes where the suite ran.
type Machine struct {
	NProc     int     `json:"nproc"`
	CPU       string  `json:"cpu"`
	Go        string  `json:"go"`
	OS        string  `json:"os"`
	MemGiB    float64 `json:"mem_gib"`
	Commit    string  `json:"commit"`
	Date      string  `json:"date"`
	Mode      string  `json:"mode"` // "full" or "quick"
	RuntimeS  float64 `json:"runtime_s"`
	XDSTLS    bool    `json:"xds_tls"`
	Replicas  int     `json:"replicas"`
	Kube      string  `json:"kubernetes"`
	Processes bool    `json:"controller_processes"`
	// LoadAvgMax is the highest 1-minute load average seen at the start
	// and end of each phase: above nproc, other work competed for the CPUs.
	LoadAvgMax float64 `json:"load_avg_max"`
}

// TranslateFull is one full translation at N routes: Ms and Allocs as the
// controller translates (Gateways in parallel), SequentialMs one Gateway
// after the other.
type TranslateFull struct {
	Ms           float64 `json:"ms"`
	Allocs       int64   `json:"allocs"`
	SequentialMs float64 `json:"sequential_ms,omitempty"`
}

// TranslateMixed compares, in one run, the full translation of
// HTTPRoutes HTTPRoutes with TCPRoutes TCPRoutes added (gen.WithTCPRoutes)
// against the HTTPRoutes alone (FullTranslationWithTCP). Alone and With
// are the medians over Rounds; Ratio is the median of the rounds' ratios
// (RoundRatios, With / Alone of the same round).
type TranslateMixed struct {
	HTTPRoutes  int           `json:"http_routes"`
	TCPRoutes   int           `json:"tcp_routes"`
	Alone       TranslateFull `json:"alone"`
	With        TranslateFull `json:"with_tcp"`
	Ratio       float64       `json:"ratio"`
	RoundRatios []float64     `json:"round_ratios"`
	Rounds      int           `json:"rounds"`
}

// Millis is a single duration in milliseconds. InProcessMs, of
// translate_incremental only, is the same work measured in-process
// (IncrementalTranslation) next to the controller's figure in Ms.
type Millis struct {
	Ms          float64  `json:"ms"`
	InProcessMs *float64 `json:"in_process_ms,omitempty"`
}

// Latency is the distribution of probe latencies.
type Latency struct {
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// Percentiles is a distribution without its maximum.
type Percentiles struct {
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
}

// StatusConvergence: 1,000 routes created at once until every one is
// Accepted and the Gateway counts them all.
type StatusConvergence struct {
	Seconds             float64 `json:"seconds"`
	GatewayStatusWrites int     `json:"gateway_status_writes"`
	RouteStatusWrites   int     `json:"route_status_writes"`
	// AfterCreatesSeconds counts from the last of the 1,000 creates (the
	// creates themselves take seconds on a 2-core machine); nil when the
	// status did not converge.
	AfterCreatesSeconds *float64 `json:"after_creates_seconds,omitempty"`
	// FloorSeconds: the same creates and one status write per route by
	// the suite itself, with no controller in the loop (RunStatusFloor):
	// the least any controller could take on this cluster.
	FloorSeconds *float64 `json:"floor_seconds,omitempty"`
}

// Memory of a controller replica at N routes.
type Memory struct {
	RSSMiB  float64 `json:"rss_mib"`
	HeapMiB float64 `json:"heap_mib"`
}

// Failover times: to a new leader, after SIGTERM (graceful) or SIGKILL
// (crash) of the leader process.
type Failover struct {
	GracefulMs     float64 `json:"graceful_ms"`
	CrashMs        float64 `json:"crash_ms"`
	LeaseDurationS float64 `json:"lease_duration_s"`
}

// Key is the results.json key of a route count.
func Key(n int) string { return strconv.Itoa(n) }

// Durations summarises samples.
type Durations []time.Duration

// Quantile is the nearest-rank q-quantile (0 < q ≤ 1) in milliseconds; 0
// without samples.
func (d Durations) Quantile(q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := append(Durations(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(math.Ceil(q*float64(len(s)))) - 1
	rank = min(max(rank, 0), len(s)-1)
	return ms(s[rank])
}

// Latency is p50, p99 and max.
func (d Durations) Latency() Latency {
	return Latency{P50: d.Quantile(0.5), P99: d.Quantile(0.99), Max: d.Quantile(1)}
}

// Percentiles is p50 and p99.
func (d Durations) Percentiles() Percentiles {
	return Percentiles{P50: d.Quantile(0.5), P99: d.Quantile(0.99)}
}

// ms converts to milliseconds rounded to 0.01.
func ms(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 2) }

func round(v float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(v*p) / p
}

// LoadAvg is the 1-minute load average (0 if unknown).
func LoadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// WriteJSON writes v indented to path.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadResults reads a results.json.
func ReadResults(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := NewResults()
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// DescribeMachine fills what can be read from the host.
func DescribeMachine(repo string) Machine {
	m := Machine{NProc: runtime.NumCPU(), Go: runtime.Version(), Date: time.Now().UTC().Format(time.RFC3339)}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	m.OS = runtime.GOOS + "/" + runtime.GOARCH
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.OS += " " + strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				m.MemGiB = round(kb/1024/1024, 1)
			}
		}
	}
	cmd := exec.Command("git", "describe", "--always", "--dirty", "--abbrev=12")
	cmd.Dir = repo
	if out, err := cmd.Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	return m
}
