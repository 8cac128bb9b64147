package main

import (
	"flag"
	"fmt"
	"log/slog"

	"github.com/portico-dev/portico/internal/gctune"
)

// gcFlags are the garbage collector's targets (internal/gctune), shared by
// the long-running commands: controller and standalone.
type gcFlags struct {
	percent *int
	ratio   *float64
}

func addGCFlags(fs *flag.FlagSet) gcFlags {
	return gcFlags{
		percent: fs.Int("gc-percent", gctune.DefaultGCPercent,
			"Go GC percent: how far the heap may grow over the live state between collections; 0: the runtime's 100; the GOGC environment variable wins"),
		ratio: fs.Float64("memory-limit-ratio", gctune.DefaultLimitRatio,
			"soft memory limit (GOMEMLIMIT) as this fraction of the cgroup memory limit (a container's limits.memory); 0: none; GOMEMLIMIT and AUTOMEMLIMIT win"),
	}
}

// check refuses values no run could use.
func (g gcFlags) check() error {
	if *g.percent < 0 {
		return fmt.Errorf("--gc-percent %d: want 0 or more", *g.percent)
	}
	if r := *g.ratio; r < 0 || r > 1 {
		return fmt.Errorf("--memory-limit-ratio %v: want a fraction in [0, 1]", r)
	}
	return nil
}

// apply sets the targets and logs them; a memory limit that cannot be
// read is a warning, not a reason not to start.
func (g gcFlags) apply(log *slog.Logger) {
	s, err := gctune.Apply(gctune.Config{GCPercent: *g.percent, LimitRatio: *g.ratio, Log: log.With("component", "gctune")})
	if err != nil {
		log.Warn("garbage collector: no memory limit set", "err", err)
	}
	log.Info("garbage collector", "gcPercent", s.GCPercent, "gcPercentFrom", s.GCPercentFrom,
		"memoryLimit", s.MemoryLimit, "memoryLimitFrom", s.MemoryLimitFrom)
}
