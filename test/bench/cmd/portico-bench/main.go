// Command portico-bench runs Portico's benchmark suite (issue 6) on a kwok
// cluster it starts (hack/cluster-up.sh, into a temporary directory) with
// two `portico controller` processes, and writes:
//
//	<out>/results.json   the figures, in the shape issue 6 fixes
//	<out>/details.json   everything else (probe counts, per-replica memory, …)
//	<out>/logs/          the controllers' logs
//	<charts>/*.png       latency, translation and memory against route count
//	<markdown>           BENCHMARKS.md: charts, table with targets, machine
//
// It is in a Go module of its own (test/bench/go.mod, which replaces the
// product's module with the repository) so that its plotting dependencies
// stay out of the product's go.mod. Usage (`make bench-suite` runs the
// first; relative paths are the repository's whatever the directory):
//
//	cd test/bench && go run ./cmd/portico-bench            # full: N = 100, 1,000, 5,000, 10,000 (~20 min)
//	cd test/bench && go run ./cmd/portico-bench -quick     # N = 100, 1,000, fewer probes (~5 min)
//	cd test/bench && go run ./cmd/portico-bench -render    # charts and markdown from <out>/*.json
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/portico-dev/portico/test/bench"
)

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	os.Exit(run())
}

func run() int {
	fs := flag.NewFlagSet("portico-bench", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "N = 100 and 1,000 with fewer probes; writes charts and markdown into -out only")
	sizes := fs.String("sizes", "", "comma-separated route counts (default 100,1000,5000,10000; quick: 100,1000)")
	probes := fs.Int("probes", 0, "route probes per N, quiet and under churn (default 100; quick 20)")
	epProbes := fs.Int("endpoint-probes", 0, "endpoint probes per N (default 50; quick 10)")
	budget := fs.Duration("probe-budget", 0, "longest one batch of probes may run (default 60s; quick 30s)")
	out := fs.String("out", "_output/bench", "output directory")
	charts := fs.String("charts", "", "chart directory (default docs/bench; quick: -out)")
	markdown := fs.String("markdown", "", "BENCHMARKS.md to write (default BENCHMARKS.md; quick: <out>/BENCHMARKS.md)")
	kubeconfig := fs.String("kubeconfig", "", "use this cluster instead of starting one (no audit log: metrics count writes)")
	drain := fs.Duration("status-drain-timeout", 2*time.Minute, "longest wait for the leader's status queue to empty after a stage's creates")
	render := fs.Bool("render", false, "only render charts and markdown from <out>/results.json and details.json")
	skipTranslate := fs.Bool("skip-translate", false, "skip the in-process full translation benchmark")
	fleet := fs.Int("fleet", -1, "delta ADS streams of the fleet scenario at the largest N (default 1000; quick 200; 0 skips it)")
	skipEnvoy := fs.Bool("skip-envoy", false, "skip the end-to-end figures through a real Envoy (they need root and hack/envoy.sh)")
	skipCluster := fs.Bool("skip-cluster", false, "run only the in-process benchmark")
	keep := fs.Bool("keep", false, "keep the temporary cluster directory")
	note := fs.String("note", "", "a remark quoted at the top of the markdown (e.g. what the run is a baseline of)")
	var ctrlFlags stringList
	fs.Var(&ctrlFlags, "controller-flag", "extra `portico controller` flag, e.g. -controller-flag=--debounce=10ms (repeatable)")
	profiles := fs.Bool("profiles", false, "save each replica's heap profile at each N, its allocation profile before and after the churn window, and the follower's CPU profile during the quiet probes, into <out>/profiles (starts the controllers with --debug-pprof)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if *profiles {
		ctrlFlags = append(ctrlFlags, "--debug-pprof")
	}
	repo, err := bench.FindRepo()
	if err != nil {
		fmt.Fprintln(os.Stderr, "portico-bench:", err)
		return 1
	}
	// The suite runs from the repository root, whatever the working
	// directory (`go run` in test/bench, the bench's own module): the
	// harness it uses (testenv) finds the repository from there.
	if *kubeconfig != "" {
		if *kubeconfig, err = filepath.Abs(*kubeconfig); err != nil {
			fmt.Fprintln(os.Stderr, "portico-bench:", err)
			return 1
		}
	}
	if err := os.Chdir(repo); err != nil {
		fmt.Fprintln(os.Stderr, "portico-bench:", err)
		return 1
	}
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(repo, p)
	}
	mode := "full"
	cfg := bench.Config{
		Repo: repo, Out: abs(*out), Mode: mode,
		Sizes: []int{100, 1000, 5000, 10000}, Probes: 100, EndpointProbes: 50, ProbeBudget: 60 * time.Second,
		ConvergenceRoutes: 1000, FailoverAt: 1000, StatusDrainTimeout: *drain,
		Kubeconfig: *kubeconfig, ControllerArgs: ctrlFlags,
		SkipTranslate: *skipTranslate, SkipCluster: *skipCluster, SkipEnvoy: *skipEnvoy, Log: os.Stderr,
		Profiles: *profiles, FleetStreams: 1000,
	}
	chartDir, mdPath := abs("docs/bench"), abs("BENCHMARKS.md")
	if *quick {
		cfg.Mode = "quick"
		cfg.Sizes, cfg.Probes, cfg.EndpointProbes, cfg.ProbeBudget = []int{100, 1000}, 20, 10, 30*time.Second
		cfg.ChurnWindow = 5 * time.Second
		cfg.FleetStreams = 200
		chartDir, mdPath = cfg.Out, filepath.Join(cfg.Out, "BENCHMARKS.md")
	}
	if *sizes != "" {
		cfg.Sizes = nil
		for _, s := range strings.Split(*sizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n <= 0 {
				fmt.Fprintf(os.Stderr, "portico-bench: -sizes: bad route count %q\n", s)
				return 2
			}
			cfg.Sizes = append(cfg.Sizes, n)
		}
		if !contains(cfg.Sizes, cfg.FailoverAt) {
			cfg.FailoverAt = cfg.Sizes[len(cfg.Sizes)-1]
		}
	}
	if *probes > 0 {
		cfg.Probes = *probes
	}
	if *fleet >= 0 {
		cfg.FleetStreams = *fleet
	}
	if *epProbes > 0 {
		cfg.EndpointProbes = *epProbes
	}
	if *budget > 0 {
		cfg.ProbeBudget = *budget
	}
	if *charts != "" {
		chartDir = abs(*charts)
	}
	if *markdown != "" {
		mdPath = abs(*markdown)
	}
	for _, d := range []string{cfg.Out, chartDir, filepath.Dir(mdPath)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "portico-bench:", err)
			return 1
		}
	}

	var res *bench.Results
	var det *bench.Details
	code := 0
	if *render {
		if res, err = bench.ReadResults(filepath.Join(cfg.Out, "results.json")); err != nil {
			fmt.Fprintln(os.Stderr, "portico-bench:", err)
			return 1
		}
		det = &bench.Details{}
		if b, err := os.ReadFile(filepath.Join(cfg.Out, "details.json")); err == nil {
			_ = json.Unmarshal(b, det)
		}
	} else {
		work, err := os.MkdirTemp("", "portico-bench-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "portico-bench:", err)
			return 1
		}
		if *keep {
			fmt.Fprintln(os.Stderr, "portico-bench: work directory", work)
		} else {
			defer os.RemoveAll(work)
		}
		cfg.Work = work
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		res, det, err = bench.Run(ctx, cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "portico-bench: FAILED:", err)
			det.Errors = append(det.Errors, "run stopped: "+err.Error())
			code = 1
		}
		for name, v := range map[string]any{"results.json": res, "details.json": det} {
			if err := bench.WriteJSON(filepath.Join(cfg.Out, name), v); err != nil {
				fmt.Fprintln(os.Stderr, "portico-bench:", err)
				return 1
			}
		}
	}
	if err := bench.Render(res, chartDir); err != nil {
		fmt.Fprintln(os.Stderr, "portico-bench: charts:", err)
		return 1
	}
	rel, err := filepath.Rel(filepath.Dir(mdPath), chartDir)
	if err != nil {
		rel = chartDir
	}
	md, err := os.Create(mdPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "portico-bench:", err)
		return 1
	}
	defer md.Close()
	if err := bench.WriteMarkdown(md, res, det, filepath.ToSlash(rel), *note); err != nil {
		fmt.Fprintln(os.Stderr, "portico-bench:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "portico-bench: wrote %s, %s and charts in %s\n",
		filepath.Join(cfg.Out, "results.json"), mdPath, chartDir)
	for _, row := range bench.Rows(res) {
		fmt.Printf("%-45s %6s  %-22s %s\n", row.Figure, row.N, row.Value, row.Target)
	}
	return code
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
