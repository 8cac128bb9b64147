package infra

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/proxyspec"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/render/*.out.yaml from the current output")

// minRenderCases guards against cases silently disappearing.
const minRenderCases = 15

// goldenParams are the controller settings of every golden rendering.
var goldenParams = Params{XDSAddress: "portico-xds.portico-system.svc:18000", XDSServerName: "portico-xds.portico-system.svc",
	AgentImage: "ghcr.io/portico-dev/portico:test"}

// TestRenderGolden renders every testdata/render/*.in.yaml (a Gateway, its
// listener ports being the proxies' ports — over UDP for UDP listeners,
// over TCP for the others — and optionally a ProxyConfig
// whose spec is the effective one) and compares the apply configurations,
// as YAML, with testdata/render/<case>.out.yaml; a refused spec's output
// is its error. The ConfigMap's files are elided (the bootstrap has its
// own tests). Run with -update to rewrite the out files, then review the
// diff.
func TestRenderGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "render", "*.in.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) < minRenderCases {
		t.Fatalf("found %d golden cases, want at least %d", len(inputs), minRenderCases)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			gw, pc := loadRenderCase(t, in)
			tcp, udp := listenerPorts(gw)
			got := renderYAML(t, proxyspec.Spec{Gateway: gw, Proxy: pc, Ports: tcp, UDPPorts: udp})
			// Determinism: the ports in another order render the same.
			again := renderYAML(t, proxyspec.Spec{Gateway: gw, Proxy: pc, Ports: reversed(tcp), UDPPorts: reversed(udp)})
			if !bytes.Equal(got, again) {
				t.Errorf("output depends on the order of the ports:\n%s\n---- again:\n%s", got, again)
			}
			out := strings.TrimSuffix(in, ".in.yaml") + ".out.yaml"
			if *updateGolden {
				if err := os.WriteFile(out, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/infra -run TestRenderGolden -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the output:\n%s", out, lineDiff(string(want), string(got)))
			}
		})
	}
}

// loadRenderCase reads one Gateway and at most one ProxyConfig, strictly.
func loadRenderCase(t *testing.T, path string) (*gwv1.Gateway, v1alpha1.ProxyConfigSpec) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var gw *gwv1.Gateway
	var pc *v1alpha1.ProxyConfig
	for i, doc := range strings.Split("\n"+string(b), "\n---\n") {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		switch {
		case head.Kind == "Gateway" && gw == nil:
			gw = &gwv1.Gateway{}
			err = yaml.UnmarshalStrict([]byte(doc), gw)
		case head.Kind == v1alpha1.Kind && pc == nil:
			pc = &v1alpha1.ProxyConfig{}
			err = yaml.UnmarshalStrict([]byte(doc), pc)
		default:
			t.Fatalf("document %d: kind %q: want one Gateway and at most one ProxyConfig", i, head.Kind)
		}
		if err != nil {
			t.Fatalf("document %d (%s): %v", i, head.Kind, err)
		}
	}
	if gw == nil {
		t.Fatal("no Gateway")
	}
	if pc == nil {
		return gw, v1alpha1.ProxyConfigSpec{}
	}
	return gw, pc.Spec
}

func stripComments(doc string) string {
	var out []string
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// listenerPorts are the Gateway's listener ports as the translator hands
// them over: UDP listeners' in udp, all others' in tcp.
func listenerPorts(gw *gwv1.Gateway) (tcp, udp []int32) {
	var t, u []uint32
	for _, l := range gw.Spec.Listeners {
		if l.Protocol == gwv1.UDPProtocolType {
			u = append(u, uint32(l.Port))
		} else {
			t = append(t, uint32(l.Port))
		}
	}
	return proxyspec.Ports(t), proxyspec.Ports(u)
}

func reversed(s []int32) []int32 {
	s = slices.Clone(s)
	slices.Reverse(s)
	return s
}

// renderYAML is the golden form of RenderSpec's result.
func renderYAML(t *testing.T, s proxyspec.Spec) []byte {
	t.Helper()
	objs, err := RenderSpec(s, goldenParams)
	if err != nil {
		return []byte("error: " + err.Error() + "\n")
	}
	for k := range objs.ConfigMap.Data {
		objs.ConfigMap.Data[k] = "(elided)"
	}
	list := []any{objs.ServiceAccount, objs.ConfigMap, objs.Deployment, objs.Service, objs.PodDisruptionBudget}
	if objs.HorizontalPodAutoscaler != nil {
		list = append(list, objs.HorizontalPodAutoscaler)
	}
	var buf bytes.Buffer
	for i, o := range list {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatalf("object %d: %v", i, err)
		}
		if buf.Len() > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(b)
	}
	return buf.Bytes()
}

// lineDiff lists the lines that differ, with their line numbers.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	shown := 0
	for i := 0; i < max(len(w), len(g)) && shown < 40; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n- %s\n+ %s\n", i+1, wl, gl)
			shown++
		}
	}
	return b.String()
}
