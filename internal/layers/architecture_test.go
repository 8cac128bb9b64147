package layers

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// architectureDoc is the map of the packages that TestArchitectureTable
// holds to the import graph.
const architectureDoc = "docs/architecture.md"

// tableHeader starts the package table of architectureDoc.
const tableHeader = "| package | owns | imports (of ours) |"

// mapped reports whether a package of the module must have a row of the
// table: those under internal/, cmd/ and api/ (path relative to the module).
func mapped(rel string) bool {
	for _, dir := range []string{"internal/", "cmd/", "api/"} {
		if strings.HasPrefix(rel, dir) {
			return true
		}
	}
	return false
}

// shortName is how the imports column names a package of the module:
// relative to internal/ for the packages under it ("xds/translate"),
// relative to the module otherwise ("api/v1alpha1").
func shortName(rel string) string {
	if s, ok := strings.CutPrefix(rel, "internal/"); ok {
		return s
	}
	return rel
}

// cells splits a table row into its trimmed cells; "\|" does not split.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	var out []string
	start := 0
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\':
			i++
		case line[i] == '|':
			out = append(out, strings.TrimSpace(line[start:i]))
			start = i + 1
		}
	}
	return append(out, strings.TrimSpace(line[start:]))
}

// row renders a row of the table.
func row(pkg, owns string, imports []string) string {
	list := "—"
	if len(imports) > 0 {
		list = strings.Join(imports, ", ")
	}
	return fmt.Sprintf("| `%s` | %s | %s |", pkg, owns, list)
}

// checkTable compares the package table of doc (architectureDoc's text)
// with the import graph g (import path → direct imports) and returns what
// is wrong, one problem per row, each with the row as it should be.
func checkTable(doc string, g map[string][]string) []string {
	lines := strings.Split(doc, "\n")
	at := slices.IndexFunc(lines, func(l string) bool { return strings.TrimSpace(l) == tableHeader })
	if at < 0 || at+1 >= len(lines) || !strings.HasPrefix(strings.TrimSpace(lines[at+1]), "|---") {
		return []string{fmt.Sprintf("%s: no table that starts %q and its |---| line", architectureDoc, tableHeader)}
	}

	// want: each package of ours to map → its direct imports of ours.
	want := map[string][]string{}
	for p, imports := range g {
		rel, ok := strings.CutPrefix(p, module+"/")
		if !ok || !mapped(rel) {
			continue
		}
		names := []string{}
		for _, q := range imports {
			if r, ok := strings.CutPrefix(q, module+"/"); ok {
				names = append(names, shortName(r))
			}
		}
		slices.Sort(names)
		want[rel] = names
	}

	var problems []string
	seen := map[string]int{} // package → line of its row
	for i := at + 2; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|"); i++ {
		where := fmt.Sprintf("%s:%d", architectureDoc, i+1)
		c := cells(lines[i])
		if len(c) != 3 {
			problems = append(problems, fmt.Sprintf("%s: %d cells, want 3 (package | owns | imports (of ours)): %s", where, len(c), lines[i]))
			continue
		}
		pkg := strings.TrimSuffix(strings.TrimPrefix(c[0], "`"), "`")
		if c[0] != "`"+pkg+"`" || pkg == "" || strings.ContainsAny(pkg, "` ,{}") {
			problems = append(problems, fmt.Sprintf("%s: the package cell must be one package's path in backquotes (one row per package), not %s", where, c[0]))
			continue
		}
		if first, dup := seen[pkg]; dup {
			problems = append(problems, fmt.Sprintf("%s: a second row for %s (the first is line %d): remove one", where, pkg, first))
			continue
		}
		seen[pkg] = i + 1
		imports, ok := want[pkg]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: %s is not a package of the module under internal/, cmd/ or api/ (go list has no %s/%s): remove the row", where, pkg, module, pkg))
			continue
		}
		var have []string
		if c[2] != "—" {
			for _, name := range strings.Split(c[2], ",") {
				have = append(have, strings.TrimSpace(name))
			}
		}
		sorted := slices.Clone(have)
		slices.Sort(sorted)
		if slices.Equal(sorted, imports) {
			continue
		}
		var missing, extra []string
		for _, q := range imports {
			if !slices.Contains(have, q) {
				missing = append(missing, q)
			}
		}
		for j, q := range have {
			if !slices.Contains(imports, q) || slices.Index(have, q) < j {
				extra = append(extra, q)
			}
		}
		problems = append(problems, fmt.Sprintf("%s: %s imports %s; the row lists %s (missing: %s; not imported or repeated: %s). The row should be:\n%s",
			where, pkg, orNone(imports), orNone(have), orNone(missing), orNone(extra), row(pkg, c[1], imports)))
	}

	var unmapped []string
	for p := range want {
		if _, ok := seen[p]; !ok {
			unmapped = append(unmapped, p)
		}
	}
	slices.Sort(unmapped)
	for _, p := range unmapped {
		problems = append(problems, fmt.Sprintf("%s: no row for %s; add one (and say what it owns):\n%s", architectureDoc, p, row(p, "…", want[p])))
	}
	return problems
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// The package table of docs/architecture.md is the import graph: a row for
// every package under internal/, cmd/ and api/, and in each row exactly
// the package's direct imports of the module's packages (not its tests').
func TestArchitectureTable(t *testing.T) {
	doc, err := os.ReadFile("../../" + architectureDoc)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range checkTable(string(doc), graph(t)) {
		t.Error(p)
	}
}

