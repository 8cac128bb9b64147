package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/pipeline"
	"github.com/portico-dev/portico/internal/render"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/resource/load"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// pipelineWait is the deadline of every wait on a pipeline.
const pipelineWait = 10 * time.Second

// xdsSink is a pipeline.XDSSink that reports every update.
type xdsSink chan []*translate.Resources

func (s xdsSink) Update(_ context.Context, res []*translate.Resources) error {
	s <- res
	return nil
}

// runPipeline runs a pipeline on the objects of doc until the test ends,
// and returns it once its first translation is the latest, with what it
// served.
func runPipeline(t *testing.T, doc string) (*pipeline.Pipeline, []*translate.Resources) {
	t.Helper()
	sink := make(xdsSink, 10)
	p := pipeline.New(pipeline.Config{XDS: sink, Debounce: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v", err)
			}
		case <-time.After(pipelineWait):
			t.Error("Run did not return after cancel")
		}
	})
	snap := resource.New()
	if _, err := load.AddYAML(snap, "routes.yaml", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	p.Submit(snap.Build())
	var served []*translate.Resources
	select {
	case served = <-sink:
	case <-time.After(pipelineWait):
		t.Fatal("no xDS update within the deadline")
	}
	// The sink gets the update before the translation is recorded as the
	// latest: wait for that (ReadyC closes after it), not for the sink.
	select {
	case <-p.ReadyC():
	case <-time.After(pipelineWait):
		t.Fatal("the pipeline did not become ready")
	}
	return p, served
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

// Before the first translation the views know no Gateway and list no
// status.
func TestPipelineViewsBeforeFirstTranslation(t *testing.T) {
	v := PipelineViews(pipeline.New(pipeline.Config{XDS: make(xdsSink, 1)}))
	if _, ok := v.DebugXDS("default/gw"); ok {
		t.Error("DebugXDS found a gateway before the first translation")
	}
	var buf bytes.Buffer
	if _, err := v.DebugStatus().WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	var got []render.StatusObject
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil || len(got) != 0 {
		t.Errorf("DebugStatus before the first translation = %q (%v), want an empty list", buf.String(), err)
	}
}

// The xDS view of a real translation redacts header values set by a
// RequestHeaderModifier and header match values, keeping the names, while
// the configuration served to Envoy keeps them; the status view lists
// every object's status; and the debug server serves exactly the
// documents the views write.
func TestPipelineViews(t *testing.T) {
	p, served := runPipeline(t, headerRoutes)
	views := PipelineViews(p)

	v, ok := views.DebugXDS("default/gw")
	if !ok {
		t.Fatal("DebugXDS: default/gw not found")
	}
	var buf bytes.Buffer
	n, err := v.WriteTo(&buf)
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("DebugXDS: %d bytes of %d, %v", n, buf.Len(), err)
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
	var g render.GatewayXDS
	if err := json.Unmarshal(buf.Bytes(), &g); err != nil || g.Gateway != "default/gw" || g.Version != p.Latest().Versions["default/gw"] {
		t.Errorf("DebugXDS decodes to gateway %q version %q (%v), want default/gw at %q", g.Gateway, g.Version, err, p.Latest().Versions["default/gw"])
	}
	// The view is the streamed rendering of what was served, redacted.
	var want bytes.Buffer
	if err := render.WriteGatewayXDS(&want, served[0], DebugRedaction); err != nil {
		t.Fatal(err)
	}
	if doc != want.String() {
		t.Errorf("DebugXDS is not render.WriteGatewayXDS of the served resources:\n%s\nwant:\n%s", doc, want.String())
	}
	plainGW, err := render.GatewayXDSOf(served[0], render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := render.JSON(plainGW)
	if !bytes.Contains(plain, []byte("Bearer s3cr3t-token")) {
		t.Error("the served configuration lost the header value")
	}
	if _, ok := views.DebugXDS("default/nope"); ok {
		t.Error("DebugXDS found an unknown gateway")
	}

	var status bytes.Buffer
	if _, err := views.DebugStatus().WriteTo(&status); err != nil {
		t.Fatal(err)
	}
	var statuses []render.StatusObject
	if err := json.Unmarshal(status.Bytes(), &statuses); err != nil {
		t.Fatalf("DebugStatus: %v\n%s", err, status.String())
	}
	kinds := map[string]bool{}
	for _, st := range statuses {
		kinds[st.Kind] = true
	}
	if !kinds["GatewayClass"] || !kinds["Gateway"] || !kinds["HTTPRoute"] {
		t.Errorf("DebugStatus has the kinds %v, want GatewayClass, Gateway and HTTPRoute", kinds)
	}

	h := newDebug(views)
	if rec := get(t, h, http.MethodGet, "/debug/xds?gateway=default/gw"); rec.Code != http.StatusOK || rec.Body.String() != doc {
		t.Errorf("/debug/xds = %d, not the view's document:\n%s", rec.Code, rec.Body.String())
	}
	if rec := get(t, h, http.MethodGet, "/debug/status"); rec.Code != http.StatusOK || rec.Body.String() != status.String() {
		t.Errorf("/debug/status = %d, not the view's document:\n%s", rec.Code, rec.Body.String())
	}
}
