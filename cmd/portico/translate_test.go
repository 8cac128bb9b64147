package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

type document struct {
	Statuses []struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"metadata"`
		Status map[string]any `json:"status"`
	} `json:"statuses"`
	XDS []struct {
		Gateway   string           `json:"gateway"`
		Version   string           `json:"version"`
		Listeners []map[string]any `json:"listeners"`
		Clusters  []map[string]any `json:"clusters"`
	} `json:"xds"`
}

func runTranslate(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb syncBuffer
	code = run(append([]string{"translate"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestTranslateValid(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "gateway.yaml", gatewayYAML)
	writeFile(t, dir, "web.yaml", backendYAML("web", "10.0.0.1"))

	code, out, errOut := runTranslate(t, "-f", dir)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	var doc document
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	kinds := map[string]bool{}
	for _, s := range doc.Statuses {
		kinds[s.Kind+"/"+s.Metadata.Name] = true
		if s.APIVersion != "gateway.networking.k8s.io/v1" || s.Status == nil {
			t.Errorf("status object %+v", s)
		}
	}
	for _, k := range []string{"GatewayClass/portico", "Gateway/gw", "HTTPRoute/web"} {
		if !kinds[k] {
			t.Errorf("no status for %s in %v", k, kinds)
		}
	}
	if len(doc.XDS) != 1 || doc.XDS[0].Gateway != "default/gw" || doc.XDS[0].Version == "" {
		t.Fatalf("xds = %+v", doc.XDS)
	}
	if len(doc.XDS[0].Listeners) != 1 || !hasCluster(doc.XDS[0].Clusters, clusterName("web")) {
		t.Errorf("xds of default/gw: listeners %v clusters %v", doc.XDS[0].Listeners, doc.XDS[0].Clusters)
	}
	// The EndpointSlice's address is the cluster's endpoint.
	if !strings.Contains(out, `"10.0.0.1"`) {
		t.Errorf("the endpoint 10.0.0.1 of web is not in the output:\n%s", out)
	}

	// --output status / xds, YAML, and the file given twice as files.
	code, out, _ = runTranslate(t, "--output", "status", "-o", "yaml", "-f", dir+"/gateway.yaml", "--f", dir+"/web.yaml")
	if code != 0 || !strings.HasPrefix(out, "statuses:\n") || strings.Contains(out, "\nxds:") {
		t.Errorf("--output status -o yaml: exit %d\n%s", code, out)
	}
	var y map[string]any
	if err := yaml.Unmarshal([]byte(out), &y); err != nil {
		t.Errorf("yaml output does not parse: %v", err)
	}
	code, out, _ = runTranslate(t, "-output=xds", "-f", dir)
	if code != 0 || !strings.HasPrefix(out, "{\n  \"xds\": [") || strings.Contains(out, `"statuses"`) {
		t.Errorf("--output xds: exit %d\n%s", code, out)
	}
}

func hasCluster(cs []map[string]any, name string) bool {
	for _, c := range cs {
		if c["name"] == name {
			return true
		}
	}
	return false
}

func TestTranslateBrokenYAML(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "gateway.yaml", gatewayYAML)
	writeFile(t, dir, "zz-broken.yaml", "apiVersion: v1\nkind: Service\nmetadata: [oops\n")
	code, out, errOut := runTranslate(t, "-f", dir)
	if code == 0 {
		t.Fatalf("exit 0 for broken input; stdout:\n%s", out)
	}
	if !strings.Contains(errOut, "zz-broken.yaml") {
		t.Errorf("stderr does not name the broken file:\n%s", errOut)
	}
	if out != "" {
		t.Errorf("stdout not empty on error:\n%s", out)
	}
}

func TestTranslateUnknownKindWarns(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "gateway.yaml", gatewayYAML+"---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n")
	code, out, errOut := runTranslate(t, "-f", dir)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	if !strings.Contains(errOut, "warning:") || !strings.Contains(errOut, "gateway.yaml: document 2") || !strings.Contains(errOut, "Widget") {
		t.Errorf("warning does not name file and document:\n%s", errOut)
	}
	if !json.Valid([]byte(out)) {
		t.Errorf("stdout is not JSON")
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"nope"},
		{"translate"},
		{"translate", "-f", "x", "-o", "toml"},
		{"translate", "-f", "x", "--output", "everything"},
		{"translate", "-f", "x", "extra"},
		{"standalone"},
		{"standalone", "--resources", "x", "--log-level", "loud"},
	} {
		var out, errb syncBuffer
		if code := run(args, &out, &errb); code != exitUsage {
			t.Errorf("%q: exit %d, want %d\n%s", args, code, exitUsage, errb.String())
		}
	}
	var out, errb syncBuffer
	if code := run([]string{"version"}, &out, &errb); code != 0 || !strings.HasPrefix(out.String(), "portico ") {
		t.Errorf("version: exit %d %q", code, out.String())
	}
	if code := run([]string{"translate", "-f", "/does/not/exist"}, &out, &errb); code != exitError || !strings.Contains(errb.String(), "/does/not/exist") {
		t.Errorf("missing file: exit %d %q", code, errb.String())
	}
}

// tlsSecretYAML returns a Gateway default/gw with an HTTPS listener that
// terminates TLS with the Secret default/tls, and that Secret holding a
// fresh self-signed certificate; it returns the key's PEM too.
func tlsSecretYAML(t *testing.T) (manifest string, certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "www.example.com"},
		DNSNames:     []string{"www.example.com"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	manifest = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: portico}
spec: {controllerName: portico.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: portico
  listeners:
  - name: https
    protocol: HTTPS
    port: 8443
    hostname: www.example.com
    tls:
      certificateRefs: [{name: tls}]
---
apiVersion: v1
kind: Secret
metadata: {name: tls, namespace: default}
type: kubernetes.io/tls
data:
  tls.crt: ` + base64.StdEncoding.EncodeToString(certPEM) + `
  tls.key: ` + base64.StdEncoding.EncodeToString(keyPEM) + `
`
	return manifest, certPEM, keyPEM
}

