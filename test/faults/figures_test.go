package faults

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// figures collects what the tests measured, by top-level test name.
var figures = struct {
	mu    sync.Mutex
	tests map[string]map[string]any
	order []string
}{tests: map[string]map[string]any{}}

// figure records one measured value of the running test and logs it as
// "FIGURE name=value". Durations are recorded in milliseconds (name gets
// the suffix _ms).
func figure(t *testing.T, name string, value any) {
	t.Helper()
	if d, ok := value.(time.Duration); ok {
		name += "_ms"
		value = d.Milliseconds()
	}
	if f, ok := value.(float64); ok {
		value = math.Round(f*100) / 100
	}
	t.Logf("FIGURE %s=%v", name, value)
	test, _, _ := strings.Cut(t.Name(), "/")
	if sub := strings.TrimPrefix(t.Name(), test); sub != "" {
		name = strings.TrimPrefix(sub, "/") + "." + name
	}
	figures.mu.Lock()
	defer figures.mu.Unlock()
	m := figures.tests[test]
	if m == nil {
		m = map[string]any{}
		figures.tests[test] = m
		figures.order = append(figures.order, test)
	}
	m[name] = value
}

// figureFile is _output/faults/figures.json: the figures of the last run of
// each test, with when and where it ran.
type figureFile struct {
	Tests map[string]figureRun `json:"tests"`
}

type figureRun struct {
	Time string `json:"time"`
	Host string `json:"host"`
	// Load is the 1-minute load average when the suite started and ended:
	// the figures are timings on a shared machine.
	Load    string         `json:"load"`
	Passed  bool           `json:"passed"`
	Figures map[string]any `json:"figures"`
}

var testPassed sync.Map // test name → bool

// trackResult remembers whether the test passed, for figures.json.
func trackResult(t *testing.T) {
	t.Cleanup(func() { testPassed.Store(t.Name(), !t.Failed() && !t.Skipped()) })
}

// writeFigures merges this run's figures into figures.json (tests that did
// not run keep their previous entry).
func writeFigures() error {
	figures.mu.Lock()
	defer figures.mu.Unlock()
	if len(figures.tests) == 0 {
		return nil
	}
	if err := os.MkdirAll(harness.outDir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(harness.outDir, "figures.json")
	var f figureFile
	if data, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(data, &f)
	}
	if f.Tests == nil {
		f.Tests = map[string]figureRun{}
	}
	host := fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	now := time.Now().UTC().Format(time.RFC3339)
	for _, name := range figures.order {
		f.Tests[name] = figureRun{Time: now, Host: host, Load: harness.loadStart + " → " + loadAverage(),
			Passed: passed(name), Figures: figures.tests[name]}
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return err
	}
	md := filepath.Join(harness.outDir, "figures.md")
	if err := os.WriteFile(md, []byte(f.markdown()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "faults: figures written to %s and %s\n", path, md)
	return nil
}

// loadAverage is the 1-minute load average ("?" if unknown).
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		return "?"
	}
	return fields[0]
}

// passed reports whether test and all its subtests that made a world
// passed.
func passed(test string) bool {
	seen, ok := false, true
	testPassed.Range(func(k, v any) bool {
		name := k.(string)
		if name == test || strings.HasPrefix(name, test+"/") {
			seen = true
			ok = ok && v.(bool)
		}
		return true
	})
	return seen && ok
}

// markdown renders the figures as the table of docs/reliability.md.
func (f *figureFile) markdown() string {
	var b strings.Builder
	b.WriteString("| test | result | load | figures (last run) |\n|---|---|---|---|\n")
	tests := make([]string, 0, len(f.Tests))
	for name := range f.Tests {
		tests = append(tests, name)
	}
	sort.Strings(tests)
	for _, name := range tests {
		run := f.Tests[name]
		keys := make([]string, 0, len(run.Figures))
		for k := range run.Figures {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var figs []string
		for _, k := range keys {
			figs = append(figs, fmt.Sprintf("`%s=%v`", k, run.Figures[k]))
		}
		result := "FAIL"
		if run.Passed {
			result = "pass"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", name, result, run.Load, strings.Join(figs, " "))
	}
	return b.String()
}
