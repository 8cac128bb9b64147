package conformance

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/gateway-api/conformance/tests"
	"sigs.k8s.io/gateway-api/pkg/features"

	"github.com/portico-dev/portico/internal/gatewayapi"

	"github.com/portico-dev/portico/internal/testenv"
)

// trafficImports are the packages through which a conformance test sends
// requests to a Gateway (or, for mesh tests, between pods): using any of
// them makes a test need a data plane.
var trafficImports = map[string]bool{
	"sigs.k8s.io/gateway-api/conformance/utils/http":         true,
	"sigs.k8s.io/gateway-api/conformance/utils/grpc":         true,
	"sigs.k8s.io/gateway-api/conformance/utils/roundtripper": true,
	"sigs.k8s.io/gateway-api/conformance/utils/tls":          true,
	"sigs.k8s.io/gateway-api/conformance/utils/tcp":          true,
	"sigs.k8s.io/gateway-api/conformance/utils/udp":          true,
	"sigs.k8s.io/gateway-api/conformance/utils/websocket":    true,
	"sigs.k8s.io/gateway-api/conformance/utils/weight":       true,
	"sigs.k8s.io/gateway-api/conformance/utils/echo":         true,
	"github.com/miekg/dns":                                   true,
	"google.golang.org/grpc":                                 true,
	"net":                                                    true,
	"net/http":                                               true,
	"crypto/tls":                                             true,
}

// trafficFields are the suite's clients for requests to a Gateway.
var trafficFields = map[string]bool{"RoundTripper": true, "GRPCClient": true, "WebSocketDialer": true}

// decl is a package-level declaration of the conformance tests' source,
// with the import names of its file.
type decl struct {
	node    ast.Node
	imports map[string]string // local name → import path
}

// sourceClassifier tells, from the source of the conformance module's
// tests, whether a test sends traffic: its Test function, or any
// package-level function or variable it refers to (transitively), uses a
// traffic package or one of the suite's request clients.
type sourceClassifier struct {
	decls   map[string]map[string]decl // package dir → name → decl
	memo    map[string]bool
	visit   map[string]bool
	byShort map[string]testSource
}

// testSource is where a ConformanceTest's Test function is.
type testSource struct {
	dir  string // package directory
	expr ast.Expr
	imp  map[string]string
}

// conformanceVersion is the pinned conformance module's version.
func conformanceVersion() string {
	out, err := testenv.GoCommand(context.Background(), "list", "-m", "-f", "{{.Version}}", "sigs.k8s.io/gateway-api/conformance").Output()
	if err != nil {
		return "(unknown version)"
	}
	return strings.TrimSpace(string(out))
}

// conformanceModuleDir is where the pinned conformance module's source is.
func conformanceModuleDir() (string, error) {
	cmd := testenv.GoCommand(context.Background(), "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api/conformance")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list sigs.k8s.io/gateway-api/conformance: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func newSourceClassifier(moduleDir string) (*sourceClassifier, error) {
	c := &sourceClassifier{
		decls:   map[string]map[string]decl{},
		memo:    map[string]bool{},
		visit:   map[string]bool{},
		byShort: map[string]testSource{},
	}
	for _, dir := range []string{"tests", filepath.Join("tests", "mesh")} {
		if err := c.parseDir(filepath.Join(moduleDir, dir)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *sourceClassifier) parseDir(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return err
	}
	fset := token.NewFileSet()
	decls := map[string]decl{}
	c.decls[dir] = decls
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0) // with object resolution: locals are told apart from package declarations
		if err != nil {
			return err
		}
		imp := map[string]string{}
		for _, is := range f.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			local := filepath.Base(p)
			if is.Name != nil {
				local = is.Name.Name
			}
			imp[local] = p
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					decls[d.Name.Name] = decl{node: d, imports: imp}
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if vs, ok := s.(*ast.ValueSpec); ok {
						for _, n := range vs.Names {
							decls[n.Name] = decl{node: vs, imports: imp}
						}
					}
				}
			}
		}
		// Every ConformanceTest literal: its ShortName and Test function.
		ast.Inspect(f, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			sel, ok := cl.Type.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "ConformanceTest" {
				return true
			}
			var short string
			var test ast.Expr
			for _, e := range cl.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				switch key := kv.Key.(*ast.Ident); {
				case key == nil:
				case key.Name == "ShortName":
					if lit, ok := kv.Value.(*ast.BasicLit); ok {
						short, _ = strconv.Unquote(lit.Value)
					}
				case key.Name == "Test":
					test = kv.Value
				}
			}
			if short != "" && test != nil {
				c.byShort[short] = testSource{dir, test, imp}
			}
			return true
		})
	}
	return nil
}

