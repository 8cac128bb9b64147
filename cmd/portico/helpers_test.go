package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const deadline = 20 * time.Second // every wait polls until at most this long

// syncBuffer is a goroutine-safe bytes.Buffer.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// eventually polls cond every few milliseconds until it holds or the
// deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// writeFile writes dir/name atomically (temp file + rename).
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	tmp := filepath.Join(dir, ".tmp-"+name)
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// gatewayYAML is a GatewayClass of Portico and the Gateway default/gw with an
// HTTP listener on port 8080.
const gatewayYAML = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: portico
spec:
  controllerName: portico.dev/gateway-controller
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: gw
  namespace: default
spec:
  gatewayClassName: portico
  listeners:
  - name: http
    protocol: HTTP
    port: 8080
`

// backendYAML is an HTTPRoute attached to default/gw that sends path
// prefix /<name> to the Service <name> (port 80), with its EndpointSlice.
func backendYAML(name, ip string) string {
	return strings.ReplaceAll(strings.ReplaceAll(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: NAME
  namespace: default
spec:
  parentRefs:
  - name: gw
  rules:
  - matches:
    - path:
        type: PathPrefix
        value: /NAME
    backendRefs:
    - name: NAME
      port: 80
---
apiVersion: v1
kind: Service
metadata:
  name: NAME
  namespace: default
spec:
  ports:
  - name: http
    port: 80
    targetPort: 8080
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: NAME-1
  namespace: default
  labels:
    kubernetes.io/service-name: NAME
addressType: IPv4
endpoints:
- addresses: [ADDRESS]
  conditions:
    ready: true
ports:
- name: http
  port: 8080
`, "NAME", name), "ADDRESS", ip)
}

func clusterName(svc string) string { return fmt.Sprintf("default/%s/80", svc) }

// listenerName is the Envoy listener of gatewayYAML's HTTP listener.
const listenerName = "default/gw/http-8080"
