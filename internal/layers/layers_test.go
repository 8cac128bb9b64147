package layers

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/testenv"
)

const module = "github.com/portico-dev/portico"

// rule: pkg must not depend, directly or not, on any of forbidden (an
// import path or a prefix of paths: "a/b" forbids "a/b" and "a/b/...").
type rule struct {
	pkg       string
	forbidden []string
	why       string
}

var rules = []rule{
	{module + "/internal/gatewayapi", []string{module + "/internal/infra", "sigs.k8s.io/controller-runtime"},
		"the Gateway API semantics import no controller code (their proxy rules are internal/proxyspec)"},
	{module + "/internal/gatewayapi", []string{module + "/internal/incremental"},
		"the semantics know nothing of the incremental engine, which calls them"},
	{module + "/internal/incremental", []string{module + "/internal/infra", "sigs.k8s.io/controller-runtime", module + "/internal/xds"},
		"the engine is pure: it calls the semantics and merges their results"},
	{module + "/internal/proxyspec", []string{module + "/internal/infra", "sigs.k8s.io/controller-runtime", "k8s.io/client-go"},
		"the proxies' spec, names and checks are pure: the translator shares them"},
	{module + "/internal/pipeline", []string{module + "/internal/render"},
		"the pipeline hands out data; internal/admin renders the debug views"},
	{module + "/internal/ir", []string{module + "/"},
		"the IR imports nothing of Portico's"},
}

// graph is the import graph of pkg and its dependencies (no tests), from
// `go list -deps`.
func graph(t *testing.T, pkg string) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := testenv.GoCommand(ctx, "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr(err))
	}
	g := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			g[f[0]] = f[1:]
		}
	}
	if _, ok := g[pkg]; !ok {
		t.Fatalf("go list -deps %s does not list the package itself:\n%s", pkg, out)
	}
	return g
}

func stderr(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}

// violations are the forbidden packages pkg depends on, each with the
// import chain that leads to it (shortest first found), sorted.
func violations(g map[string][]string, pkg string, forbidden []string) []string {
	matches := func(p string) bool {
		for _, f := range forbidden {
			if p == f || strings.HasPrefix(p, strings.TrimSuffix(f, "/")+"/") {
				return true
			}
		}
		return false
	}
	// Breadth first from pkg: the first path to each package is a
	// shortest import chain.
	from := map[string]string{pkg: ""}
	queue := []string{pkg}
	var out []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range g[p] {
			if _, seen := from[q]; seen {
				continue
			}
			from[q] = p
			if matches(q) {
				chain := []string{q}
				for c := p; c != ""; c = from[c] {
					chain = append(chain, c)
				}
				slices.Reverse(chain)
				out = append(out, strings.Join(chain, " → "))
				continue // what q imports is q's problem, reported once
			}
			queue = append(queue, q)
		}
	}
	slices.Sort(out)
	return out
}

func TestLayers(t *testing.T) {
	for _, r := range rules {
		t.Run(strings.TrimPrefix(r.pkg, module+"/"), func(t *testing.T) {
			for _, v := range violations(graph(t, r.pkg), r.pkg, r.forbidden) {
				t.Errorf("%s: %s", r.why, v)
			}
		})
	}
}

// The check finds a dependency that exists, through the chain that
// leads to it, and only forbidden ones: it is not vacuously green.
func TestViolationsFindsKnownEdges(t *testing.T) {
	infra := module + "/internal/infra"
	got := violations(graph(t, infra), infra, []string{"sigs.k8s.io/controller-runtime/pkg/client"})
	if len(got) == 0 || !strings.HasPrefix(got[0], infra+" → sigs.k8s.io/controller-runtime/pkg/client") {
		t.Errorf("infra's dependency on controller-runtime's client not found: %q", got)
	}
	g := map[string][]string{"a": {"b", "c"}, "b": {"x/y"}, "c": {"b", "d", "x/yz"}, "x/y": {"x/y/z"}}
	if got := violations(g, "a", []string{"x/y"}); !slices.Equal(got, []string{"a → b → x/y"}) {
		t.Errorf("violations = %q, want the one chain a → b → x/y (not x/yz: a prefix matches whole path elements)", got)
	}
	if got := violations(g, "a", []string{"x"}); !slices.Equal(got, []string{"a → b → x/y", "a → c → x/yz"}) {
		t.Errorf("violations = %q, want a → b → x/y and a → c → x/yz", got)
	}
	if got := violations(g, "a", []string{"e"}); len(got) != 0 {
		t.Errorf("violations = %q, want none", got)
	}
	if got := violations(g, "a", []string{"d"}); !slices.Equal(got, []string{"a → c → d"}) {
		t.Errorf("violations = %q, want a → c → d", got)
	}
}
