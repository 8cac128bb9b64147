package gatewayapi

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
)

// The audit of docs/conformance.md ("Every field of the standard channel")
// is made from testdata/crd-fields.yaml, so the document says what the
// code does: TestCRDFieldsDoc fails when the block between the markers
// differs from what the file gives, and -update rewrites it.

var updateDoc = flag.Bool("update", false, "rewrite the crd-fields block of docs/conformance.md from testdata/crd-fields.yaml")

const (
	conformanceDoc = "../../docs/conformance.md"
	docBegin       = "<!-- crd-fields:begin (made by internal/gatewayapi TestCRDFieldsDoc -update; do not edit) -->"
	docEnd         = "<!-- crd-fields:end -->"
)

// fieldsDoc renders the audit: per kind the number of spec fields of each
// disposition, then every field that is not translated (rejected with the
// condition it gets, ignored with why, silently dropped); the subfields of
// a field listed are on its line when they say the same.
func fieldsDoc(entries map[string]string) string {
	disps := []string{dispHandled, dispRejected, dispIgnored, dispUnsupportedKind, dispTodoDropped}
	counts := map[string]map[string]int{}
	var kinds []string
	keys := sortedEntryKeys(entries)
	for _, k := range keys {
		kind, _, _ := strings.Cut(k, ".")
		if counts[kind] == nil {
			counts[kind] = map[string]int{}
			kinds = append(kinds, kind)
		}
		d, _, _ := strings.Cut(entries[k], ":")
		counts[kind][d]++
	}
	sort.Strings(kinds)
	var b strings.Builder
	b.WriteString("| Kind | handled | rejected | ignored | unsupported kind | silently dropped |\n|---|---|---|---|---|---|\n")
	total := map[string]int{}
	for _, kind := range kinds {
		fmt.Fprintf(&b, "| %s |", kind)
		for _, d := range disps {
			fmt.Fprintf(&b, " %d |", counts[kind][d])
			total[d] += counts[kind][d]
		}
		b.WriteString("\n")
	}
	b.WriteString("| **all** |")
	for _, d := range disps {
		fmt.Fprintf(&b, " **%d** |", total[d])
	}
	b.WriteString("\n\nFields not translated, and what Portico does with them (a field's\nsubfields share its line):\n\n")
	var covered []string
	for _, k := range keys {
		d, detail, _ := strings.Cut(entries[k], ": ")
		if d == dispHandled || coveredBy(covered, entries, k) {
			continue
		}
		covered = append(covered, k)
		detail = strings.ReplaceAll(detail, "|", "/")
		switch d {
		case dispRejected:
			reason, how, _ := strings.Cut(detail, "; ")
			fmt.Fprintf(&b, "- `%s`: rejected, `%s` (%s)\n", k, reason, how)
		default:
			fmt.Fprintf(&b, "- `%s`: %s, %s\n", k, d, detail)
		}
	}
	return b.String()
}

// coveredBy reports whether field k is below one of the fields listed
// with the same disposition and detail (its line says it).
func coveredBy(listed []string, entries map[string]string, k string) bool {
	for _, p := range listed {
		if strings.HasPrefix(k, p+".") || strings.HasPrefix(k, p+"[]") || strings.HasPrefix(k, p+"{}") {
			return entries[p] == entries[k] || strings.Contains(entries[k], "refused with")
		}
	}
	return false
}

func TestCRDFieldsDoc(t *testing.T) {
	data, err := os.ReadFile(conformanceDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i, j := strings.Index(doc, docBegin), strings.Index(doc, docEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no block %q … %q", conformanceDoc, docBegin, docEnd)
	}
	want := fieldsDoc(loadFieldEntries(t, fieldsFile))
	got := doc[i+len(docBegin)+1 : j]
	if got == want {
		return
	}
	if *updateDoc {
		if err := os.WriteFile(conformanceDoc, []byte(doc[:i+len(docBegin)+1]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the crd-fields block of %s is stale: run go test ./internal/gatewayapi -run TestCRDFieldsDoc -update", conformanceDoc)
}
