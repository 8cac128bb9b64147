package layers

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/testenv"
)

const module = "github.com/portico-dev/portico"

// rule: the packages pkgs must not depend, directly or not, on any of
// forbidden. A package or a forbidden path is an import path or a prefix
// of paths: in pkgs, "a/b/..." is a/b and every package under it, as for
// the go command; in forbidden, "a/b" forbids "a/b" and "a/b/...".
type rule struct {
	pkgs      []string
	forbidden []string
	why       string
	// except are patterns (as in pkgs) of packages the rule leaves out.
	except []string
}

// kubeClients are the Kubernetes client libraries.
var kubeClients = []string{"k8s.io/client-go", "sigs.k8s.io/controller-runtime"}

var rules = []rule{
	{[]string{module + "/internal/gatewayapi"}, []string{module + "/internal/infra", "sigs.k8s.io/controller-runtime"},
		"the Gateway API semantics import no controller code (their proxy rules are internal/proxyspec)", nil},
	{[]string{module + "/internal/gatewayapi"}, []string{module + "/internal/incremental"},
		"the semantics know nothing of the incremental engine, which calls them", nil},
	{[]string{module + "/internal/incremental"}, []string{module + "/internal/infra", "sigs.k8s.io/controller-runtime", module + "/internal/xds"},
		"the engine is pure: it calls the semantics and merges their results", nil},
	{[]string{module + "/internal/proxyspec"}, []string{module + "/internal/infra", "sigs.k8s.io/controller-runtime", "k8s.io/client-go"},
		"the proxies' spec, names and checks are pure: the translator shares them", nil},
	{[]string{module + "/internal/pki", module + "/internal/xds/...", module + "/internal/gatewayapi/..."}, kubeClients,
		"the certificates, the xDS server and the semantics need no Kubernetes client (internal/pki/certstore keeps the certificates in Secrets)", nil},
	{[]string{module + "/internal/pipeline"}, []string{module + "/internal/render"},
		"the pipeline hands out data; internal/admin renders the debug views", nil},
	{[]string{module + "/internal/ir"}, []string{module + "/"},
		"the IR imports nothing of Portico's", nil},
	{[]string{module + "/cmd/...", module + "/internal/..."}, []string{module + "/internal/testenv"},
		"test support (internal/testenv: the workload generator, the test clusters) stays out of the product",
		[]string{module + "/internal/testenv/...", module + "/internal/layers"}},
}

// listed is the import graph (no tests) of every package of the module
// under internal/, cmd/ and api/ and of all they depend on, from one
// `go list -deps`: each package's direct imports. The tests share it.
var listed struct {
	once sync.Once
	g    map[string][]string
	err  error
}

// graph returns listed's graph, running go list the first time.
func graph(t *testing.T) map[string][]string {
	t.Helper()
	listed.once.Do(func() {
		listed.g, listed.err = goListDeps(module+"/internal/...", module+"/cmd/...", module+"/api/...")
	})
	if listed.err != nil {
		t.Fatal(listed.err)
	}
	return listed.g
}

func goListDeps(patterns ...string) (map[string][]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := append([]string{"list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`}, patterns...)
	out, err := testenv.GoCommand(ctx, args...).Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, stderr(err))
	}
	g := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			g[f[0]] = f[1:]
		}
	}
	if _, ok := g[module+"/internal/layers"]; !ok {
		return nil, fmt.Errorf("go %s does not list this package:\n%s", strings.Join(args, " "), out)
	}
	return g, nil
}

// matching are the packages of g that pattern names ("a/b" or "a/b/..."),
// sorted.
func matching(g map[string][]string, pattern string) []string {
	var out []string
	base, tree := strings.CutSuffix(pattern, "/...")
	for p := range g {
		if p == base || tree && strings.HasPrefix(p, base+"/") {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
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
	g := graph(t)
	for _, r := range rules {
		var names []string
		for _, p := range r.pkgs {
			names = append(names, strings.TrimPrefix(p, module+"/internal/"))
		}
		t.Run(strings.Join(names, "+"), func(t *testing.T) {
			for _, pattern := range r.pkgs {
				pkgs := matching(g, pattern)
				if len(pkgs) == 0 {
					t.Errorf("no package is %s: a rule about nothing (was it moved?)", pattern)
				}
				for _, pkg := range pkgs {
					if slices.ContainsFunc(r.except, func(e string) bool { return slices.Contains(matching(g, e), pkg) }) {
						continue
					}
					for _, v := range violations(g, pkg, r.forbidden) {
						t.Errorf("%s: %s", r.why, v)
					}
				}
			}
		})
	}
}

// The check finds a dependency that exists, through the chain that
// leads to it, and only forbidden ones: it is not vacuously green.
func TestViolationsFindsKnownEdges(t *testing.T) {
	infra := module + "/internal/infra"
	got := violations(graph(t), infra, []string{"sigs.k8s.io/controller-runtime/pkg/client"})
	if len(got) == 0 || !strings.HasPrefix(got[0], infra+" → sigs.k8s.io/controller-runtime/pkg/client") {
		t.Errorf("infra's dependency on controller-runtime's client not found: %q", got)
	}
	if got := violations(graph(t), infra, kubeClients); len(got) == 0 {
		t.Errorf("infra's dependency on the Kubernetes clients not found by the rule's prefixes")
	}
	g := map[string][]string{"a": {"b", "c"}, "b": {"x/y"}, "c": {"b", "d", "x/yz"}, "x/y": {"x/y/z"}, "x/y/z": nil, "x/yz": nil}
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
	if got := matching(g, "x/y/..."); !slices.Equal(got, []string{"x/y", "x/y/z"}) {
		t.Errorf("matching x/y/... = %q, want x/y and x/y/z (not x/yz)", got)
	}
	if got := matching(g, "x/y"); !slices.Equal(got, []string{"x/y"}) {
		t.Errorf("matching x/y = %q, want x/y alone", got)
	}
}
