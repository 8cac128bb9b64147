package gatewayapi

import (
	"fmt"
	"math"
	"reflect"
	"runtime"
	"testing"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/testenv/workload"
)

// compileMode runs f with routes compiled and Gateways assembled
// serially (parallel false) or on four goroutines whatever their number
// and the machine's CPUs.
func compileMode[T any](parallel bool, f func() T) T {
	return parallelMode(parallel, parallel, f)
}

// parallelMode runs f with routes compiled ahead (compile) and Gateways
// assembled (build) on four goroutines, or serially.
func parallelMode[T any](compile, build bool, f func() T) T {
	prevMin, prevBuild, prevProcs := parallelCompileMin, parallelBuildMin, runtime.GOMAXPROCS(4)
	defer func() { parallelCompileMin, parallelBuildMin = prevMin, prevBuild; runtime.GOMAXPROCS(prevProcs) }()
	parallelCompileMin, parallelBuildMin = math.MaxInt, math.MaxInt
	if compile {
		parallelCompileMin = 1
	}
	if build {
		parallelBuildMin = 1
	}
	return f()
}

// worlds are inputs with every route kind, ListenerSets, BackendTLSPolicies
// and grants (Rich), the bench's shape (Snapshot), and the varied small
// input of TestDeterminism.
func worlds() map[string]*resource.Snapshot {
	return map[string]*resource.Snapshot{
		"rich-300":     workload.Rich(300),
		"workload-500": workload.Snapshot(500),
		"determinism":  snapshot(richObjects()...),
	}
}

// TestCompileAheadEqualsSerial: routes compiled in parallel give the
// serial translation, statuses and IR alike.
func TestCompileAheadEqualsSerial(t *testing.T) {
	opts := Options{ControllerName: workload.ControllerName}
	for name, snap := range worlds() {
		if name == "determinism" {
			opts = Options{ControllerName: testController}
		}
		serial := compileMode(false, func() *Result { return Translate(snap, opts) })
		parallel := compileMode(true, func() *Result { return Translate(snap, opts) })
		if len(serial.Gateways) == 0 {
			t.Fatalf("%s: nothing translated", name)
		}
		if !reflect.DeepEqual(serial.Gateways, parallel.Gateways) {
			t.Errorf("%s: the IR differs when routes are compiled ahead", name)
		}
		if !reflect.DeepEqual(statuses(serial.StatusSet), statuses(parallel.StatusSet)) {
			t.Errorf("%s: the statuses differ when routes are compiled ahead", name)
		}
	}
}

func statuses(s StatusSet) []*Status {
	var out []*Status
	for _, st := range s.All() {
		out = append(out, st)
	}
	return out
}

// readLog is a Recorder keeping every read in order.
type readLog []string

func (l *readLog) Read(owner, ref resource.Ref) { *l = append(*l, fmt.Sprint(owner, " read ", ref)) }

// TestCompileAheadRecordsTheSerialReads: the incremental engine's record
// of who read what is the same, read for read and in the same order,
// when routes are compiled ahead.
func TestCompileAheadRecordsTheSerialReads(t *testing.T) {
	opts := Options{ControllerName: workload.ControllerName}
	snap := workload.Rich(300)
	record := func() readLog {
		var log readLog
		TranslateScope(snap, opts, nil, nil, &log)
		return log
	}
	serial := compileMode(false, record)
	parallel := compileMode(true, record)
	if len(serial) == 0 {
		t.Fatal("no reads recorded")
	}
	if len(serial) != len(parallel) {
		t.Fatalf("%d reads recorded serially, %d with routes compiled ahead", len(serial), len(parallel))
	}
	for i := range serial {
		if serial[i] != parallel[i] {
			t.Fatalf("read %d: %s serially, %s with routes compiled ahead", i, serial[i], parallel[i])
		}
	}
}

// TestParallelBuildEqualsSerial: Gateways assembled in parallel give the
// serial IR and statuses, with routes compiled either way.
func TestParallelBuildEqualsSerial(t *testing.T) {
	for name, snap := range worlds() {
		opts := Options{ControllerName: workload.ControllerName}
		if name == "determinism" {
			opts = Options{ControllerName: testController}
		}
		for _, compile := range []bool{false, true} {
			serial := parallelMode(compile, false, func() *Result { return Translate(snap, opts) })
			parallel := parallelMode(compile, true, func() *Result { return Translate(snap, opts) })
			if len(serial.Gateways) < 2 && name != "determinism" {
				t.Fatalf("%s: %d Gateways translated, want several", name, len(serial.Gateways))
			}
			if !reflect.DeepEqual(serial.Gateways, parallel.Gateways) {
				t.Errorf("%s (compiled ahead: %v): the IR differs when Gateways are assembled in parallel", name, compile)
			}
			if !reflect.DeepEqual(statuses(serial.StatusSet), statuses(parallel.StatusSet)) {
				t.Errorf("%s (compiled ahead: %v): the statuses differ when Gateways are assembled in parallel", name, compile)
			}
		}
	}
}

// A panic assembling one Gateway is raised on the translation's
// goroutine, not lost on a worker's.
func TestParallelBuildRaisesPanics(t *testing.T) {
	tr := newTranslator(workload.Snapshot(500), Options{ControllerName: workload.ControllerName}, nil, newOneTranslation())
	tr.run()
	tr.cache = panickingCache{tr.cache}
	defer func() {
		if recover() == nil {
			t.Fatal("the worker's panic was not raised")
		}
	}()
	parallelMode(false, true, func() []*ir.Gateway { return tr.buildIR() })
}

// panickingCache panics when asked for an assembly.
type panickingCache struct{ Cache }

func (panickingCache) Assembly(resource.Key) *Assembly { panic("assembly") }
