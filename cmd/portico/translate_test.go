package main

import (
	"encoding/json"
	"strings"
	"testing"

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