// sendsTraffic reports whether the test named short sends traffic; ok is
// false when its source was not found.
func (c *sourceClassifier) sendsTraffic(short string) (traffic, ok bool) {
	t, ok := c.byShort[short]
	if !ok {
		return false, false
	}
	return c.nodeTraffic(t.dir, t.expr, t.imp), true
}

func (c *sourceClassifier) nodeTraffic(dir string, n ast.Node, imp map[string]string) bool {
	found := false
	var walk func(n ast.Node) bool
	walk = func(n ast.Node) bool {
		if found || n == nil {
			return false
		}
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if trafficFields[n.Sel.Name] {
				found = true
			} else if id, ok := n.X.(*ast.Ident); ok && id.Obj == nil && trafficImports[imp[id.Name]] {
				found = true
			} else {
				ast.Inspect(n.X, walk) // n.Sel is a field or method name
			}
			return false
		case *ast.KeyValueExpr:
			if _, ok := n.Key.(*ast.Ident); !ok { // an ident key is a field name
				ast.Inspect(n.Key, walk)
			}
			ast.Inspect(n.Value, walk)
			return false
		case *ast.Ident:
			if c.isPackageDecl(dir, n) && c.declTraffic(dir, n.Name) {
				found = true
			}
		}
		return !found
	}
	ast.Inspect(n, walk)
	return found
}

// isPackageDecl tells whether id refers to a package-level declaration:
// resolved to it within its file, or unresolved (declared in another file
// of the package) and named like one. Local variables resolve to their
// own declarations and are not followed.
func (c *sourceClassifier) isPackageDecl(dir string, id *ast.Ident) bool {
	d, ok := c.decls[dir][id.Name]
	if !ok {
		return false
	}
	if id.Obj == nil {
		return true
	}
	return id.Obj.Decl == d.node
}

func (c *sourceClassifier) declTraffic(dir, name string) bool {
	key := dir + "." + name
	if v, ok := c.memo[key]; ok {
		return v
	}
	if c.visit[key] { // a cycle: decided by the other declarations
		return false
	}
	c.visit[key] = true
	d := c.decls[dir][name]
	v := c.nodeTraffic(dir, d.node, d.imports)
	c.memo[key] = v
	return v
}

// claimedFeatures is what the suite runs with: the features Portico
// publishes in GatewayClass status, plus the core features of the
// conformance profiles the run reports on (all of which Portico claims).
func claimedFeatures() sets.Set[features.FeatureName] {
	s := sets.New[features.FeatureName]()
	for _, f := range gatewayapi.SupportedFeatures() {
		s.Insert(features.FeatureName(f.Name))
	}
	return s
}

