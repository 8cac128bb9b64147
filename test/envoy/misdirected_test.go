package envoy

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portico-dev/portico/internal/testenv"
)

// misdirectedGateway replaces the quickstart's Gateway: three HTTPS
// listeners on 8443 (any hostname, a.example.com, *.example.com), each
// with a route of its own.
const misdirectedGateway = `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: quickstart, namespace: default}
spec:
  gatewayClassName: portico
  listeners:
  - {name: http, port: 8080, protocol: HTTP}
  - name: https
    port: 8443
    protocol: HTTPS
    tls: {certificateRefs: [{name: quickstart-tls}]}
  - name: https-a
    port: 8443
    protocol: HTTPS
    hostname: a.example.com
    tls: {certificateRefs: [{name: quickstart-tls}]}
  - name: https-wild
    port: 8443
    protocol: HTTPS
    hostname: "*.example.com"
    tls: {certificateRefs: [{name: quickstart-tls}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r-a, namespace: default}
spec:
  parentRefs: [{name: quickstart, sectionName: https-a}]
  rules: [{backendRefs: [{name: app-v1, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r-wild, namespace: default}
spec:
  parentRefs: [{name: quickstart, sectionName: https-wild}]
  # Not all of *.example.com: the quickstart's GRPCRoute has one of them.
  hostnames: [b.example.com, c.example.com]
  rules: [{backendRefs: [{name: app-v2, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r-any, namespace: default}
spec:
  parentRefs: [{name: quickstart, sectionName: https}]
  hostnames: [catchall.test]
  rules: [{backendRefs: [{name: api, port: 80}]}]
`

// TestMisdirectedRequest: an HTTP/2 client that reuses its TLS connection
// (SNI of one listener) for a hostname that another listener of the port
// owns gets 421 Misdirected Request from Envoy; a hostname no other
// listener owns is routed by the connection's listener (404 when none of
// its routes serves it).
func TestMisdirectedRequest(t *testing.T) {
	s := startStack(t, map[string]string{"gateway.yaml": misdirectedGateway}, quickstartBackends...)
	roots := quickstartRoots(t)
	cases := []struct {
		sni string
		// hosts: Host → pod answering, "421" or "404"; the first is
		// waited for, and opens the connection the others reuse.
		hosts [][2]string
	}{
		{"a.example.com", [][2]string{{"a.example.com", "app-v1"}, {"b.example.com", "421"}, {"catchall.test", "421"}, {"unknown.test", "421"}, {"a.example.com", "app-v1"}}},
		{"b.example.com", [][2]string{{"c.example.com", "app-v2"}, {"a.example.com", "421"}, {"catchall.test", "421"}, {"b.example.com", "app-v2"}}},
		{"localhost", [][2]string{{"catchall.test", "api"}, {"a.example.com", "421"}, {"b.example.com", "421"}, {"unknown.test", "404"}}},
	}
	for _, tc := range cases {
		t.Run("SNI "+tc.sni, func(t *testing.T) {
			c := s.client(&tls.Config{ServerName: tc.sni, RootCAs: roots, NextProtos: []string{"h2"}})
			defer c.CloseIdleConnections()
			for i, h := range tc.hosts {
				host, want := h[0], h[1]
				if i == 0 {
					s.routed(c, "https://127.0.0.1:8443/", host, want)
					continue
				}
				reused := false
				trace := &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) { reused = ci.Reused }}
				req, err := http.NewRequest(http.MethodGet, "https://127.0.0.1:8443/", nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Host = host
				// The tag of the listener that owns host, as a client may
				// forge it: replaced by the connection's own.
				req.Header.Set("X-Portico-Listener", host)
				resp, err := c.Do(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.ProtoMajor != 2 || !reused {
					t.Fatalf("Host %s: %s, connection reused %v: want HTTP/2 on the first request's connection", host, resp.Proto, reused)
				}
				switch want {
				case "421", "404":
					if got := resp.Status[:3]; got != want || json.Unmarshal(body, &echoed{}) == nil {
						t.Errorf("SNI %s, Host %s: %s %q, want %s from Envoy", tc.sni, host, resp.Status, truncate(string(body), 200), want)
					}
				default:
					var e echoed
					if resp.StatusCode != 200 || json.Unmarshal(body, &e) != nil || e.Pod != want {
						t.Errorf("SNI %s, Host %s: %s %q, want 200 from %s", tc.sni, host, resp.Status, truncate(string(body), 200), want)
					} else if v, ok := e.Headers["X-Portico-Listener"]; ok {
						t.Errorf("SNI %s, Host %s: the backend got the listener tag %q", tc.sni, host, v)
					}
				}
			}
		})
	}
}

// quickstartRoots is a pool of the quickstart's self-signed certificate.
func quickstartRoots(t *testing.T) *x509.CertPool {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "examples", "quickstart", "tls-secret.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "tls.crt:"); ok {
			pem, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				t.Fatal("tls.crt of tls-secret.yaml holds no certificate")
			}
			return pool
		}
	}
	t.Fatal("no tls.crt in tls-secret.yaml")
	return nil
}
