package envoy

import (
	"fmt"
	"testing"
	"time"
)

// backendFiltersRoute splits /split between app-v1 and app-v2 (equal
// weights): each backendRef has its own request header and URL rewrite
// (app-v2 also its own hostname), the rule a hostname rewrite of its own.
const backendFiltersRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: backend-filters, namespace: default}
spec:
  parentRefs: [{name: quickstart}]
  hostnames: [filters.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /split}}]
    filters:
    - type: URLRewrite
      urlRewrite: {hostname: rule.example}
    backendRefs:
    - name: app-v1
      port: 80
      filters:
      - type: RequestHeaderModifier
        requestHeaderModifier: {set: [{name: X-Variant, value: v1}]}
      - type: URLRewrite
        urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /one}}
    - name: app-v2
      port: 80
      filters:
      - type: RequestHeaderModifier
        requestHeaderModifier: {set: [{name: X-Variant, value: v2}]}
      - type: URLRewrite
        urlRewrite:
          hostname: two.internal
          path: {type: ReplaceFullPath, replaceFullPath: /two}
`

// TestBackendFilters: through Envoy, a backendRef's filters apply to the
// requests its backend gets and to no other (HTTPRouteBackendRequestHeader
// Modification, HTTPRouteBackendURLRewrite): every request that reaches
// app-v1 carries X-Variant v1 and the path /one/..., with the rule's Host;
// every one that reaches app-v2 carries v2, the path /two and its own Host;
// both backends get requests.
func TestBackendFilters(t *testing.T) {
	s := startStack(t, map[string]string{"backend-filters.yaml": backendFiltersRoute}, quickstartBackends...)
	c := s.client(nil)
	want := map[string]struct{ variant, path, host string }{
		"app-v1": {"v1", "/one/x", "rule.example"},
		"app-v2": {"v2", "/two", "two.internal"},
	}
	s.eventually(15*time.Second, "the split route is served", func() error {
		r, err := s.get(c, "http://127.0.0.1:8080/split/x", "filters.example.com")
		if err != nil {
			return err
		}
		if r.echo == nil {
			return fmt.Errorf("status %d, no backend", r.code)
		}
		return nil
	})
	seen := map[string]int{}
	// Each backend has half of the requests: with 200, both get some
	// unless something is wrong (the chance of one getting none is 2^-199).
	for i := range 200 {
		r, err := s.get(c, "http://127.0.0.1:8080/split/x", "filters.example.com")
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if r.echo == nil {
			t.Fatalf("request %d: status %d without a backend", i, r.code)
		}
		w, ok := want[r.echo.Pod]
		if !ok {
			t.Fatalf("request %d reached %q", i, r.echo.Pod)
		}
		seen[r.echo.Pod]++
		if got := r.echo.Headers["X-Variant"]; len(got) != 1 || got[0] != w.variant {
			t.Errorf("request %d to %s: X-Variant %q, want %q", i, r.echo.Pod, got, w.variant)
		}
		if r.echo.Path != w.path || r.echo.Host != w.host {
			t.Errorf("request %d to %s: path %q host %q, want %q %q", i, r.echo.Pod, r.echo.Path, r.echo.Host, w.path, w.host)
		}
	}
	if seen["app-v1"] == 0 || seen["app-v2"] == 0 {
		t.Errorf("requests per backend %v: the split sent everything to one", seen)
	}
	t.Logf("requests per backend: %v", seen)
}
