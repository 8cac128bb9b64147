// Package gctune sets the Go garbage collector's two targets for the
// controller: how much the heap may grow between collections (the GC
// percent, GOGC) and a soft ceiling taken from the container's memory
// limit (GOMEMLIMIT).
//
// Why the controller does not keep Go's defaults: its heap is almost all
// long-lived state (the informers' objects, the translation's memo and
// dependency records, the xDS cache), and what it allocates once in sync
// is small (about 1.5 MB/s at 10,000 routes under churn, BENCHMARKS.md).
// With GOGC=100 the runtime lets the heap reach twice the live state
// before it collects, and keeps those pages resident: the resident set was
// about twice the live heap plus the binary's text. A GC percent of 50
// lowers that headroom by a third; the price is more frequent collections
// in bursts (the initial sync, a full translation). Measured by the bench
// suite (make bench-suite, 2 cores), Go's 100 against 50: RSS 124 → 105
// MiB at 1,000 routes and 419 → 328 MiB at 10,000; at 10,000, propagation
// under churn p50/p99 11.8/53 → 11.4/49 ms and the follower's translation
// of one changed route 2.86 → 2.42 ms, so no cost shows where latency
// matters (one earlier run gave 17/95 ms under churn, which the next run
// did not repeat: the figure is the noisiest of the suite). The cost is
// in bursts: a cold first full translation is 20–25% slower (make
// bench-scale: 324–349 → 399–403 ms at 10,000 routes, 2.16 → 2.74 s at
// 50,000; docs/bench/scale.md), a price paid at start and on a full
// retranslation, not per change.
//
// The memory limit: when the process runs under a cgroup memory limit (a
// container's resources.limits.memory), the soft limit is set to a
// fraction of it (Config.LimitRatio, default 0.9) through automemlimit,
// so that the collector works harder before the kernel kills the
// process, instead of after. The rest of the limit is left to what the
// Go heap does not count (goroutine stacks, the binary's text).
//
// Either target set in the environment (GOGC, GOMEMLIMIT, or AUTOMEMLIMIT
// for the ratio) wins over the flags: an operator who tuned the runtime
// keeps what they chose.
package gctune

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// DefaultGCPercent and DefaultLimitRatio are the controller's defaults.
const (
	DefaultGCPercent  = 50
	DefaultLimitRatio = 0.9
)

// Config is what the flags ask for.
type Config struct {
	// GCPercent is the GC percent to set; 0 leaves the runtime's (GOGC or
	// 100).
	GCPercent int
	// LimitRatio is the fraction of the cgroup memory limit to take as the
	// soft memory limit; 0 sets none (unless AUTOMEMLIMIT asks for one).
	LimitRatio float64
	// Limit returns the memory limit; nil: the cgroup's
	// (memlimit.FromCgroup); memlimit.ErrNoLimit: none.
	Limit memlimit.Provider
	// Log tells what the memory limit became (nil: nothing).
	Log *slog.Logger
}

// Settings are the targets in effect after Apply, for the startup log.
type Settings struct {
	// GCPercent is the GC percent in effect (-1: collection off).
	GCPercent int
	// GCPercentFrom says where it comes from: "flag", "GOGC" or "default"
	// (the runtime's 100).
	GCPercentFrom string
	// MemoryLimit is the soft memory limit in bytes (math.MaxInt64: none).
	MemoryLimit int64
	// MemoryLimitFrom: "cgroup", "GOMEMLIMIT" or "none".
	MemoryLimitFrom string
}

// Apply sets the targets c asks for and returns those in effect. An error
// (a ratio out of range, a cgroup limit that cannot be read) leaves the
// memory limit as it was; the GC percent is set all the same.
func Apply(c Config) (Settings, error) {
	var s Settings
	switch {
	case os.Getenv("GOGC") != "":
		s.GCPercent, s.GCPercentFrom = currentGCPercent(), "GOGC"
	case c.GCPercent > 0:
		debug.SetGCPercent(c.GCPercent)
		s.GCPercent, s.GCPercentFrom = c.GCPercent, "flag"
	default:
		s.GCPercent, s.GCPercentFrom = currentGCPercent(), "default"
	}

	s.MemoryLimit, s.MemoryLimitFrom = debug.SetMemoryLimit(-1), "none"
	if os.Getenv("GOMEMLIMIT") != "" {
		s.MemoryLimitFrom = "GOMEMLIMIT"
		return s, nil
	}
	if _, auto := os.LookupEnv("AUTOMEMLIMIT"); c.LimitRatio == 0 && !auto {
		return s, nil
	}
	if c.LimitRatio < 0 || c.LimitRatio > 1 {
		return s, fmt.Errorf("memory limit ratio %v: want a fraction in (0, 1]", c.LimitRatio)
	}
	opts := []memlimit.Option{memlimit.WithRatio(c.LimitRatio)}
	if c.Limit != nil {
		opts = append(opts, memlimit.WithProvider(c.Limit))
	}
	if c.Log != nil {
		opts = append(opts, memlimit.WithLogger(c.Log))
	}
	limit, err := memlimit.Set(opts...)
	if err != nil {
		return s, fmt.Errorf("memory limit: %w", err)
	}
	s.MemoryLimit = limit
	if limit != math.MaxInt64 {
		s.MemoryLimitFrom = "cgroup"
	}
	return s, nil
}

// currentGCPercent reads the GC percent without changing it.
func currentGCPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}
