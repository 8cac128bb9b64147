package file

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/resource/load"
)

// startIn runs a provider of dir (already filled) with opts until the test
// ends.
func startIn(t *testing.T, dir string, opts *Options) *harness {
	t.Helper()
	h := &harness{t: t, dir: dir, snaps: make(chan *resource.Snapshot, 100), logs: make(records, 1000)}
	p := New(h.dir, func(s *resource.Snapshot) { h.snaps <- s }, slog.New(h.logs), 20*time.Millisecond)
	if opts != nil {
		p.WithOptions(*opts)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(wait):
			t.Error("Run did not return after cancel")
		}
	})
	return h
}

// waitSkipped waits for the "skipped file" warning of file and returns its
// attributes.
func (h *harness) waitSkipped(file string) map[string]string {
	h.t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case r := <-h.logs:
			if a := attrs(r); r.Level == slog.LevelWarn && r.Message == "skipped file" && a["file"] == file {
				return a
			}
		case <-timeout:
			h.t.Fatalf("no warning for skipped file %s", file)
			return nil
		}
	}
}

// TestRefusedFilesDoNotStopTheLoad: a FIFO, a symlink to /dev/zero and a
// symlink out of the directory are skipped with a warning each, at startup
// and later, and the other files load.
func TestRefusedFilesDoNotStopTheLoad(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "outside.yaml")
	if err := os.WriteFile(outside, []byte(service("outside")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(service("a")), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	links := map[string]string{filepath.Join(dir, "out.yaml"): outside}
	if _, err := os.Stat("/dev/zero"); err == nil {
		links[filepath.Join(dir, "zero.yaml")] = "/dev/zero"
	}
	for link, target := range links {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}

	h := startIn(t, dir, nil)
	h.waitSnapshot("a")
	if a := h.waitSkipped(fifo); !strings.Contains(a["reason"], "not a regular file") || a["category"] != string(load.ReasonNotRegular) {
		t.Errorf("FIFO warning = %v", a)
	}
	for _, link := range slices.Sorted(maps.Keys(links)) { // the loader's (lexical) order
		if a := h.waitSkipped(link); !strings.Contains(a["reason"], "outside the directory") || a["category"] != string(load.ReasonOutside) {
			t.Errorf("symlink warning = %v", a)
		}
	}

	// Later changes still load, the refused files still skipped.
	h.write("b.yaml", service("b"))
	h.waitSnapshot("a", "b")
	h.waitSkipped(fifo)
}

// gauge returns the value of the series of name with the label, or -1.
func gauge(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					if m.Gauge != nil {
						return m.GetGauge().GetValue()
					}
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return -1
}

// TestLoadLimitsAndMetrics: a file over the provider's limit is skipped,
// and counted, until it is removed; a file that does not parse fails the
// load (counted too) and keeps the last good snapshot.
func TestLoadLimitsAndMetrics(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(service("a")), 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, []byte(service("big")+strings.Repeat("# pad\n", 200)), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	h := startIn(t, dir, &Options{Limits: load.Limits{MaxFileBytes: 1000}, Metrics: reg})
	h.waitSnapshot("a")
	if a := h.waitSkipped(big); !strings.Contains(a["reason"], "larger than the limit of 1000 bytes") {
		t.Errorf("warning = %v", a)
	}
	if got := gauge(t, reg, "portico_resource_load_warnings", "reason", string(load.ReasonTooLarge)); got != 1 {
		t.Errorf("load_warnings{reason=file-too-large} = %v, want 1", got)
	}
	if got := gauge(t, reg, "portico_resource_load_warnings", "reason", string(load.ReasonNotRegular)); got != 0 {
		t.Errorf("load_warnings{reason=not-regular-file} = %v, want 0", got)
	}

	if err := os.Remove(big); err != nil {
		t.Fatal(err)
	}
	h.write("b.yaml", service("b"))
	h.waitSnapshot("a", "b")
	if got := gauge(t, reg, "portico_resource_load_warnings", "reason", string(load.ReasonTooLarge)); got != 0 {
		t.Errorf("load_warnings{reason=file-too-large} = %v after the removal, want 0", got)
	}
	ok := gauge(t, reg, "portico_resource_loads_total", "result", "ok")
	if ok < 2 {
		t.Errorf("loads_total{result=ok} = %v, want at least 2", ok)
	}

	h.write("broken.yaml", "apiVersion: v1\nkind: Service\nmetadata: [oops\n")
	h.waitLog(slog.LevelError, "loading resources failed")
	if got := gauge(t, reg, "portico_resource_loads_total", "result", "error"); got < 1 {
		t.Errorf("loads_total{result=error} = %v, want at least 1", got)
	}
}