// checkTable finds each kind of mistake and suggests the right rows.
func TestCheckTableFinds(t *testing.T) {
	m := module + "/"
	g := map[string][]string{
		m + "internal/a":    {"fmt", m + "internal/b/c", m + "api/v1"},
		m + "internal/b/c":  nil,
		m + "api/v1":        {"k8s.io/apimachinery/pkg/runtime"},
		m + "cmd/tool":      {m + "internal/a"},
		m + "test/e2e":      {m + "internal/a"}, // not mapped
		"example.com/other": {m + "internal/a"},
	}
	doc := func(rows ...string) string {
		return "# Title\n\n" + tableHeader + "\n|---|---|---|\n" + strings.Join(rows, "\n") + "\n\nText.\n"
	}
	right := []string{
		"| `internal/a` | the a \\| b things | api/v1, b/c |",
		"| `internal/b/c` | c | — |",
		"| `api/v1` | types | — |",
		"| `cmd/tool` | the command | a |",
	}
	if got := checkTable(doc(right...), g); len(got) != 0 {
		t.Errorf("a true table: problems %q", got)
	}
	reordered := slices.Clone(right)
	reordered[0] = "| `internal/a` | the a \\| b things | b/c, api/v1 |"
	if got := checkTable(doc(reordered...), g); len(got) != 0 {
		t.Errorf("imports in another order: problems %q", got)
	}

	for _, c := range []struct {
		name string
		rows []string
		want []string // substrings of the one problem
	}{
		{"an import the row lacks", []string{right[0], right[1], right[2], "| `cmd/tool` | the command | — |"},
			[]string{":8: cmd/tool imports a; the row lists none (missing: a;", "\n| `cmd/tool` | the command | a |"}},
		{"an import the package lacks", []string{"| `internal/a` | the a \\| b things | api/v1, b/c, cmd/tool |", right[1], right[2], right[3]},
			[]string{":5: internal/a imports api/v1, b/c;", "not imported or repeated: cmd/tool)", "\n| `internal/a` | the a \\| b things | api/v1, b/c |"}},
		{"a repeated import", []string{right[0], right[1], right[2], "| `cmd/tool` | the command | a, a |"},
			[]string{"not imported or repeated: a)", "\n| `cmd/tool` | the command | a |"}},
		{"a package without a row", right[:3],
			[]string{"no row for cmd/tool; add one", "\n| `cmd/tool` | … | a |"}},
		{"a row of no package", append(slices.Clone(right), "| `internal/gone` | nothing | — |"),
			[]string{":9: internal/gone is not a package", "remove the row"}},
		{"a row of a package outside the map", append(slices.Clone(right), "| `test/e2e` | tests | a |"),
			[]string{":9: test/e2e is not a package of the module under internal/, cmd/ or api/"}},
		{"two rows for a package", append(slices.Clone(right), right[1]),
			[]string{":9: a second row for internal/b/c (the first is line 6)"}},
		{"a grouped row", append(slices.Clone(right[:1]), "| `internal/b/{c,d}` | c | — |", right[2], right[3]),
			[]string{":6: the package cell must be one package's path", "no row for internal/b/c"}},
		{"a row of two cells", append(slices.Clone(right), "| `internal/x` | — |"),
			[]string{":9: 2 cells, want 3"}},
	} {
		got := strings.Join(checkTable(doc(c.rows...), g), "\n")
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: problems\n%s\nwant %q in them", c.name, got, w)
			}
		}
	}
	if got := checkTable("no table here", g); len(got) != 1 || !strings.Contains(got[0], "no table") {
		t.Errorf("a document without the table: problems %q", got)
	}
}