// TestTranslateRedactsPrivateKeys: the private key of a TLS Secret is not
// printed unless --show-secrets; the certificate is, either way.
func TestTranslateRedactsPrivateKeys(t *testing.T) {
	dir := t.TempDir()
	manifest, certPEM, keyPEM := tlsSecretYAML(t)
	writeFile(t, dir, "tls.yaml", manifest)
	// The key may be printed as PEM or base64 (protojson's inlineBytes).
	keyForms := []string{string(keyPEM), base64.StdEncoding.EncodeToString(keyPEM), strings.Split(string(keyPEM), "\n")[1]}
	certB64 := base64.StdEncoding.EncodeToString(certPEM)

	for _, format := range []string{"json", "yaml"} {
		code, out, errOut := runTranslate(t, "-o", format, "-f", dir)
		if code != 0 {
			t.Fatalf("-o %s: exit %d, stderr:\n%s", format, code, errOut)
		}
		for _, k := range keyForms {
			if strings.Contains(out, k) {
				t.Errorf("-o %s: output contains the private key (%.20s…) without --show-secrets", format, k)
			}
		}
		if !strings.Contains(out, "[redacted]") {
			t.Errorf("-o %s: output has no [redacted] key", format)
		}
		if !strings.Contains(out, certB64) {
			t.Errorf("-o %s: output lacks the certificate", format)
		}
	}

	code, out, errOut := runTranslate(t, "--show-secrets", "-f", dir)
	if code != 0 {
		t.Fatalf("--show-secrets: exit %d, stderr:\n%s", code, errOut)
	}
	if !strings.Contains(out, base64.StdEncoding.EncodeToString(keyPEM)) {
		t.Errorf("--show-secrets: output lacks the private key:\n%s", out)
	}
	if strings.Contains(out, "[redacted]") {
		t.Errorf("--show-secrets: output still redacted")
	}
}

