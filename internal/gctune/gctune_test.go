package gctune

import (
	"errors"
	"math"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// restore puts the runtime's targets back after a test changed them.
func restore(t *testing.T) {
	t.Helper()
	percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	debug.SetGCPercent(percent)
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	})
}

// clean unsets the variables that override the flags.
func clean(t *testing.T) {
	t.Helper()
	for _, v := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Setenv(v, "")
	}
}

func TestFlagSetsGCPercent(t *testing.T) {
	restore(t)
	clean(t)
	debug.SetGCPercent(100)
	s, err := Apply(Config{GCPercent: 50})
	if err != nil {
		t.Fatal(err)
	}
	if got := currentGCPercent(); got != 50 || s.GCPercent != 50 || s.GCPercentFrom != "flag" {
		t.Errorf("GC percent %d, settings %+v; want 50 from the flag", got, s)
	}
	if s.MemoryLimitFrom != "none" || s.MemoryLimit != debug.SetMemoryLimit(-1) {
		t.Errorf("no ratio asked for, but the memory limit is %+v", s)
	}
}

func TestGOGCWinsOverTheFlag(t *testing.T) {
	restore(t)
	clean(t)
	t.Setenv("GOGC", "80")
	debug.SetGCPercent(80) // what the runtime read from GOGC at start
	s, err := Apply(Config{GCPercent: 50})
	if err != nil {
		t.Fatal(err)
	}
	if got := currentGCPercent(); got != 80 || s.GCPercent != 80 || s.GCPercentFrom != "GOGC" {
		t.Errorf("GC percent %d, settings %+v; want GOGC's 80 kept", got, s)
	}
}

func TestNoFlagKeepsTheRuntimeDefault(t *testing.T) {
	restore(t)
	clean(t)
	debug.SetGCPercent(100)
	s, err := Apply(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if s.GCPercent != 100 || s.GCPercentFrom != "default" {
		t.Errorf("settings %+v; want the runtime's 100", s)
	}
}

func TestLimitIsTheRatioOfTheCgroupLimit(t *testing.T) {
	restore(t)
	clean(t)
	s, err := Apply(Config{LimitRatio: 0.9, Limit: memlimit.Limit(1 << 30)})
	if err != nil {
		t.Fatal(err)
	}
	ratio := 0.9
	want := int64(float64(1<<30) * ratio)
	if got := debug.SetMemoryLimit(-1); got != want || s.MemoryLimit != want || s.MemoryLimitFrom != "cgroup" {
		t.Errorf("memory limit %d, settings %+v; want %d from the cgroup", got, s, want)
	}
}

func TestNoCgroupLimitSetsNone(t *testing.T) {
	restore(t)
	clean(t)
	debug.SetMemoryLimit(math.MaxInt64)
	none := func() (uint64, error) { return 0, memlimit.ErrNoLimit }
	s, err := Apply(Config{LimitRatio: 0.9, Limit: none})
	if err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 || s.MemoryLimitFrom != "none" {
		t.Errorf("memory limit %d, settings %+v; want none", got, s)
	}
}

func TestGOMEMLIMITWinsOverTheCgroup(t *testing.T) {
	restore(t)
	clean(t)
	t.Setenv("GOMEMLIMIT", "300MiB")
	debug.SetMemoryLimit(300 << 20) // what the runtime read at start
	called := false
	provider := func() (uint64, error) { called = true; return 1 << 30, nil }
	s, err := Apply(Config{LimitRatio: 0.9, Limit: provider})
	if err != nil {
		t.Fatal(err)
	}
	if called || debug.SetMemoryLimit(-1) != 300<<20 || s.MemoryLimitFrom != "GOMEMLIMIT" {
		t.Errorf("provider called: %v, settings %+v; want GOMEMLIMIT kept", called, s)
	}
}

func TestBadRatioOrUnreadableLimitChangesNothing(t *testing.T) {
	restore(t)
	clean(t)
	debug.SetMemoryLimit(math.MaxInt64)
	broken := func() (uint64, error) { return 0, errors.New("cannot read memory.max") }
	for _, c := range []Config{{LimitRatio: 1.5, Limit: memlimit.Limit(1 << 30)}, {LimitRatio: 0.9, Limit: broken}} {
		if _, err := Apply(c); err == nil {
			t.Errorf("%+v: no error", c)
		}
		if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
			t.Errorf("%+v: memory limit changed to %d", c, got)
		}
	}
}
