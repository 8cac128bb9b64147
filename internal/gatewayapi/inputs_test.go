package gatewayapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// engineFiles are the incremental engine's files, which may read the raw
// snapshot (see the package doc).
var engineFiles = map[string]bool{
	"incremental.go": true, "fastpath.go": true, "index.go": true, "deps.go": true, "statusset.go": true,
}

// TestSemanticsReadOnlyThroughInputs checks that no semantic file names
// resource.Snapshot (so none can read one without package inputs
// recording it), but for the constructors of translate.go, which hand the
// snapshot to inputs.New.
func TestSemanticsReadOnlyThroughInputs(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || engineFiles[name] {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, _ := d.(*ast.FuncDecl)
			if name == "translate.go" && fn != nil && (fn.Name.Name == "Translate" || fn.Name.Name == "newTranslator") {
				continue
			}
			ast.Inspect(d, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "resource" && sel.Sel.Name == "Snapshot" {
					t.Errorf("%s: semantic code names resource.Snapshot; read through package inputs", fset.Position(sel.Pos()))
				}
				return true
			})
		}
	}
}