// TestSkipListMatchesSuiteSource checks the skip lists against the source
// of the pinned conformance suite: unrunnableTests may hold only tests
// that the claimed features enable and that send traffic, each with a
// reason (so no status-only test is ever skipped for the data plane), and
// knownFailures only claimed tests. It also prints how many status-only
// and traffic tests the suite has and how many the claims cover.
func TestSkipListMatchesSuiteSource(t *testing.T) {
	dir, err := conformanceModuleDir()
	if err != nil {
		t.Skipf("conformance module source unavailable: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tests")); err != nil {
		t.Skipf("conformance module source unavailable: %v", err)
	}
	cls, err := newSourceClassifier(dir)
	if err != nil {
		t.Fatal(err)
	}
	claimed := claimedFeatures()
	for _, f := range requiredFeatures {
		if !claimed.Has(f) {
			t.Errorf("feature %s is not claimed by gatewayapi.SupportedFeatures()", f)
		}
	}

	type info struct{ traffic, enabled bool }
	suite := map[string]info{}
	var statusOnly, statusOnlyClaimed, trafficClaimed []string
	for _, ct := range tests.ConformanceTests {
		traffic, ok := cls.sendsTraffic(ct.ShortName)
		if !ok {
			t.Errorf("no source found for conformance test %s", ct.ShortName)
			continue
		}
		enabled := claimed.HasAll(ct.Features...)
		suite[ct.ShortName] = info{traffic, enabled}
		switch {
		case !traffic:
			statusOnly = append(statusOnly, ct.ShortName)
			if enabled {
				statusOnlyClaimed = append(statusOnlyClaimed, ct.ShortName)
			}
		case enabled:
			trafficClaimed = append(trafficClaimed, ct.ShortName)
		}
	}
	seen := sets.New[string]()
	for _, u := range unrunnableTests {
		in, ok := suite[u.test]
		switch {
		case !ok:
			t.Errorf("unrunnableTests names %s, which the suite does not have", u.test)
		case !in.enabled:
			t.Errorf("%s is in unrunnableTests but needs unclaimed features (it never runs)", u.test)
		case !in.traffic:
			t.Errorf("%s is status-only but listed in unrunnableTests: it needs no data plane", u.test)
		}
		if strings.TrimSpace(u.reason) == "" {
			t.Errorf("%s is in unrunnableTests without a reason", u.test)
		}
		if seen.Has(u.test) {
			t.Errorf("unrunnableTests lists %s twice", u.test)
		}
		seen.Insert(u.test)
	}
	for _, k := range knownFailures {
		if in, ok := suite[k.test]; !ok || !in.enabled {
			t.Errorf("%s is in knownFailures but is not a claimed test", k.test)
		}
		if seen.Has(k.test) {
			t.Errorf("%s is in both unrunnableTests and knownFailures", k.test)
		}
	}
	sort.Strings(statusOnlyClaimed)
	sort.Strings(trafficClaimed)
	t.Logf("suite %s: %d tests, %d status-only; claimed features enable %d status-only tests and %d traffic tests (%d of them skipped as unrunnable)",
		conformanceVersion(), len(tests.ConformanceTests), len(statusOnly), len(statusOnlyClaimed), len(trafficClaimed), len(unrunnableTests))
	t.Logf("status-only tests run: %s", strings.Join(statusOnlyClaimed, ", "))
	t.Logf("traffic tests run: %s", strings.Join(sets.List(sets.New(trafficClaimed...).Difference(seen)), ", "))
	// Every Gateway-side feature is claimed: a test that does not run
	// needs a mesh feature.
	meshFeatures := sets.New[string]()
	for _, f := range append(features.MeshCoreFeatures.UnsortedList(), features.MeshExtendedFeatures.UnsortedList()...) {
		meshFeatures.Insert(string(f.Name))
	}
	var notRun []string
	for _, ct := range tests.ConformanceTests {
		if suite[ct.ShortName].enabled {
			continue
		}
		notRun = append(notRun, ct.ShortName)
		mesh := false
		for _, f := range ct.Features {
			mesh = mesh || meshFeatures.Has(string(f))
		}
		if !mesh {
			t.Errorf("%s does not run (features %v) and is no mesh test: a Gateway-side feature is not claimed", ct.ShortName, ct.Features)
		}
	}
	sort.Strings(notRun)
	t.Logf("not run (mesh): %d: %s", len(notRun), strings.Join(notRun, ", "))
	unclaimed := sets.New(statusOnly...).Difference(sets.New(statusOnlyClaimed...))
	t.Logf("status-only tests of unclaimed features: %s", strings.Join(sets.List(unclaimed), ", "))
}
