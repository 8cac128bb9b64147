package dataplane

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"POD_NAME": "edge-abc", "NS": "apps"}
	for in, want := range map[string]string{
		"$(POD_NAME)":         "edge-abc",
		"--node=$(POD_NAME)":  "--node=edge-abc",
		"$(NS)/$(POD_NAME)":   "apps/edge-abc",
		"$(UNSET)":            "$(UNSET)",
		"$$(POD_NAME)":        "$(POD_NAME)",
		"$$":                  "$",
		"cost: $5":            "cost: $5",
		"$(POD_NAME":          "$(POD_NAME",
		"trailing $":          "trailing $",
		"$(POD_NAME)$(NS)$$x": "edge-abcapps$x",
	} {
		if got := expand(in, vars); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestImageRepository(t *testing.T) {
	for in, want := range map[string]string{
		"docker.io/envoyproxy/envoy:distroless-v1.36.2":     "envoyproxy/envoy",
		"envoyproxy/envoy:v1.40.0":                          "envoyproxy/envoy",
		"envoyproxy/envoy@sha256:0123":                      "envoyproxy/envoy",
		"registry.k8s.io/gateway-api/echo-basic:v1.6.0-dev": "gateway-api/echo-basic",
		"localhost:5000/envoyproxy/envoy:dev":               "envoyproxy/envoy",
		"registry.k8s.io/coredns/coredns:v1.12.2":           "coredns/coredns",
	} {
		if got := imageRepository(in); got != want {
			t.Errorf("imageRepository(%q) = %q, want %q", in, got, want)
		}
	}
	if (&EnvoyRuntime{}).Handles("envoyproxy/envoy-dev:latest") {
		t.Error("envoyproxy/envoy-dev is not envoyproxy/envoy")
	}
}

func TestFieldRef(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "n", UID: "u", Labels: map[string]string{"app": "a"}},
		Spec:       corev1.PodSpec{NodeName: "node", ServiceAccountName: "sa"},
		Status:     corev1.PodStatus{PodIP: "10.244.0.9", HostIP: "127.0.0.1"},
	}
	for path, want := range map[string]string{
		"metadata.name": "p", "metadata.namespace": "n", "metadata.uid": "u", "spec.nodeName": "node",
		"spec.serviceAccountName": "sa", "status.podIP": "10.244.0.9", "status.hostIP": "127.0.0.1",
		"metadata.labels['app']": "a", "metadata.labels['none']": "",
	} {
		got, err := fieldRef(pod, path)
		if err != nil || got != want {
			t.Errorf("fieldRef(%s) = %q, %v; want %q", path, got, err, want)
		}
	}
	if _, err := fieldRef(pod, "status.phase"); err == nil {
		t.Error("an unsupported fieldRef was accepted")
	}
}

func TestVolumeFiles(t *testing.T) {
	data := map[string][]byte{"a": []byte("1"), "b": []byte("2")}
	if got, _ := volumeFiles(data, nil); len(got) != 2 {
		t.Errorf("all keys: %v", got)
	}
	got, err := volumeFiles(data, []corev1.KeyToPath{{Key: "a", Path: "renamed"}})
	if err != nil || len(got) != 1 || string(got["renamed"]) != "1" {
		t.Errorf("items: %v, %v", got, err)
	}
	for _, items := range [][]corev1.KeyToPath{{{Key: "x", Path: "x"}}, {{Key: "a", Path: "sub/a"}}} {
		if _, err := volumeFiles(data, items); err == nil {
			t.Errorf("items %v were accepted", items)
		}
	}
}

// The container log is in the CRI format kwok reads: one entry per line,
// partial writes joined, each stamped and tagged with its stream.
func TestCRILog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.log")
	l, err := openCRILog(path)
	if err != nil {
		t.Fatal(err)
	}
	out, errs := l.stream("stdout"), l.stream("stderr")
	for _, w := range []struct {
		s interface{ Write([]byte) (int, error) }
		b string
	}{{out, "hello "}, {out, "world\nsecond"}, {errs, "oops\n"}, {out, " line\n"}} {
		if _, err := w.s.Write([]byte(w.b)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	b, _ := os.ReadFile(path)
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	want := []string{"stdout F hello world", "stderr F oops", "stdout F second line"}
	re := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z (.*)$`)
	if len(lines) != len(want) {
		t.Fatalf("log:\n%s", b)
	}
	for i, line := range lines {
		m := re.FindSubmatch(line)
		if m == nil || string(m[2]) != want[i] {
			t.Errorf("line %d = %q, want <time> %s", i, line, want[i])
		}
	}
}
