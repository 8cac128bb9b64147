package gatewayapi

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// entryPoints are the functions that take a snapshot: each may only hand
// it on, to inputs.New or to another entry point (checked below).
var entryPoints = map[string]bool{
	"Translate": true, "TranslateScope": true, "Reattach": true, "PatchEndpoints": true, "newTranslator": true,
	"WithPolicyStatuses": true,
}

// TestSemanticsReadOnlyThroughInputs checks that no file of the package
// names resource.Snapshot (so none can read one without package inputs
// recording it), but for the entry points, whose snapshot parameter is
// only compared with nil or passed to inputs.New or another entry point.
func TestSemanticsReadOnlyThroughInputs(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, _ := d.(*ast.FuncDecl)
			if fn != nil && fn.Recv == nil && entryPoints[fn.Name.Name] {
				checkEntryPoint(t, fset, fn)
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

// checkEntryPoint fails unless every use of fn's snapshot parameter is a
// nil comparison or an argument of inputs.New or of an entry point.
func checkEntryPoint(t *testing.T, fset *token.FileSet, fn *ast.FuncDecl) {
	var snap string
	for _, f := range fn.Type.Params.List {
		if st, ok := f.Type.(*ast.StarExpr); ok {
			if sel, ok := st.X.(*ast.SelectorExpr); ok && sel.Sel.Name == "Snapshot" && len(f.Names) == 1 {
				snap = f.Names[0].Name
			}
		}
	}
	if snap == "" {
		t.Errorf("%s: entry point %s takes no snapshot", fset.Position(fn.Pos()), fn.Name.Name)
		return
	}
	allowed := map[*ast.Ident]bool{}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			callee := ""
			switch f := n.Fun.(type) {
			case *ast.Ident:
				callee = f.Name
			case *ast.SelectorExpr:
				if x, ok := f.X.(*ast.Ident); ok && x.Name == "inputs" && f.Sel.Name == "New" {
					callee = "inputs.New"
				}
			}
			if callee == "inputs.New" || entryPoints[callee] {
				for _, a := range n.Args {
					if id, ok := a.(*ast.Ident); ok && id.Name == snap {
						allowed[id] = true
					}
				}
			}
		case *ast.BinaryExpr:
			if id, ok := n.X.(*ast.Ident); ok && id.Name == snap {
				if y, ok := n.Y.(*ast.Ident); ok && y.Name == "nil" {
					allowed[id] = true
				}
			}
		}
		return true
	})
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && id.Name == snap && !allowed[id] {
			t.Errorf("%s: %s uses its snapshot other than by handing it to inputs.New", fset.Position(id.Pos()), fn.Name.Name)
		}
		return true
	})
}
