package pipeline

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/gctune"
	"github.com/portico-dev/portico/internal/testenv/workload"
	"github.com/portico-dev/portico/internal/xds/server"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// BenchmarkScale is the scale run of issue 27 (make bench-scale): the
// pipeline with Portico's xDS server behind it, at PORTICO_BENCH_ROUTES
// routes (default 50,000; skipped unless that variable or
// PORTICO_BENCH_SCALE is set). It reports the first full translation
// (full-ms), a route change through the pipeline and the server
// (change-ms, per op), what one delta client of the Gateway is sent for
// it (pushed-B), the Go heap in use with everything held (heap-MiB), the
// bytes allocated per change (alloc-B/op, as -benchmem), and the process's
// resident set after the changes (rss-MiB) and at its peak (peak-rss-MiB),
// under the controller's GC percent (gctune.DefaultGCPercent) unless GOGC
// is set.
func BenchmarkScale(b *testing.B) {
	n := 50000
	if v := os.Getenv("PORTICO_BENCH_ROUTES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	} else if os.Getenv("PORTICO_BENCH_SCALE") == "" {
		b.Skip("set PORTICO_BENCH_SCALE=1 (make bench-scale)")
	}
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(gctune.DefaultGCPercent))
	}
	b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
		snap := workload.Snapshot(n)
		xds := server.New(nil, nil)
		p := New(Config{ControllerName: workload.ControllerName, XDS: serverSink{xds}, Status: nopSink{}})
		t0 := time.Now()
		p.process(context.Background(), snap, 0)
		full := time.Since(t0)
		if l := p.Latest(); l == nil || len(l.XDS) != workload.Gateways {
			b.Fatal("first translation failed")
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		routeChanges(b, p, snap, n, true)
		// After the changes: ResetTimer (in routeChanges) drops metrics
		// reported before it.
		b.ReportMetric(float64(full.Milliseconds()), "full-ms")
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
		if rss, peak, ok := residentMiB(); ok {
			b.ReportMetric(rss, "rss-MiB")
			b.ReportMetric(peak, "peak-rss-MiB")
		}
	})
}

// residentMiB reads VmRSS and VmHWM of this process (Linux only).
func residentMiB() (rss, peak float64, ok bool) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return rss, peak, rss > 0
}

// serverSink hands translations to an xDS server.
type serverSink struct{ s *server.Server }

func (k serverSink) Update(ctx context.Context, res []*translate.Resources) error {
	return k.s.Update(ctx, res)
}
