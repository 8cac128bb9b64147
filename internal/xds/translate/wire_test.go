package translate

import (
	"testing"

	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
)

// checkWire checks that each route configuration of res is handed to the
// xDS cache in a wire form whose encoding (as the cache encodes it)
// decodes to the translated configuration.
func checkWire(t *testing.T, res *Resources) {
	t.Helper()
	changed, _ := Diff(nil, res, resourcev3.RouteType)
	if len(changed) != len(res.Routes) {
		t.Fatalf("%d route configurations to send, want %d", len(changed), len(res.Routes))
	}
	for i, w := range changed {
		if w == res.Routes[i] {
			t.Errorf("%s: no wire form", cachev3.GetResourceName(w))
			continue
		}
		b, err := cachev3.MarshalResource(w)
		if err != nil {
			t.Fatal(err)
		}
		got := w.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(b, got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, res.Routes[i]) {
			t.Errorf("%s: the wire form decodes to another configuration", cachev3.GetResourceName(w))
		}
		if want, _ := cachev3.MarshalResource(res.Routes[i]); len(want) != len(b) {
			t.Errorf("%s: wire form of %d bytes, the configuration encodes to %d", cachev3.GetResourceName(w), len(b), len(want))
		}
	}
}

func TestWireForms(t *testing.T) {
	checkWire(t, mustTranslate(t, fullGateway()))
	checkWire(t, mustTranslate(t, generatedGateway(300)))
	split, err := NewTranslatorWith(Options{RouteSplit: RouteSplitHostname}).Translate(splitGateway())
	if err != nil {
		t.Fatal(err)
	}
	if len(split.ScopedRoutes) == 0 {
		t.Fatal("no scoped routes")
	}
	checkWire(t, split)
}
