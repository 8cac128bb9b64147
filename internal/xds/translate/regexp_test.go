package translate

import (
	"regexp"
	"strings"
	"testing"
)

// regexpReplace applies an Envoy regex rewrite with Go's RE2-compatible
// engine: RE2 rewrite strings use \N for groups and \\ for a backslash.
func regexpReplace(t *testing.T, pattern, substitution, path string) string {
	t.Helper()
	re, err := regexp.Compile(pattern)
	if err != nil {
		t.Fatalf("pattern %q: %v", pattern, err)
	}
	if strings.ContainsAny(substitution, `\$`) {
		t.Fatalf("test helper does not handle %q", substitution)
	}
	return re.ReplaceAllLiteralString(path, substitution)
}
