package pipeline

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/render"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/xds/translate"
)

var verRe = regexp.MustCompile(`(?m)^(\s+)version: [0-9a-f]{16}$`)

func TestZZGoldenOnlyVersions(t *testing.T) {
	ins, _ := filepath.Glob("../render/testdata/*.in.yaml")
	for _, in := range ins {
		snap, _, err := resource.Load(in)
		if err != nil {
			t.Fatal(err)
		}
		res := gatewayapi.Translate(snap, gatewayapi.Options{ControllerName: gatewayapi.DefaultControllerName, Now: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))})
		var xds []*translate.Resources
		for _, gw := range res.Gateways {
			r, err := translate.Translate(gw)
			if err != nil {
				t.Fatal(err)
			}
			xds = append(xds, r)
		}
		out, _ := render.Build(res, xds, render.Options{})
		b, _ := out.YAML()
		want, _ := os.ReadFile(strings.TrimSuffix(in, ".in.yaml") + ".out.yaml")
		g := verRe.ReplaceAllString(string(b), "${1}version: X")
		w := verRe.ReplaceAllString(string(want), "${1}version: X")
		if g != w {
			t.Errorf("%s differs beyond versions", in)
		}
	}
}
