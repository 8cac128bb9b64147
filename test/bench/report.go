package bench

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/portico-dev/portico/internal/testenv"
	"github.com/portico-dev/portico/internal/testenv/workload"
)

// Row is one figure of the table: what, its value and its target.
type Row struct {
	Figure, N, Value, Target string
	Met                      *bool // nil: no target
}

func (r Row) verdict() string {
	switch {
	case r.Met == nil:
		return "—"
	case *r.Met:
		return "met"
	default:
		return "**not met**"
	}
}

func check(ok bool) *bool { return &ok }

func sortedNs[T any](m map[string]T) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, _ := strconv.Atoi(keys[i])
		b, _ := strconv.Atoi(keys[j])
		return a < b
	})
	return keys
}

func f(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// Rows are every figure of r with its issue 6 target.
func Rows(r *Results) []Row {
	var rows []Row
	for _, n := range sortedNs(r.TranslateFull) {
		t := r.TranslateFull[n]
		row := Row{Figure: "Full translation (ms; allocs)", N: n, Value: fmt.Sprintf("%s ms; %d allocs", f(t.Ms), t.Allocs)}
		if t.SequentialMs > 0 {
			row.Value += fmt.Sprintf(" (one Gateway at a time: %s ms)", f(t.SequentialMs))
		}
		switch n {
		case "1000":
			row.Target, row.Met = "≤ 25 ms", check(t.Ms <= 25)
		case "10000":
			row.Target, row.Met = "≤ 200 ms", check(t.Ms <= 200)
		}
		rows = append(rows, row)
	}
	if a, okA := r.TranslateFull["1000"]; okA {
		if b, okB := r.TranslateFull["10000"]; okB && a.Ms > 0 {
			g := b.Ms / a.Ms
			rows = append(rows, Row{Figure: "Full translation growth 1,000 → 10,000", N: "—",
				Value: fmt.Sprintf("%.1f×", g), Target: "linear (≤ 12×)", Met: check(g <= 12)})
		}
	}
	if m := r.TranslateFullTCP; m != nil && m.Alone.Ms > 0 {
		rows = append(rows, mixedRow(m))
	}
	for _, n := range sortedNs(r.TranslateIncremental) {
		m := r.TranslateIncremental[n]
		if m.Ms > 0 {
			row := Row{Figure: "Translation of one changed route (ms)", N: n, Value: f(m.Ms)}
			if n == "10000" {
				row.Target, row.Met = "≤ 1 ms", check(m.Ms <= 1)
			}
			rows = append(rows, row)
		}
		if m.InProcessMs != nil {
			row := Row{Figure: "Translation of one changed route, in-process (ms)", N: n, Value: f(*m.InProcessMs)}
			if n == "10000" {
				row.Target, row.Met = "≤ 1 ms", check(*m.InProcessMs <= 1)
			}
			rows = append(rows, row)
		}
	}
	// The TCPRoute rows have the HTTPRoute rows' statistics but no
	// target: none was set for them.
	for _, pair := range []struct {
		name    string
		m       map[string]Latency
		targets bool
	}{{"Propagation", r.Propagation, true}, {"Propagation under churn", r.PropagationChurn, true},
		{"TCPRoute propagation", r.TCPPropagation, false}, {"TCPRoute propagation under churn", r.TCPPropagationChurn, false}} {
		for _, n := range sortedNs(pair.m) {
			rows = append(rows, latencyRows(pair.name, n, pair.m[n], pair.targets, 20, 100)...)
		}
	}
	for _, n := range sortedNs(r.EndpointPropagation) {
		e := r.EndpointPropagation[n]
		rows = append(rows, Row{Figure: "Endpoint propagation p50 / p99 (ms)", N: n, Value: f(e.P50) + " / " + f(e.P99)})
	}
	if s := r.StatusConvergence1000; s != nil {
		rows = append(rows,
			Row{Figure: "Status convergence, 1,000 routes (s)", N: "1000", Value: f(s.Seconds), Target: "≤ 2 s", Met: check(s.Seconds <= 2)},
			Row{Figure: "Status convergence after the last create (s)", N: "1000", Value: fOpt(s.AfterCreatesSeconds)},
			Row{Figure: "Gateway status writes", N: "1000", Value: strconv.Itoa(s.GatewayStatusWrites), Target: "≤ 20", Met: check(s.GatewayStatusWrites <= 20)},
			Row{Figure: "Route status writes", N: "1000", Value: strconv.Itoa(s.RouteStatusWrites), Target: "1 per route (1,000)", Met: check(s.RouteStatusWrites <= 1000)})
		if s.FloorSeconds != nil {
			rows = append(rows, Row{Figure: "Status floor: the same creates and status writes, no controller (s)", N: "1000", Value: f(*s.FloorSeconds)})
		}
	}
	for _, n := range sortedNs(r.Memory) {
		m := r.Memory[n]
		row := Row{Figure: "Controller RSS / Go heap (MiB)", N: n, Value: f(m.RSSMiB) + " / " + f(m.HeapMiB)}
		switch n {
		case "1000":
			row.Target, row.Met = "RSS ≤ 110 MiB", check(m.RSSMiB <= 110)
		case "10000":
			row.Target, row.Met = "RSS ≤ 350 MiB", check(m.RSSMiB <= 350)
		case "50000":
			row.Target, row.Met = "RSS ≤ 1.5 GiB", check(m.RSSMiB <= 1536)
		}
		rows = append(rows, row)
	}
	if r.AllocRateChurnMBs != nil {
		rows = append(rows, Row{Figure: "Allocation rate under churn (MB/s)", N: largest(r.PropagationChurn),
			Value: f(*r.AllocRateChurnMBs), Target: "≤ 3 MB/s", Met: check(*r.AllocRateChurnMBs <= 3)})
	}
	if r.AllocRateChurnProbesMBs != nil {
		rows = append(rows, Row{Figure: "Allocation rate under churn, during the propagation probes (MB/s)", N: largest(r.PropagationChurn),
			Value: f(*r.AllocRateChurnProbesMBs)})
	}
	if fo := r.Failover; fo != nil {
		rows = append(rows,
			Row{Figure: "Graceful failover, to a new leader (ms)", N: "—", Value: f(fo.GracefulMs), Target: "≤ 1 s", Met: check(fo.GracefulMs <= 1000)},
			Row{Figure: "Crash failover, to a new leader (ms)", N: "—", Value: f(fo.CrashMs),
				Target: fmt.Sprintf("≤ lease (%s s) + 2 s", f(fo.LeaseDurationS)), Met: check(fo.CrashMs <= (fo.LeaseDurationS+2)*1000)})
	}
	for _, n := range sortedNs(r.EndToEnd) {
		e := r.EndToEnd[n]
		for _, l := range []struct {
			name    string
			v       *Latency
			targets bool
		}{{"Route create → first 200 through Envoy", e.RouteToFirst200, true},
			{"Route create → first 200 through Envoy, under churn", e.RouteToFirst200Churn, true},
			{"TCPRoute create → first connection through Envoy to the backend", e.TCPRouteToFirstConnection, false},
			{"TCPRoute create → first connection through Envoy to the backend, under churn", e.TCPRouteToFirstConnectionChurn, false}} {
			if l.v != nil {
				// Issue 27: the 1,000-route figure at every size.
				rows = append(rows, latencyRows(l.name, n, *l.v, l.targets && n == "10000", 20, 60)...)
			}
		}
		if l := e.EndpointToNewPod; l != nil {
			rows = append(rows, Row{Figure: "EndpointSlice change → first response from the new backend, p50 / p99 / max (ms)", N: n,
				Value: f(l.P50) + " / " + f(l.P99) + " / " + f(l.Max)})
		}
		if e.FailedRequestsChurn != nil {
			rows = append(rows, Row{Figure: "Failed requests of a constant stream under churn", N: n,
				Value: fmt.Sprintf("%d of %d", *e.FailedRequestsChurn, e.RequestsChurn), Target: "0", Met: check(*e.FailedRequestsChurn == 0)})
		}
		if e.EnvoyRSSMiB > 0 {
			rows = append(rows, Row{Figure: "Envoy RSS (MiB)", N: n, Value: f(e.EnvoyRSSMiB)})
		}
	}
	for _, n := range sortedNs(r.BytesPerRouteChange) {
		row := Row{Figure: "Bytes pushed per route change (kB)", N: n, Value: f(r.BytesPerRouteChange[n])}
		if n == "10000" {
			row.Target, row.Met = "≤ 20 kB", check(r.BytesPerRouteChange[n] <= 20)
		}
		rows = append(rows, row)
	}
	rows = append(rows, fleetRows(r.Fleet)...)
	return rows
}

// latencyRows are the p50, p99 and max rows of figure name at N n; with
// targets, p50 is held to p50Ms and p99 to p99Ms.
func latencyRows(name, n string, l Latency, targets bool, p50Ms, p99Ms float64) []Row {
	rows := []Row{
		{Figure: name + " p50 (ms)", N: n, Value: f(l.P50)},
		{Figure: name + " p99 (ms)", N: n, Value: f(l.P99)},
		{Figure: name + " max (ms)", N: n, Value: f(l.Max)},
	}
	if targets {
		rows[0].Target, rows[0].Met = "≤ "+f(p50Ms)+" ms", check(l.P50 <= p50Ms)
		rows[1].Target, rows[1].Met = "≤ "+f(p99Ms)+" ms", check(l.P99 <= p99Ms)
	}
	return rows
}

// mixedRow is the row of the translation with TCPRoutes against the
// HTTPRoutes alone.
func mixedRow(m *TranslateMixed) Row {
	return Row{
		Figure: fmt.Sprintf("Full translation, %s HTTPRoutes + %s TCPRoutes against the HTTPRoutes alone", grouped(m.HTTPRoutes), grouped(m.TCPRoutes)),
		N:      fmt.Sprintf("%d+%d", m.HTTPRoutes, m.TCPRoutes),
		Value: fmt.Sprintf("%s× (%s ms against %s ms; %d against %d allocs; median of %d rounds)",
			f(m.Ratio), f(m.With.Ms), f(m.Alone.Ms), m.With.Allocs, m.Alone.Allocs, m.Rounds),
		Target: "≤ " + f(MixMaxRatio) + "×", Met: check(m.Ratio <= MixMaxRatio),
	}
}

// grouped writes n with thousands separated by commas.
func grouped(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

func largest[T any](m map[string]T) string {
	ns := sortedNs(m)
	if len(ns) == 0 {
		return "—"
	}
	return ns[len(ns)-1]
}

// WriteMarkdown writes BENCHMARKS.md: charts (relative to chartDir), the
// table, the machine, details and the command that reproduces the run.
// A non-empty note is quoted after the reproduction commands.
func WriteMarkdown(w io.Writer, r *Results, d *Details, chartDir, note string) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# Benchmarks\n\n")
	p("Portico's benchmark suite (issue 6), generated by `test/bench/cmd/portico-bench`")
	p(" from `_output/bench/results.json` (and `details.json`). Do not edit by hand: rerun it.\n\n")
	p("Reproduce (20–25 minutes on 2 cores, most of it creating 10,000 routes with their Services and")
	p(" EndpointSlices through the API server; the quick mode, N = 100 and 1,000 with fewer probes, takes 3–5):\n\n")
	p("```sh\nhack/kube-binaries.sh          # once: kube-apiserver, etcd, kwok, … from the Go module proxy\n")
	p("make bench-suite               # full run: results, charts in docs/bench/, this file\n")
	p("make bench-suite BENCH_FLAGS=-quick   # quick run, into _output/bench/ only\n```\n\n")
	if note = strings.TrimSpace(note); note != "" {
		p("> %s\n\n", strings.ReplaceAll(note, "\n", "\n> "))
	}
	p("## Machine\n\n| | |\n|---|---|\n")
	m := r.Machine
	p("| CPU | %s (nproc %d) |\n| Memory | %s GiB |\n| OS | %s |\n| Go | %s |\n| Cluster | %s |\n",
		m.CPU, m.NProc, f(m.MemGiB), m.OS, m.Go, m.Kube)
	p("| Controller | %d replicas as `portico controller` processes, xDS over mTLS: %v |\n", m.Replicas, m.XDSTLS)
	commit := "`" + m.Commit + "`"
	if m.Commit == "" {
		commit = "unknown (not a git checkout)"
	}
	p("| Commit | %s |\n| Date | %s |\n| Mode | %s, ran %s s |\n", commit, m.Date, m.Mode, f(m.RuntimeS))
	p("| Highest 1-min load average | %s (above %d, other work competed for the CPUs) |\n\n", f(m.LoadAvgMax), m.NProc)
	if m.Mode != "full" {
		p("**This is a %s run: fewer route counts and probes than the full suite; do not compare it with targets.**\n\n", m.Mode)
	}
	p("## Charts\n\n")
	for _, c := range Charts {
		p("![%s](%s/%s)\n\n", c.Title, chartDir, c.File)
	}
	p("## Figures and targets\n\n| Figure | N (routes) | Value | Target | Verdict |\n|---|---|---|---|---|\n")
	met, total := 0, 0
	for _, row := range Rows(r) {
		p("| %s | %s | %s | %s | %s |\n", row.Figure, row.N, row.Value, dash(row.Target), row.verdict())
		if row.Met != nil {
			total++
			if *row.Met {
				met++
			}
		}
	}
	p("\n%d of %d targets met.\n\n", met, total)
	writeMethod(p, d)
	_, err := io.WriteString(w, b.String())
	return err
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "—"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", m[k], k)
	}
	return strings.Join(parts, ", ")
}

