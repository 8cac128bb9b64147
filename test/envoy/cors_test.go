package envoy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// corsRoute puts a CORS policy on /cors of cors.example.com (to app-v1).
const corsRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: cors, namespace: default}
spec:
  parentRefs: [{name: quickstart}]
  hostnames: [cors.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /cors}}]
    filters:
    - type: CORS
      cors:
        allowOrigins: ["https://app.example.com", "https://*.tenant.example"]
        allowMethods: [GET, PUT]
        allowHeaders: [X-Token]
        exposeHeaders: [X-Trace]
        allowCredentials: true
        maxAge: 600
    backendRefs: [{name: app-v1, port: 80}]
`

// TestCORS: CORS preflights are answered by Envoy from the route's policy
// (HTTPRouteCORS) without reaching the backend, an origin not allowed gets
// no CORS headers, and an actual cross-origin request reaches the backend
// with the allow-origin and expose headers added to its response.
func TestCORS(t *testing.T) {
	s := startStack(t, map[string]string{"cors.yaml": corsRoute}, quickstartBackends...)
	c := s.client(nil)
	s.routed(c, "http://127.0.0.1:8080/cors", "cors.example.com", "app-v1")
	do := func(method, origin string, headers ...string) (*http.Response, *echoed) {
		t.Helper()
		req, err := http.NewRequest(method, "http://127.0.0.1:8080/cors/x", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = "cors.example.com"
		req.Header.Set("Origin", origin)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var e echoed
		if json.Unmarshal(body, &e) != nil || e.Pod == "" {
			return resp, nil
		}
		return resp, &e
	}
	// The policy is served once the preflight is answered with it.
	s.eventually(15*time.Second, "the preflight answered by Envoy", func() error {
		resp, e := do(http.MethodOptions, "https://app.example.com", "Access-Control-Request-Method", "PUT", "Access-Control-Request-Headers", "X-Token")
		if e != nil || resp.Header.Get("Access-Control-Allow-Origin") == "" {
			return fmt.Errorf("status %d, headers %v, backend %v", resp.StatusCode, resp.Header, e != nil)
		}
		return nil
	})
	resp, _ := do(http.MethodOptions, "https://app.example.com", "Access-Control-Request-Method", "PUT", "Access-Control-Request-Headers", "X-Token")
	want := map[string]string{
		"Access-Control-Allow-Origin":      "https://app.example.com",
		"Access-Control-Allow-Methods":     "GET,PUT",
		"Access-Control-Allow-Headers":     "X-Token",
		"Access-Control-Max-Age":           "600",
		"Access-Control-Allow-Credentials": "true",
	}
	if resp.StatusCode != 200 && resp.StatusCode != 204 {
		t.Errorf("preflight status %d", resp.StatusCode)
	}
	for h, v := range want {
		if got := resp.Header.Get(h); got != v {
			t.Errorf("preflight %s = %q, want %q", h, got, v)
		}
	}
	// A wildcard origin, another letter case: allowed, the Origin echoed.
	resp, _ = do(http.MethodOptions, "HTTPS://a.b.Tenant.example", "Access-Control-Request-Method", "GET")
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "HTTPS://a.b.Tenant.example" {
		t.Errorf("wildcard origin: allow-origin %q", got)
	}
	// Not allowed: answered without CORS headers, never forwarded.
	resp, e := do(http.MethodOptions, "https://evil.example", "Access-Control-Request-Method", "PUT")
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "" || e != nil {
		t.Errorf("origin not allowed: allow-origin %q, reached the backend: %v", got, e != nil)
	}
	// An actual request reaches the backend and gets the CORS headers.
	resp, e = do(http.MethodGet, "https://app.example.com")
	if e == nil || e.Pod != "app-v1" {
		t.Fatalf("the cross-origin GET did not reach app-v1: %d", resp.StatusCode)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" || resp.Header.Get("Access-Control-Expose-Headers") != "X-Trace" ||
		resp.Header.Get("Access-Control-Allow-Credentials") != "true" {
		t.Errorf("actual response CORS headers: %v", resp.Header)
	}
}
