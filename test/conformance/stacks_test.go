package conformance

import (
	"bytes"
	"runtime/pprof"
	"strings"
	"testing"
)

// logStacks logs the stacks of this process's goroutines that run
// Portico's code (a frame of internal/ or cmd/), for a replica that did
// not stop in time: the one left running is the one to fix.
func logStacks(t *testing.T) {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 2); err != nil {
		t.Logf("goroutine stacks: %v", err)
		return
	}
	shown := 0
	for _, g := range strings.Split(buf.String(), "\n\n") {
		if !strings.Contains(g, "portico-dev/portico/internal/") && !strings.Contains(g, "portico-dev/portico/cmd/") {
			continue
		}
		if shown == 200 {
			t.Logf("(more goroutines not shown)")
			return
		}
		shown++
		t.Logf("goroutine stack:\n%s", g)
	}
}