func dash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func writeMethod(p func(string, ...any), d *Details) {
	p("## How each figure is measured\n\n")
	p("- **Full translation**: in-process `testing.Benchmark` of `workload.Snapshot(N)` → `gatewayapi.Translate` →")
	p(" `translate.TranslateAll` of its Gateways (validated, encoded, hashed Envoy resources), several Gateways at a")
	p(" time as the controller does; the table also gives the time one Gateway after the other.\n")
	p("- **Full translation with TCPRoutes**: the same, in one run, for `workload.Snapshot(%d)` alone and", MixHTTPRoutes)
	p(" `workload.WithTCPRoutes(workload.Snapshot(%d), %d)` (%d more Gateways of %d TCP listeners, one TCPRoute each), %d rounds of", MixHTTPRoutes, MixTCPRoutes,
		(MixTCPRoutes+workload.TCPListenersPerGateway-1)/workload.TCPListenersPerGateway, workload.TCPListenersPerGateway, MixRounds)
	p(" both in alternating order; the ratio is the median of the rounds' ratios, the times the medians.\n")
	p("- **Translation of one changed route**: the mean of the follower's `portico_translation_duration_seconds`")
	p(" (sum/count delta) over the quiet propagation probes, each of which is two single-route changes: Gateway API")
	p(" and xDS translation, without the hand-off to the xDS cache (`portico_xds_update_duration_seconds`, in")
	p(" details.json as `follower_xds_update_mean_ms`). The same work in-process, without the cluster sharing the")
	p(" CPUs (`IncrementalTranslation`: the mean of 200 single-route changes of `workload.Snapshot(N)` through")
	p(" `incremental.Translator` and `translate.Translator`), is the row marked in-process.\n")
	p("- **Propagation**: an HTTPRoute with a unique path is created on a Gateway; the time until a Delta ADS")
	p(" client, connected over mTLS (the Gateway's client certificate) to the **follower** replica, receives a")
	p(" resource holding that path. The route is then deleted and its removal awaited. Under churn, routes change")
	p(" and Pods restart meanwhile.\n")
	p("- **TCPRoute propagation**: a TCPRoute (its name unique) is created on a TCP listener of the same Gateway")
	p(" (port %d, which has no other route: a TCP listener serves one) to the `live` Service of its namespace, the HTTP", TCPProbePort)
	p(" probes' backend; the time until the same ADS client holds a listener on that port whose tcp_proxy filter has the")
	p(" route's stat prefix (Portico's `tcproute_<namespace>_<name>_rule_0`) and every cluster that filter forwards to.")
	p(" The route is then deleted and the end of that awaited. Under churn, after the allocation windows below.\n")
	p("- **Endpoint propagation**: a Pod selected by a Service behind a route is created; from the moment the")
	p(" suite's watch sees it Ready (kwok), until its IP is in a ClusterLoadAssignment the follower pushed. details.json")
	p(" splits it where the suite's watch sees the EndpointSlice holding the IP: `pod_ready_to_endpointslice` (the")
	p(" EndpointSlice controller and the API server) and `endpointslice_to_eds` (the watch's delivery to the follower,")
	p(" its translation and push).\n")
	p("- **Through a real Envoy** (issue 13): Envoy %s (hack/envoy.sh) boots from the bootstrap Portico provisions for", testenv.EnvoyVersion)
	p(" the probe Gateway, with its client certificate, as the Deployment's container (its user, fsGroup and sysctl) in a")
	p(" network namespace of its own, and connects over mTLS to the follower (through a forwarder: the replicas listen on")
	p(" loopback). Two echo backends in namespaces of their own sit behind a Service whose EndpointSlice the suite writes.")
	p(" *Route create → first 200*: a route with a unique path to that Service is created; the time until a GET for the")
	p(" path through Envoy (one every %s) answers 200; the route is then deleted and Envoy's 404 awaited. *EndpointSlice", e2ePoll)
	p(" change → new backend*: the slice is pointed at the other backend; until a response comes from it. *Failed requests*:")
	p(" %d requests/s to a stable route for the churn window, under the churn (route changes, Pod restarts) and a rolling", StreamRate)
	p(" change of the route's backend every second (the new endpoint added, then the old one removed); a request fails")
	p(" unless a backend answers 200. *TCPRoute create → first connection*: a TCPRoute on a TCP listener of the Gateway")
	p(" with no other route is created, to a TCP echo the suite serves on the bridge; the time until a connection")
	p(" through Envoy (one every %s, each with a token of its own) gets the echo's answer to its token (before, Envoy", e2ePoll)
	p(" closes connections to a listener without a route at once); the route is then deleted and two failed connections")
	p(" in a row awaited. A stable TCPRoute on another listener keeps the echo's cluster in Envoy, as the stable HTTP route")
	p(" keeps the HTTP backends'. *Envoy RSS*: VmRSS of the Envoy process after the quiet probes.\n")
	p("- **Status convergence**: 1,000 routes to a new Gateway created at once (32 concurrent creates); until")
	p(" the Gateway's listener counts 1,000 attachedRoutes and every route is Accepted. Writes are the status")
	p(" updates by Portico in the kube-apiserver audit log during that window. **Status floor**: the same 1,000 creates,")
	p(" and the suite writes each route's status (one update, Accepted) as soon as its create returns, with 8 writers like")
	p(" the controller's status workers; until the last write returns. The routes name no Gateway, so the replicas see")
	p(" them but write nothing: the time is the API server's, the least any controller could converge in here.\n")
	p("- **Memory**: VmRSS of the controller processes (the larger) and their `go_memstats_heap_inuse_bytes`,")
	p(" after the quiet probes. **Allocation rate**: `go_memstats_alloc_bytes_total` delta per second, the larger")
	p(" replica, at the largest N: under the churn alone (%d route spec changes/s and %d Pod restart/s), for a", ChurnRouteUpdatesPerSec, ChurnPodRestartsPerSec)
	p(" window after the probes under churn; and during those probes, each of which adds a route create and delete")
	p(" (together several times the churn's rate of route changes).\n")
	p("- **Failover**: SIGTERM (graceful, median of %d) or SIGKILL (crash) of the leader process; the time until", GracefulSamples)
	p(" the other replica's `/debug/leader` says it leads. The time until a route created at the kill is Accepted")
	p(" and the new leader's status queue is empty is in the details below.\n")
	p("- **Bytes per route change**: the median, over the quiet probes, of the sum of `proto.Size` of the")
	p(" resources in the Delta responses caused by creating one route.\n")
	p("- **A Gateway whose routes share one hostname**: VHDS sends a virtual host whole, so a route change resends")
	p(" every route of its hostname: the bytes grow with the routes of the hostname, not with the change (a Gateway API")
	p(" hostname is one virtual host: Envoy picks the virtual host by Host before any route). In process")
	p(" (`go test -run '^$' -bench IncrementalRouteChange ./internal/pipeline/`, 2026-12-04), at 10,000 routes over 10")
	p(" Gateways: 8.9 kB pushed per change with 50 hostnames per Gateway, 440 kB with one (1,000 routes on it), and")
	p(" 2.1 ms against 21 ms to process; at 1,000 routes 1.0 kB against 42.9 kB. Spreading routes over hostnames")
	p(" (or listeners) is what keeps a change small. Such a Gateway also keeps its table in VHDS form (one hostname:")
	p(" scoping would not make the table smaller), so Envoy rebuilds all of it on each change.\n")
	p("- **Route tables in scoped form**: a table of at least 1,000 routes over several hostnames (the bench's")
	p(" Gateways at N = 5,000 and 10,000) is served as a table per hostname with")
	p(" a host-scope Lua filter (`internal/xds/translate/scoped.go`): a route change makes Envoy rebuild one hostname's")
	p(" table, not the listener's (`go test -run '^$' -bench EnvoyRouteUpdate ./test/envoy/`: 1.7 ms against 19 ms")
	p(" at 5,000 routes), for about 15 µs more per request (`-bench EnvoyRequest`).\n")
	p("- **Fleet**: at the largest N, delta ADS streams (each on a connection of its own, over mTLS with its")
	p(" Gateway's client certificate, wildcard on every type and VHDS, acknowledging every response) spread evenly over the")
	p(" Gateways and opened to the **follower**, 50 at a time. A probe creates one route per Gateway at once; per stream,")
	p(" the time from its Gateway's route write until the stream holds the route. RSS per stream: the follower's VmRSS")
	p(" before and after the streams. CPU per probe: the follower's user + system time from the writes until every stream")
	p(" has been quiet for 500 ms (so it includes the route deletes that end the probe). The clients run in the suite's")
	p(" process, on the same cores as the replicas. The server alone, in process and without TLS, is")
	p(" `go test -run '^$' -bench FleetRouteChange ./internal/xds/server/` (1,000 streams, 4 Gateways of 2,500 routes).\n")
	p("- **50,000 routes**: outside the full run's budget. `make bench-cluster-scale` runs this suite at N = 50,000 alone")
	p(" (no Envoy, no fleet, about 30 minutes), and `make bench-scale` the pipeline and xDS server in process; the figures")
	p(" of both are in [docs/bench/scale.md](docs/bench/scale.md) (2026-12-07, in the cluster: controller RSS 1,317.7 MiB,")
	p(" peak 1,335.9, against ≤ 1.5 GiB: met). The suite's backend Services are headless: Portico reads")
	p(" their EndpointSlices, never their ClusterIP, and the API server's ClusterIP allocation, one at a time, held Service")
	p(" creates to about 8 per second at 20,000 Services.\n\n")
	if d == nil {
		return
	}
	p("## Details\n\n")
	if len(d.ControllerArgs) > 0 {
		p("Extra controller flags: `%s`.\n\n", strings.Join(d.ControllerArgs, " "))
	} else {
		p("Controllers run with the defaults of `portico controller` (debounce, lease timings, API QPS).\n\n")
	}
	keys := make([]string, 0, len(d.Workload))
	for k := range d.Workload {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	p("Workload:\n\n")
	for _, k := range keys {
		p("- %s: %v\n", k, d.Workload[k])
	}
	p("\n| N | grow s | sync s | probes (quiet / churn / endpoint) | TCPRoute probes (quiet / churn) | delete p50 ms | proxy config kB | translations | RSS leader / follower MiB | peak RSS MiB | alloc MB/s quiet / churn / churn probes |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, n := range sortedNs(d.Stages) {
		st := d.Stages[n]
		probes := func(ps *ProbeStats) string {
			if ps == nil {
				return "—"
			}
			if ps.Failures > 0 {
				return fmt.Sprintf("%d (%d failed)", ps.Probes, ps.Failures)
			}
			return strconv.Itoa(ps.Probes)
		}
		del := "—"
		if st.Propagation != nil && st.Propagation.Delete != nil {
			del = f(st.Propagation.Delete.P50)
		}
		var kb float64
		for _, v := range st.ProxyConfigKB {
			kb += v
		}
		rate := func(m map[string]float64) string {
			if len(m) == 0 {
				return "—"
			}
			return f(maxValue(m))
		}
		p("| %s | %s | %s | %s / %s / %s | %s / %s | %s | %s | %d | %s / %s | %s | %s / %s / %s |\n", n, f(st.GrowSeconds), f(st.SyncSeconds),
			probes(st.Propagation), probes(st.Churn), probes(st.Endpoint), probes(st.TCPPropagation), probes(st.TCPChurn), del, f(round(kb, 1)), st.Translations,
			f(st.Memory["leader"].RSSMiB), f(st.Memory["follower"].RSSMiB),
			f(max(st.Memory["leader"].PeakRSSMiB, st.Memory["follower"].PeakRSSMiB)),
			rate(st.AllocQuietMBs), rate(st.AllocChurnMBs), rate(st.AllocChurnProbesMBs))
	}
	p("\nGrow: creating the stage's routes, Services and EndpointSlices while both replicas run. Peak RSS is")
	p(" VmHWM since the process started (the failover scenario restarts them). Translations: the follower's, during the quiet probes.")
	p(" Allocation rates: the larger replica's, during the quiet probes, under the churn alone, and during the probes under churn.\n\n")
	if c := d.StatusConvergence; c != nil {
		p("Status convergence: attachedRoutes = %d after %s s, every route Accepted after %s s (creates took %s s, so %s s after the last create);",
			c.Routes, f(c.AttachedSeconds), f(c.AllAcceptedSeconds), f(c.CreateSeconds), f(c.AfterCreatesSeconds))
		p(" status writes in the audit log: %s; in the leader's metrics: %s.", counts(c.AuditWrites), counts(c.MetricWrites))
		if !c.Converged {
			p(" **It did not converge within %s s.**", f(c.WaitedSeconds))
		}
		if len(c.CPUSeconds) > 0 {
			p(" CPU time until converged (s): %s.", cpuText(c.CPUSeconds))
		}
		if fl := d.StatusFloor; fl != nil {
			p(" Floor: the suite creating %d routes the same way and writing each one's status itself took %s s (creates %s s).",
				fl.Routes, f(fl.Seconds), f(fl.CreateSeconds))
			if len(fl.CPUSeconds) > 0 {
				p(" CPU time meanwhile (s): %s.", cpuText(fl.CPUSeconds))
			}
		}
		p("\n\n")
	}
	for _, fo := range d.Failover {
		p("- Failover by %s at %d routes: new leader after %s ms", fo.Signal, d.FailoverAtRoutes, f(fo.LeaderMs))
		if fo.Converged != nil {
			if *fo.Converged {
				p(", converged status after %s ms", f(fo.ConvergedMs))
			} else {
				p(", status **not converged** after %s ms", f(fo.ConvergedMs))
			}
		}
		p(".\n")
	}
	if len(d.Failover) > 0 {
		p("\n")
	}
	if len(d.Errors) > 0 {
		p("Errors during the run:\n\n")
		for _, e := range d.Errors {
			p("- %s\n", e)
		}
		p("\n")
	}
}

// fOpt formats an optional figure; "–" when missing.
func fOpt(v *float64) string {
	if v == nil {
		return "–"
	}
	return f(*v)
}

// cpuText lists CPU times by process, the largest first.
func cpuText(u CPUUsage) string {
	names := make([]string, 0, len(u))
	for k := range u {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool {
		if u[names[i]] != u[names[j]] {
			return u[names[i]] > u[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = k + " " + f(u[k])
	}
	return strings.Join(parts, ", ")
}
