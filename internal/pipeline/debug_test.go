package pipeline

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/render"
	"github.com/portico-dev/portico/internal/resource"
)

// debugStatus decodes the document of p.DebugStatus.
func debugStatus(t *testing.T, p *Pipeline) []render.StatusObject {
	t.Helper()
	var buf bytes.Buffer
	if _, err := p.DebugStatus().WriteTo(&buf); err != nil {
		t.Fatalf("DebugStatus: %v", err)
	}
	var got []render.StatusObject
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("DebugStatus: %v\n%s", err, buf.String())
	}
	return got
}

// debugXDS decodes the document of p.DebugXDS(gw) (its top-level fields).
func debugXDS(t *testing.T, p *Pipeline, gw string) (render.GatewayXDS, bool) {
	t.Helper()
	v, ok := p.DebugXDS(gw)
	if !ok {
		return render.GatewayXDS{}, false
	}
	var buf bytes.Buffer
	n, err := v.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("DebugXDS(%s): %d bytes of %d, %v", gw, n, buf.Len(), err)
	}
	var g render.GatewayXDS
	if err := json.Unmarshal(buf.Bytes(), &g); err != nil {
		t.Fatalf("DebugXDS(%s): %v\n%s", gw, err, buf.String())
	}
	return g, true
}

const headerRoutes = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: portico
  listeners: [{name: http, protocol: HTTP, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {ports: [{port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches:
    - headers: [{name: X-Api-Key, value: match-token-123}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set: [{name: Authorization, value: "Bearer s3cr3t-token"}]
    backendRefs: [{name: web, port: 80}]
`

// The xDS debug view of a real translation redacts header values set by a
// RequestHeaderModifier and header match values, keeping the names, while
// the configuration served to Envoy keeps them.
func TestDebugXDSRedactsHeaders(t *testing.T) {
	s := newSink()
	p := New(Config{XDS: s, Debounce: time.Millisecond})
	start(t, p)
	snap := resource.New()
	if _, err := snap.AddYAML("routes.yaml", []byte(headerRoutes)); err != nil {
		t.Fatal(err)
	}
	p.Submit(snap.Build())
	served := s.next(t)
	// The sink gets the update before the translation is recorded as the
	// latest: wait for that (ReadyC closes after it), not for the sink.
	select {
	case <-p.ReadyC():
	case <-time.After(wait):
		t.Fatal("the pipeline did not become ready")
	}

	v, ok := p.DebugXDS("default/gw")
	if !ok {
		t.Fatal("DebugXDS: default/gw not found")
	}
	var buf bytes.Buffer
	if _, err := v.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	doc := buf.String()
	for _, secret := range []string{"s3cr3t-token", "Bearer", "match-token-123"} {
		if strings.Contains(doc, secret) {
			t.Errorf("/debug/xds shows %q:\n%s", secret, doc)
		}
	}
	for _, kept := range []string{`"authorization"`, `"x-api-key"`, render.Redacted} {
		if !strings.Contains(doc, kept) {
			t.Errorf("/debug/xds lacks %q:\n%s", kept, doc)
		}
	}
	g, err := render.GatewayXDSOf(served[0], render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := render.JSON(g)
	if !bytes.Contains(plain, []byte("Bearer s3cr3t-token")) {
		t.Error("the served configuration lost the header value")
	}
	if _, ok := p.DebugXDS("default/nope"); ok {
		t.Error("DebugXDS found an unknown gateway")
	}
	kinds := map[string]bool{}
	for _, st := range debugStatus(t, p) {
		kinds[st.Kind] = true
	}
	if !kinds[gatewayapi.KindGatewayClass] || !kinds[gatewayapi.KindGateway] || !kinds[gatewayapi.KindHTTPRoute] {
		t.Errorf("DebugStatus has the kinds %v, want GatewayClass, Gateway and HTTPRoute", kinds)
	}
}
