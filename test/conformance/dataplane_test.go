package conformance

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/gateway-api/conformance"
	"sigs.k8s.io/gateway-api/conformance/tests"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/internal/testenv"
	"github.com/portico-dev/portico/internal/testenv/dataplane"
)

// startDataPlane runs the kwok cluster's Pods (dataplane.New) with the
// suite's backend, echo-basic, built from the pinned module
// (testenv.EchoBinary), and stops it when the test ends.
func startDataPlane(t *testing.T, cfg *rest.Config) *dataplane.DataPlane {
	t.Helper()
	echo, err := testenv.EchoBinary()
	if err != nil {
		t.Fatal(err)
	}
	w := logWriter(t)
	dp, err := dataplane.New(dataplane.Options{
		Config:   cfg,
		Runtimes: []dataplane.Runtime{dataplane.EchoBasic(echo)},
		Logf:     func(format string, args ...any) { fmt.Fprintf(w, format, args...) },
	})
	if err != nil {
		t.Fatalf("data plane: %v", err)
	}
	t.Cleanup(func() {
		stopping := time.Now()
		if err := dp.Close(); err != nil {
			t.Errorf("stopping the data plane (%s): %v", time.Since(stopping).Round(time.Millisecond), err)
			return
		}
		t.Logf("data plane stopped in %s", time.Since(stopping).Round(time.Millisecond))
	})
	return dp
}

// reportUnsupported logs the Pods the data plane did not run, with the
// Services that select them and the tests whose routes send to those
// Services (claimed or not), and returns the same as lines for the
// report.
func reportUnsupported(t *testing.T, dp *dataplane.DataPlane) []string {
	claimed := claimedFeatures()
	var lines []string
	for _, u := range dp.Unsupported() {
		var names []string
		for _, svc := range u.Services {
			names = append(names, u.Namespace+"/"+svc)
		}
		var blocked []string
		for _, ct := range tests.ConformanceTests {
			refs := backendRefs(t, ct.Manifests)
			if !slices.ContainsFunc(names, refs.Has) {
				continue
			}
			what := "claimed"
			if !claimed.HasAll(ct.Features...) {
				what = "not claimed"
			}
			blocked = append(blocked, fmt.Sprintf("%s (%s)", ct.ShortName, what))
		}
		sort.Strings(blocked)
		if len(blocked) == 0 {
			blocked = []string{"no test routes to it"}
		}
		line := fmt.Sprintf("Pod %s/%s, image %s: %s; Services %s; tests: %s",
			u.Namespace, u.Pod, u.Image, u.Reason, strings.Join(names, ", "), strings.Join(blocked, ", "))
		t.Logf("data plane did not run %s", line)
		lines = append(lines, line)
	}
	return lines
}

// backendRefs are the namespace/name of every backendRef of the routes in
// the suite's manifest files.
func backendRefs(t *testing.T, files []string) sets.Set[string] {
	out := sets.New[string]()
	for _, f := range files {
		data, err := conformance.Manifests.ReadFile(f)
		if err != nil {
			t.Logf("manifest %s: %v", f, err)
			continue
		}
		dec := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := dec.Read()
			if err != nil {
				break
			}
			var obj map[string]any
			if yaml.Unmarshal(doc, &obj) != nil || obj == nil {
				continue
			}
			ns := "default"
			if md, ok := obj["metadata"].(map[string]any); ok {
				if n, ok := md["namespace"].(string); ok && n != "" {
					ns = n
				}
			}
			collectBackendRefs(obj["spec"], ns, out)
		}
	}
	return out
}

func collectBackendRefs(v any, ns string, out sets.Set[string]) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if k == "backendRefs" {
				refs, _ := x.([]any)
				for _, r := range refs {
					m, _ := r.(map[string]any)
					name, _ := m["name"].(string)
					rns, _ := m["namespace"].(string)
					if rns == "" {
						rns = ns
					}
					if name != "" {
						out.Insert(rns + "/" + name)
					}
				}
				continue
			}
			collectBackendRefs(x, ns, out)
		}
	case []any:
		for _, x := range v {
			collectBackendRefs(x, ns, out)
		}
	}
}
