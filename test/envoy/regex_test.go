package envoy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/re2"
)

// boundaryRegexes are, for atoms RE2 compiles differently (ASCII class,
// negated class, any character, case folding, a Unicode class, a
// literal), the longest repetition whose size bound re2.ProgramSize
// accepts: the expressions Portico lets through that come closest to the
// limit it gives Envoy.
func boundaryRegexes(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, atom := range []string{`[a-z]`, `[^/]`, `.`, `(?i:k)`, `\p{Greek}`, `(?:ab)`} {
		best := ""
		for n := 1; n <= 1000; n++ {
			expr := fmt.Sprintf("/%s{%d}", atom, n)
			if re2.Check(expr) != nil {
				break
			}
			best = expr
		}
		if best == "" {
			t.Fatalf("no repetition of %s is accepted", atom)
		}
		out = append(out, best)
	}
	return out
}

// TestRegexProgramSize: every regular expression Portico accepts, up to
// the RE2 program-size bound it enforces, is accepted by a real Envoy
// booted from Portico's bootstrap (which raises Envoy's limit to
// re2.MaxProgramSize): no NACK, and the routes are served. This is the
// check of re2.ProgramSize's upper bound against RE2 itself.
func TestRegexProgramSize(t *testing.T) {
	s := startStack(t, nil, quickstartBackends...)
	c := s.client(nil)
	exprs := boundaryRegexes(t)
	var b strings.Builder
	b.WriteString(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: boundary, namespace: default}
spec:
  parentRefs: [{name: quickstart, sectionName: http}]
  hostnames: [boundary.example.com]
  rules:
`)
	for _, e := range exprs {
		fmt.Fprintf(&b, "  - matches:\n    - path: {type: RegularExpression, value: %q}\n    backendRefs: [{name: app-v1, port: 80}]\n", e)
	}
	b.WriteString("  - backendRefs: [{name: app-v2, port: 80}]\n")
	s.write("boundary.yaml", b.String())
	// The catch-all rule shows the route table with every expression was
	// applied; a NACK would leave the host unknown (404).
	s.routed(c, "http://127.0.0.1:8080/none", "boundary.example.com", "app-v2")
	const nacks = `portico_xds_nacks_total{gateway="default/quickstart",type_url="type.googleapis.com/envoy.config.route.v3.RouteConfiguration"}`
	if n := s.metric(nacks); n != 0 {
		t.Fatalf("Envoy refused a route table whose expressions Portico accepted (%v NACKs): %v", n, exprs)
	}
	// And a path one of them matches is routed by it.
	s.routed(c, "http://127.0.0.1:8080/"+strings.Repeat("ab", countOf(exprs[len(exprs)-1])), "boundary.example.com", "app-v1")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, body, err := s.envoy.Admin(ctx, "/runtime"); err != nil || !strings.Contains(body, "re2.max_program_size.error_level") {
		t.Errorf("Envoy's runtime does not show Portico's RE2 limit: %v %s", err, truncate(body, 300))
	}
}

// countOf is n of an expression "/(?:ab){n}".
func countOf(expr string) int {
	var n int
	fmt.Sscanf(expr[strings.LastIndexByte(expr, '{')+1:], "%d", &n)
	return n
}
