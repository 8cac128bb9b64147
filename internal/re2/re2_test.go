package re2

import (
	"strings"
	"testing"
)

func TestProgramSize(t *testing.T) {
	for _, tc := range []struct {
		expr string
		ok   bool
	}{
		{`^/api/v[0-9]+/users/[a-z0-9-]+$`, true},
		{`.*`, true},
		{`(?i)/[a-z]{1,20}/static`, true},
		{`[[:alpha:]_-]+`, true},
		// Unicode classes are bounded very conservatively: RE2 shares
		// byte-range suffixes that the bound counts for each range.
		{`\p{L}+`, false},
		{`/[a-z]{1000}`, false}, // accepted by Envoy's syntax check, over its size limit
		{`(a{10}){10}`, true},
		{`(ab{30}){30}`, false}, // nested repetition
		{`\p{L}{50}`, false},    // a Unicode class costs much more than an ASCII one
		{strings.Repeat("a", 2000), false},
	} {
		n, err := ProgramSize(tc.expr)
		if err != nil {
			t.Fatalf("%q: %v", tc.expr, err)
		}
		if got := Check(tc.expr) == nil; got != tc.ok {
			t.Errorf("Check(%q) accepted = %v (size bound %d), want %v", tc.expr, got, n, tc.ok)
		}
	}
	if _, err := ProgramSize(`(`); err == nil {
		t.Error("an invalid expression has a size")
	}
	// The bound grows with what RE2 must emit.
	small, _ := ProgramSize(`[a-z]`)
	wide, _ := ProgramSize(`\p{L}`)
	if wide <= small {
		t.Errorf("\\p{L} (%d) is not costlier than [a-z] (%d)", wide, small)
	}
	if _, err := ProgramSize(`(a{100}){100}`); err == nil {
		t.Error("a repetition of more than 1000 in all is parsed (RE2 refuses it too)")
	}
}

func FuzzProgramSize(f *testing.F) {
	for _, s := range []string{`a`, `[a-z]+`, `(?i)\p{Greek}{3,}`, `x{2,5}y*`, `(a|b|c){0,9}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		n, err := ProgramSize(expr)
		if err == nil && (n < baseCost || n > saturate+baseCost) {
			t.Fatalf("%q: size bound %d out of range", expr, n)
		}
	})
}
