// Package install tests Portico's install manifests: the Helm chart under
// charts/portico, the rendered install.yaml (a golden file of the chart),
// and that the controller works with exactly the chart's RBAC.
package install

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Namespace is the release namespace of install.yaml.
const Namespace = "portico-system"

// repoRoot is the repository's top directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// requireTool skips the test when a tool is unavailable, except in CI
// (CI=true), where it fails: these tests must never silently skip there.
func requireTool(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s: %v (CI=true: failing instead of skipping)", what, err)
	}
	t.Skipf("%s: %v", what, err)
}

var helmOnce struct {
	sync.Once
	path string
	err  error
}

// helm returns the path of the helm binary of hack/tools.sh (built once
// into the cache).
func helm(t testing.TB) string {
	t.Helper()
	helmOnce.Do(func() {
		cmd := exec.Command(filepath.Join(repoRoot(t), "hack", "tools.sh"), "helm")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			helmOnce.err = fmt.Errorf("hack/tools.sh helm: %v: %s", err, strings.TrimSpace(stderr.String()))
			return
		}
		helmOnce.path = strings.TrimSpace(string(out))
	})
	requireTool(t, "helm", helmOnce.err)
	return helmOnce.path
}

// readObjects parses a multi-document YAML stream; documents that are only
// comments are dropped.
func readObjects(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("document %d: no apiVersion, kind or name", i)
		}
		objs = append(objs, u)
	}
}

var installOnce struct {
	sync.Once
	objs []*unstructured.Unstructured
	err  error
}

// installObjects are the objects of the committed install.yaml.
func installObjects(t testing.TB) []*unstructured.Unstructured {
	t.Helper()
	installOnce.Do(func() {
		data, err := os.ReadFile(filepath.Join(repoRoot(t), "install.yaml"))
		if err != nil {
			installOnce.err = err
			return
		}
		installOnce.objs, installOnce.err = readObjects(data)
	})
	if installOnce.err != nil {
		t.Fatalf("install.yaml: %v", installOnce.err)
	}
	return installOnce.objs
}

// find returns the one object of install.yaml with this kind and name.
func find(t testing.TB, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var found *unstructured.Unstructured
	for _, o := range installObjects(t) {
		if o.GetKind() == kind && o.GetName() == name {
			if found != nil {
				t.Fatalf("install.yaml: two %s %q", kind, name)
			}
			found = o
		}
	}
	if found == nil {
		t.Fatalf("install.yaml: no %s %q", kind, name)
	}
	return found
}

// typed converts u into out, failing on fields out does not know (a typo
// in a template would otherwise be dropped silently by the API server).
func typed[T any](t testing.TB, u *unstructured.Unstructured, out *T) *T {
	t.Helper()
	if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}
