package load

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/resource"
)

const twoDocs = `# leading comment
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: gw
  namespace: infra
spec:
  gatewayClassName: portico
  listeners:
  - name: http
    port: 80
    protocol: HTTP
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  ports:
  - port: 80
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abc
  labels:
    kubernetes.io/service-name: web
addressType: IPv4
endpoints:
- addresses: ["10.0.0.1"]
`

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadMultiDocumentAndUnknownKind(t *testing.T) {
	dir := t.TempDir()
	f := write(t, dir, "all.yaml", twoDocs)
	s, warnings, err := Paths(f)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Gateways.Has(types.NamespacedName{Namespace: "infra", Name: "gw"}) {
		t.Errorf("gateway infra/gw not loaded: %v", resource.SortedKeys(s.Gateways))
	}
	if !s.Services.Has(types.NamespacedName{Namespace: "default", Name: "web"}) {
		t.Errorf("service without namespace must land in default: %v", resource.SortedKeys(s.Services))
	}
	if got := s.EndpointSlicesFor(types.NamespacedName{Namespace: "default", Name: "web"}); len(got) != 1 {
		t.Errorf("EndpointSlicesFor(default/web) = %d slices, want 1", len(got))
	}
	if len(warnings) != 1 {
		t.Fatalf("warnings = %v, want one for the Widget", warnings)
	}
	w := warnings[0]
	if w.File != f || w.Document != 2 || !strings.Contains(w.Message, "Widget") {
		t.Errorf("warning = %+v, want file %s document 2 naming Widget", w, f)
	}
}

func TestLoadDirectoryWalksSortedAndSkipsHidden(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "b/route.yaml", `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: r, namespace: default}
spec: {}
`)
	write(t, dir, "a.yml", `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
`)
	write(t, dir, ".hidden/x.yaml", "{{{ not yaml")
	write(t, dir, "notes.txt", "{{{ not yaml")
	s, _, err := Paths(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.HTTPRoutes.Len() != 1 || s.GatewayClasses.Len() != 1 {
		t.Errorf("got %d routes, %d classes; want 1 and 1", s.HTTPRoutes.Len(), s.GatewayClasses.Len())
	}
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	cases := map[string]string{
		"unparseable": "apiVersion: v1\nkind: Service\nmetadata: [unclosed\n",
		"no kind":     "apiVersion: v1\nmetadata: {name: x}\n",
		"bad field":   "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {portz: []}\n",
		"wrong type":  "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: x}\nspec: {listeners: 5}\n",
		"no name":     "apiVersion: v1\nkind: Secret\nmetadata: {namespace: x}\n",
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			f := write(t, t.TempDir(), "broken.yaml", "# ok\n---\n"+content)
			_, _, err := Paths(f)
			var le *Error
			if !errors.As(err, &le) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if le.File != f || !strings.Contains(err.Error(), f) {
				t.Errorf("error %q does not name %s", err, f)
			}
		})
	}
}

func TestLoadMissingPath(t *testing.T) {
	_, _, err := Paths(filepath.Join(t.TempDir(), "nope"))
	if err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("err = %v, want an error naming the path", err)
	}
}

func TestLoadList(t *testing.T) {
	f := write(t, t.TempDir(), "list.yaml", `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Namespace
  metadata: {name: team-a, labels: {team: a}}
- apiVersion: v1
  kind: ServiceAccount
  metadata: {name: c}
`)
	s, warnings, err := Paths(f)
	if err != nil {
		t.Fatal(err)
	}
	if ns := s.Namespaces.Value("team-a"); ns == nil || ns.Labels["team"] != "a" {
		t.Errorf("namespace from List not loaded: %v", resource.SortedNames(s.Namespaces))
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0].Message, "item 1") {
		t.Errorf("warnings = %v, want one for item 1 (ServiceAccount)", warnings)
	}
}

// FuzzAddYAML feeds arbitrary bytes to the loader: it must return objects,
// warnings or an error naming the file, and never panic.
func FuzzAddYAML(f *testing.F) {
	f.Add([]byte(twoDocs))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Secret, metadata: {name: s}}]\n"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r}\nspec: {rules: [{matches: [{path: {type: RegularExpression, value: '(('}}]}]}\n"))
	// Lists: nested up to and past the limit, with odd items.
	f.Add([]byte(nestedList(DefaultMaxListDepth)))
	f.Add([]byte(nestedList(DefaultMaxListDepth + 1)))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items:\n  - {apiVersion: v1, kind: Namespace, metadata: {name: n}}\n  - {apiVersion: v1, kind: ServiceAccount, metadata: {name: c}}\n"))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: null\n"))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: {a: 1}\n"))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems: [1, \"x\", [], null]\n"))
	f.Add([]byte("- apiVersion: v1\n  kind: List\n"))
	f.Add([]byte("apiVersion: v1\nkind: List\nmetadata: {name: l}\nitems: [{apiVersion: v1, kind: List, items: [{apiVersion: v1, kind: Service, metadata: {name: 1}}]}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := resource.New()
		_, err := AddYAML(s, "fuzz.yaml", data)
		if err != nil && !strings.Contains(err.Error(), "fuzz.yaml") {
			t.Fatalf("error does not name the file: %v", err)
		}
		if err != nil && s.Build().Len() != 0 {
			t.Fatalf("a stream that failed (%v) added %d objects", err, s.Len())
		}
		s.Build()
	})
}

// A Gateway API kind Portico does not implement (experimental group or a
// version it does not read) is a warning that says so, naming the object,
// and the rest of the file is loaded.
func TestLoadGatewayAPIKindNotImplemented(t *testing.T) {
	dir := t.TempDir()
	f := write(t, dir, "x.yaml", `apiVersion: gateway.networking.x-k8s.io/v1alpha1
kind: XBackendTrafficPolicy
metadata: {name: budget, namespace: default}
spec: {}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Widget
metadata: {name: w}
---
apiVersion: v1
kind: Service
metadata: {name: web}
`)
	s, warnings, err := Paths(f)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Services.Has(types.NamespacedName{Namespace: "default", Name: "web"}) {
		t.Error("the Service after them was not loaded")
	}
	if len(warnings) != 2 {
		t.Fatalf("warnings = %+v, want two", warnings)
	}
	for i, name := range []string{`XBackendTrafficPolicy "budget"`, `Widget "w"`} {
		if m := warnings[i].Message; !strings.Contains(m, name) || !strings.Contains(m, "not implemented by Portico") || !strings.Contains(m, "not applied") {
			t.Errorf("warning %d = %q, want it to say %s is not implemented and not applied", i, m, name)
		}
	}
}