// TestTranslateLoaderLimits: a file the loader refuses fails translate,
// naming it (the output must not silently lack its objects), and the
// limits are flags.
func TestTranslateLoaderLimits(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "gateway.yaml", gatewayYAML)
	web := writeFile(t, dir, "web.yaml", backendYAML("web", "10.0.0.1"))

	size := len(backendYAML("web", "10.0.0.1"))
	limit := strconv.Itoa(size - 1)
	code, out, errOut := runTranslate(t, "--max-file-bytes", limit, "-f", dir)
	if code != exitError || out != "" || !strings.Contains(errOut, web) || !strings.Contains(errOut, "larger than the limit of "+limit+" bytes") {
		t.Errorf("--max-file-bytes %s: exit %d, stderr:\n%s", limit, code, errOut)
	}
	if code, _, errOut := runTranslate(t, "--max-objects-per-file", "2", "-f", dir); code != exitError || !strings.Contains(errOut, "more than 2 objects") {
		t.Errorf("--max-objects-per-file 2: exit %d, stderr:\n%s", code, errOut)
	}
	total := strconv.Itoa(size + len(gatewayYAML) - 1)
	if code, _, errOut := runTranslate(t, "--max-total-bytes", total, "-f", dir); code != exitError || !strings.Contains(errOut, "total size") {
		t.Errorf("--max-total-bytes %s: exit %d, stderr:\n%s", total, code, errOut)
	}
	if code, _, errOut := runTranslate(t, "--max-document-bytes", "100", "-f", dir); code != exitError || !strings.Contains(errOut, "document of") {
		t.Errorf("--max-document-bytes 100: exit %d, stderr:\n%s", code, errOut)
	}
	if code, _, errOut := runTranslate(t, "--max-file-bytes", "1Mi", "--max-total-bytes", "2MiB", "-f", dir); code != exitOK {
		t.Errorf("generous limits: exit %d, stderr:\n%s", code, errOut)
	}
	for _, bad := range []string{"0", "-1", "16Xi", "lots", "99999999999Gi"} {
		for _, flag := range []string{"--max-file-bytes", "--max-objects-per-file"} {
			if code, _, _ := runTranslate(t, flag, bad, "-f", dir); code != exitUsage {
				t.Errorf("%s %s: exit %d, want %d", flag, bad, code, exitUsage)
			}
		}
	}

	// A FIFO in the directory: an error naming it, at once.
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		code, _, errOut := runTranslate(t, "-f", dir)
		if code != exitError || !strings.Contains(errOut, fifo) || !strings.Contains(errOut, "not a regular file") {
			t.Errorf("FIFO: exit %d, stderr:\n%s", code, errOut)
		}
	}()
	select {
	case <-done:
	case <-time.After(deadline):
		t.Fatal("translate blocked on a FIFO")
	}
}

// TestTranslateRouteBudget: --max-route-expansion refuses a route that
// expands beyond it, with the figures in its status; the default serves it.
func TestTranslateRouteBudget(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "quickstart")
	code, out, errOut := runTranslate(t, "--output", "status", "-o", "yaml", "--max-route-expansion", "1", "-f", dir)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "more than the 1 one route may (--max-route-expansion)") {
		t.Errorf("no route refused for its budget:\n%s", out)
	}
	if _, out, _ := runTranslate(t, "--output", "status", "-o", "yaml", "-f", dir); strings.Contains(out, "--max-route-expansion") {
		t.Errorf("the default budget refuses a quickstart route:\n%s", out)
	}
}

// portico translate shows a BackendTLSPolicy's status and the upstream TLS
// it configures (the render golden btls-01 as input).
func TestTranslateBackendTLSPolicy(t *testing.T) {
	in := filepath.Join("..", "..", "internal", "render", "testdata", "btls-01-backend-tls-policy.in.yaml")
	code, out, errOut := runTranslate(t, "-f", in)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	var doc document
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range doc.Statuses {
		if s.Kind == "BackendTLSPolicy" && s.Metadata.Name == "https" {
			found = true
			if a, _ := s.Status["ancestors"].([]any); len(a) != 1 {
				t.Errorf("ancestors of BackendTLSPolicy https: %v", s.Status)
			}
		}
	}
	if !found {
		t.Error("no status of BackendTLSPolicy https")
	}
	if len(doc.XDS) != 1 {
		t.Fatalf("xds %+v", doc.XDS)
	}
	for _, c := range doc.XDS[0].Clusters {
		if c["name"] != "default/secure/443" {
			continue
		}
		ts, _ := c["transportSocket"].(map[string]any)
		if ts["name"] != "envoy.transport_sockets.tls" || !strings.Contains(out, `"sni": "https.example.com"`) {
			t.Errorf("cluster default/secure/443 has no upstream TLS: %v", c)
		}
		return
	}
	t.Error("no cluster default/secure/443")
}

// --scoped-route-tables-at: the quickstart's tables in scoped form at 1
// route (scopes and host-scope filters in the output), none by default.
func TestTranslateScopedRouteTables(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "quickstart")
	code, out, errOut := runTranslate(t, "--output", "xds", "--scoped-route-tables-at", "1", "-f", dir)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{`"scopedRoutes"`, `"hostScopeFilters"`, `#host-scope`, `x-portico-route-scope`} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in the scoped output", want)
		}
	}
	for _, args := range [][]string{{}, {"--scoped-route-tables-at", "0"}, {"--scoped-route-tables-at", "-1"}} {
		_, out, _ := runTranslate(t, append(append([]string{"--output", "xds"}, args...), "-f", dir)...)
		if strings.Contains(out, "scopedRoutes") {
			t.Errorf("%v: the quickstart's small tables are scoped", args)
		}
	}
	if code, _, _ := runTranslate(t, "--scoped-route-tables-at", "many", "-f", dir); code != exitUsage {
		t.Errorf("a bad --scoped-route-tables-at: exit %d, want %d", code, exitUsage)
	}
}
