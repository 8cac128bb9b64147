package translate

import (
	"slices"
	"strings"
)

// Problem is a piece of a Gateway's IR that the translation left out
// because Envoy would refuse it: one route, or one listener. The rest of
// the Gateway is served without it, so that one tenant's object cannot
// stop the configuration of every other. Checks made here are made
// first by the Gateway API stage, which reports them on the object's
// status; a Problem is what slipped past it, and the pipeline reports it
// on the Gateway (Programmed=False) and on the route it names.
type Problem struct {
	// Route is the ir.Route name ("httproute/<ns>/<name>/rule/<i>/match/<j>"
	// or "grpcroute/…"), empty for a listener problem.
	Route string
	// Listener is the ir.Listener name, empty for a route problem.
	Listener string
	// Err says what Envoy would refuse.
	Err string
}

// What names the piece left out.
func (p Problem) What() string {
	if p.Route != "" {
		return "route " + p.Route
	}
	return "listener " + p.Listener
}

func compareProblems(a, b Problem) int {
	if c := strings.Compare(a.Listener, b.Listener); c != 0 {
		return c
	}
	if c := strings.Compare(a.Route, b.Route); c != 0 {
		return c
	}
	return strings.Compare(a.Err, b.Err)
}

// collectProblems gathers the problems of what this translation serves:
// the listeners it dropped and the routes left out of every virtual host
// kept (built now or reused), each once, sorted.
func (t *translator) collectProblems() []Problem {
	out := slices.Clone(t.listenerProblems)
	add := func(rc *rcEntry) {
		if rc == nil {
			return
		}
		for _, v := range rc.vhosts {
			out = append(out, v.dropped...)
		}
	}
	for _, rc := range t.next.routeConfigs {
		add(rc)
	}
	if len(out) == 0 {
		return nil
	}
	slices.SortFunc(out, compareProblems)
	return slices.Compact(out)
}
