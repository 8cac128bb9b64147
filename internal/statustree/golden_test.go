package statustree_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/resource/load"
	"github.com/portico-dev/portico/internal/statustree"
)

var update = flag.Bool("update", false, "rewrite testdata/*.out.txt from the current output")

// minCases guards against cases silently disappearing.
const minCases = 8

// TestGolden translates every testdata/*.in.yaml as `portico status -f`
// does, builds the tree from the desired statuses and compares its text
// with testdata/<case>.out.txt. Leading comment lines "# route: KIND/NS/NAME",
// "# gateway: NS/NAME", "# namespace: NS", "# unreadable: NS" and
// "# unknown-classes: true" set the options; with "# source: objects" the
// statuses are those the objects carry (as read from a cluster). Run with
// -update to rewrite the out files, then review the diff.
func TestGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "*.in.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) < minCases {
		t.Fatalf("found %d cases, want at least %d", len(inputs), minCases)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".in.yaml")
		t.Run(name, func(t *testing.T) {
			tree := build(t, in)
			var got bytes.Buffer
			if err := statustree.Text(&got, tree); err != nil {
				t.Fatal(err)
			}
			checkJSON(t, tree)

			out := strings.TrimSuffix(in, ".in.yaml") + ".out.txt"
			if *update {
				if err := os.WriteFile(out, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("%s differs (run with -update to rewrite it):\n--- want\n%s\n--- got\n%s", out, want, got.Bytes())
			}
		})
	}
}

// build loads and translates one case and builds its tree.
func build(t *testing.T, path string) *statustree.Tree {
	t.Helper()
	snap, warnings, err := load.Paths(path)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	for _, w := range warnings {
		t.Errorf("load warning: %s", w)
	}
	opts, objects := caseOptions(t, path)
	if objects {
		return statustree.Build(snap, statustree.ObjectStatuses(snap), opts)
	}
	res := gatewayapi.Translate(snap, gatewayapi.Options{ControllerName: gatewayapi.DefaultControllerName})
	return statustree.Build(snap, statustree.DesiredStatuses(res.StatusSet), opts)
}

// caseOptions reads the options of a case from its leading comments, and
// whether its statuses are those of the objects ("# source: objects")
// rather than a translation's.
func caseOptions(t *testing.T, path string) (opts statustree.Options, objects bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "# ")
		if !ok {
			break
		}
		key, value, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		switch key {
		case "route":
			parts := strings.Split(value, "/")
			kind, ok := resource.KindNamed("gateway.networking.k8s.io", parts[0])
			if len(parts) != 3 || !ok {
				t.Fatalf("bad route option %q", value)
			}
			opts.Route = &resource.Ref{Kind: kind, Key: resource.Key{Namespace: parts[1], Name: parts[2]}}
		case "gateway":
			ns, name, _ := strings.Cut(value, "/")
			opts.Gateway = &resource.Key{Namespace: ns, Name: name}
		case "namespace":
			opts.Namespace = value
		case "unreadable":
			opts.Unreadable = map[string]bool{value: true}
		case "unknown-classes":
			opts.UnknownClasses = value == "true"
		case "source":
			objects = value == "objects"
		}
	}
	return opts, objects
}

// checkJSON checks that the JSON of tree reads back as the same tree.
func checkJSON(t *testing.T, tree *statustree.Tree) {
	t.Helper()
	var buf bytes.Buffer
	if err := statustree.JSON(&buf, tree); err != nil {
		t.Fatal(err)
	}
	var back statustree.Tree
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("JSON does not decode: %v\n%s", err, buf.Bytes())
	}
	if !reflect.DeepEqual(&back, tree) {
		t.Errorf("JSON does not read back as the tree:\n%s", buf.Bytes())
	}
}
