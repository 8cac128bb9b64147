package render_test

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/render"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/resource/load"
	"github.com/portico-dev/portico/internal/xds/translate"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/*.out.yaml and testdata/supported-features.yaml from the current output")

// minGoldenCases guards against cases silently disappearing.
const minGoldenCases = 45

// TestGolden translates every testdata/*.in.yaml and compares the rendered
// YAML with testdata/<case>.out.yaml. Run with -update to rewrite the out
// files, then review the diff.
//
// The supportedFeatures of a GatewayClass are left out of the cases when
// they are exactly the features Portico claims: the case prints the marker
// elidedFeatures instead, and TestGoldenSupportedFeatures prints the list
// once, in testdata/supported-features.yaml, so that claiming a new feature
// rewrites one golden rather than every one. A class whose list differs in
// any way (a feature more or less, another order, none) is printed in
// full, and fails its case.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.in.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) < minGoldenCases {
		t.Fatalf("found %d golden cases, want at least %d", len(inputs), minGoldenCases)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			snap, warnings, err := load.Paths(in)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			for _, w := range warnings {
				t.Errorf("load warning: %s", w)
			}
			got, xds := translateAll(t, snap)
			checkResources(t, xds)

			// Determinism: the same objects read in the opposite document
			// order must render to the same bytes.
			again, _ := translateAll(t, loadReversed(t, in))
			if !bytes.Equal(got, again) {
				t.Errorf("output depends on document order:\n%s", goldenDiff(got, again))
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
				t.Fatalf("%v (run go test ./internal/render -run TestGolden -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the output (-want +got):\n%s", out, goldenDiff(want, got))
			}
		})
	}
}

// translateAll runs the whole pipeline of `portico translate` on snap and
// returns the rendered YAML and the per-Gateway resources.
func translateAll(t *testing.T, snap *resource.Snapshot) ([]byte, []*translate.Resources) {
	t.Helper()
	res := gatewayapi.Translate(snap, gatewayapi.Options{
		ControllerName: gatewayapi.DefaultControllerName,
	})
	var xds []*translate.Resources
	for _, gw := range res.Gateways {
		r, err := translate.Translate(gw)
		if err != nil {
			t.Fatalf("translate %s: %v", gw.Key(), err)
		}
		xds = append(xds, r)
	}
	out, err := render.Build(res, xds, render.Options{})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	elideSupportedFeatures(out.Statuses)
	b, err := out.YAML()
	if err != nil {
		t.Fatalf("yaml: %v", err)
	}
	return b, xds
}

// elidedFeatures is what the goldens print for the supportedFeatures of
// a GatewayClass that are exactly gatewayapi.SupportedFeatures().
const elidedFeatures = "the list of supported-features.yaml"

// supportedFeaturesGolden holds the list of features every accepted
// GatewayClass of ours reports, which the cases leave out.
var supportedFeaturesGolden = filepath.Join("testdata", "supported-features.yaml")

// classStatusElided renders a GatewayClass status with its supportedFeatures
// replaced by elidedFeatures: the field of the outer struct hides the one of
// the embedded status, whose other fields (conditions, and any field a
// later API version adds) render as they are, in their order.
type classStatusElided struct {
	*gwv1.GatewayClassStatus
	SupportedFeatures string `json:"supportedFeatures"`
}

// elideSupportedFeatures replaces, in the rendered statuses, the
// supportedFeatures of each GatewayClass that are exactly those Portico
// claims (gatewayapi.SupportedFeatures, in its order) by elidedFeatures.
// Any other list is left to be printed in full.
func elideSupportedFeatures(objs []render.StatusObject) {
	claimed := gatewayapi.SupportedFeatures()
	for i := range objs {
		st, ok := objs[i].Status.(*gwv1.GatewayClassStatus)
		if ok && objs[i].Kind == resource.KindGatewayClass.String() && slices.Equal(st.SupportedFeatures, claimed) {
			objs[i].Status = classStatusElided{st, elidedFeatures}
		}
	}
}

// TestGoldenSupportedFeatures renders the supportedFeatures of an accepted
// GatewayClass of ours, in full, and compares them with
// testdata/supported-features.yaml (rewritten by -update): the list the
// other goldens leave out.
func TestGoldenSupportedFeatures(t *testing.T) {
	snap := resource.New()
	snap.GatewayClasses.Set("portico", &gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: "portico", Generation: 1},
		Spec:       gwv1.GatewayClassSpec{ControllerName: gatewayapi.DefaultControllerName},
	})
	res := gatewayapi.Translate(snap.Build(), gatewayapi.Options{ControllerName: gatewayapi.DefaultControllerName})
	st := res.StatusSet.Get(resource.KindGatewayClass, "", "portico")
	if st == nil || st.GatewayClass == nil || len(st.GatewayClass.Conditions) == 0 || st.GatewayClass.Conditions[0].Status != metav1.ConditionTrue {
		t.Fatalf("the GatewayClass is not accepted: %+v", st)
	}
	if !slices.Equal(st.GatewayClass.SupportedFeatures, gatewayapi.SupportedFeatures()) {
		t.Errorf("an accepted GatewayClass reports %v, not gatewayapi.SupportedFeatures(): every golden would print its list", st.GatewayClass.SupportedFeatures)
	}
	got, err := render.YAML(struct {
		SupportedFeatures []gwv1.SupportedFeature `json:"supportedFeatures"`
	}{st.GatewayClass.SupportedFeatures})
	if err != nil {
		t.Fatal(err)
	}
	if *updateGolden {
		if err := os.WriteFile(supportedFeaturesGolden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(supportedFeaturesGolden)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/render -run TestGoldenSupportedFeatures -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output (-want +got):\n%s", supportedFeaturesGolden, goldenDiff(want, got))
	}
}

// The goldens leave out only the list of TestGoldenSupportedFeatures: a
// class reporting another list, or no list, prints it, and nothing else of
// a status is left out.
func TestElideSupportedFeaturesOnlyTheClaimedList(t *testing.T) {
	claimed := gatewayapi.SupportedFeatures()
	if len(claimed) < 2 {
		t.Fatalf("%d features claimed", len(claimed))
	}
	reordered := slices.Clone(claimed)
	reordered[0], reordered[1] = reordered[1], reordered[0]
	cond := []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted"}}
	class := func(features []gwv1.SupportedFeature) render.StatusObject {
		return render.StatusObject{Kind: "GatewayClass", Metadata: render.Metadata{Name: "c"},
			Status: &gwv1.GatewayClassStatus{Conditions: cond, SupportedFeatures: features}}
	}
	for _, tc := range []struct {
		name   string
		obj    render.StatusObject
		elided bool
	}{
		{"claimed", class(claimed), true},
		{"one less", class(claimed[1:]), false},
		{"one more", class(append(slices.Clone(claimed), gwv1.SupportedFeature{Name: "Extra"})), false},
		{"reordered", class(reordered), false},
		{"none", class(nil), false},
		{"a Gateway", render.StatusObject{Kind: "Gateway", Status: &gwv1.GatewayStatus{}}, false},
	} {
		objs := []render.StatusObject{tc.obj}
		elideSupportedFeatures(objs)
		b, err := render.YAML(struct {
			Statuses []render.StatusObject `json:"statuses"`
		}{objs})
		if err != nil {
			t.Fatal(err)
		}
		out := string(b)
		if got := strings.Contains(out, elidedFeatures); got != tc.elided {
			t.Errorf("%s: elided %v, want %v:\n%s", tc.name, got, tc.elided, out)
		}
		if tc.obj.Kind == "GatewayClass" && !strings.Contains(out, "reason: Accepted") {
			t.Errorf("%s: the conditions are left out:\n%s", tc.name, out)
		}
		if !tc.elided && tc.obj.Kind == "GatewayClass" && len(tc.obj.Status.(*gwv1.GatewayClassStatus).SupportedFeatures) > 0 && !strings.Contains(out, "- name: "+string(claimed[1].Name)+"\n") {
			t.Errorf("%s: the list is not printed in full:\n%s", tc.name, out)
		}
	}
}

// checkResources requires every resource to pass its proto validation and
// every Gateway's snapshot to be consistent.
func checkResources(t *testing.T, xds []*translate.Resources) {
	t.Helper()
	for _, r := range xds {
		for kind, rs := range map[string][]types.Resource{
			"listener": r.Listeners, "route": r.Routes(), "cluster": r.Clusters,
			"endpoint": r.Endpoints, "secret": r.Secrets,
		} {
			for i, res := range rs {
				res, err := translate.Decode(res) // validate route tables in full
				if err != nil {
					t.Fatalf("%s: %s %d: %v", r.Gateway, kind, i, err)
				}
				v, ok := res.(interface{ ValidateAll() error })
				if !ok {
					t.Errorf("%s: %s %d (%T) has no ValidateAll", r.Gateway, kind, i, res)
					continue
				}
				if err := v.ValidateAll(); err != nil {
					t.Errorf("%s: %s %d: %v", r.Gateway, kind, i, err)
				}
			}
		}
		snap, err := r.Snapshot()
		if err != nil {
			t.Errorf("%s: snapshot: %v", r.Gateway, err)
			continue
		}
		if err := snap.Consistent(); err != nil {
			t.Errorf("%s: snapshot not consistent: %v", r.Gateway, err)
		}
	}
}

// loadReversed loads file with its YAML documents in reverse order.
func loadReversed(t *testing.T, file string) *resource.Snapshot {
	t.Helper()
	docs := splitDocuments(t, file)
	var buf bytes.Buffer
	for i := len(docs) - 1; i >= 0; i-- {
		buf.WriteString("---\n")
		buf.Write(docs[i])
		if !bytes.HasSuffix(docs[i], []byte("\n")) {
			buf.WriteByte('\n')
		}
	}
	snap := resource.New()
	if _, err := load.AddYAML(snap, file+" (reversed)", buf.Bytes()); err != nil {
		t.Fatalf("load reversed: %v", err)
	}
	return snap.Build()
}

func splitDocuments(t *testing.T, file string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("split %s: %v", file, err)
		}
		docs = append(docs, doc)
	}
}

// goldenDiff is a compact unified-style diff: the common leading and trailing
// lines are dropped and what differs in between is shown with a little
// context, at most maxDiffLines lines of each side.
func goldenDiff(want, got []byte) string {
	const context, maxDiffLines = 3, 40
	a := strings.Split(string(want), "\n")
	b := strings.Split(string(got), "\n")
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var sb strings.Builder
	start := max(pre-context, 0)
	fmt.Fprintf(&sb, "@@ -%d,%d +%d,%d @@\n", pre+1, len(a)-pre-suf, pre+1, len(b)-pre-suf)
	for _, l := range a[start:pre] {
		sb.WriteString("  " + l + "\n")
	}
	side := func(prefix string, lines []string) {
		for i, l := range lines {
			if i == maxDiffLines {
				fmt.Fprintf(&sb, "%s… %d more lines\n", prefix, len(lines)-i)
				break
			}
			sb.WriteString(prefix + " " + l + "\n")
		}
	}
	side("-", a[pre:len(a)-suf])
	side("+", b[pre:len(b)-suf])
	for _, l := range a[len(a)-suf : min(len(a)-suf+context, len(a))] {
		sb.WriteString("  " + l + "\n")
	}
	return sb.String()
}
