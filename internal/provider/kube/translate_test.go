package kube

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/incremental"
	"github.com/portico-dev/portico/internal/render"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/testenv/workload"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// pushWorld brings the fake cluster from world old (nil: empty) to cur,
// through the handlers: the objects that differ get a new
// resourceVersion (and generation, as the API server does on a spec
// change) or are deleted.
func pushWorld(t *testing.T, f *fakeCluster, old, cur *resource.Snapshot, rv *int) {
	t.Helper()
	if old == nil {
		old = resource.New().Build()
	}
	for r := range resource.Diff(old, cur).Objects {
		obj := objectOf(cur, r)
		if obj == nil {
			f.remove(t, r.Kind, r.Key)
			continue
		}
		obj = obj.DeepCopyObject().(client.Object)
		*rv++
		obj.SetResourceVersion(fmt.Sprint(*rv))
		obj.SetGeneration(int64(*rv))
		f.apply(t, obj)
	}
}

// objectOf returns the object r names in s, or nil.
func objectOf(s *resource.Snapshot, r resource.Ref) client.Object {
	get := func(o client.Object, ok bool) client.Object {
		if !ok {
			return nil
		}
		return o
	}
	switch r.Kind {
	case resource.KindGatewayClass:
		o, ok := s.GatewayClasses.Get(r.Key.Name)
		return get(o, ok)
	case resource.KindGateway:
		o, ok := s.Gateways.Get(r.Key)
		return get(o, ok)
	case resource.KindListenerSet:
		o, ok := s.ListenerSets.Get(r.Key)
		return get(o, ok)
	case resource.KindHTTPRoute:
		o, ok := s.HTTPRoutes.Get(r.Key)
		return get(o, ok)
	case resource.KindGRPCRoute:
		o, ok := s.GRPCRoutes.Get(r.Key)
		return get(o, ok)
	case resource.KindReferenceGrant:
		o, ok := s.ReferenceGrants.Get(r.Key)
		return get(o, ok)
	case resource.KindService:
		o, ok := s.Services.Get(r.Key)
		return get(o, ok)
	case resource.KindEndpointSlice:
		o, ok := s.EndpointSlices.Get(r.Key)
		return get(o, ok)
	case resource.KindSecret:
		o, ok := s.Secrets.Get(r.Key)
		return get(o, ok)
	case resource.KindNamespace:
		o, ok := s.Namespaces.Get(r.Key.Name)
		return get(o, ok)
	case resource.KindProxyConfig:
		o, ok := s.ProxyConfigs.Get(r.Key)
		return get(o, ok)
	case resource.KindDeployment:
		o, ok := s.Deployments.Get(r.Key)
		return get(o, ok)
	}
	return nil
}

// rendered is the output (statuses and xDS) of a translation result.
func rendered(t *testing.T, res *gatewayapi.Result) []byte {
	t.Helper()
	var xds []*translate.Resources
	for _, gw := range res.Gateways {
		r, err := translate.Translate(gw)
		if err != nil {
			t.Fatal(err)
		}
		xds = append(xds, r)
	}
	out, err := render.Build(res, xds, render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := out.YAML()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestIncrementalTranslationOfSnapshots is the provider's contract with
// its consumer: the incremental translator, fed the provider's snapshots
// (and so their Changes), gives what a full translation of a snapshot
// rebuilt from scratch gives, after every random change of every kind.
func TestIncrementalTranslationOfSnapshots(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	f := newFakeCluster(t)
	opts := gatewayapi.Options{ControllerName: workload.ControllerName}
	inc := incremental.New()
	world := workload.Rich(12)
	rv := 0
	pushWorld(t, f, nil, world, &rv)
	steps := 100
	if testing.Short() {
		steps = 25
	}
	modes := map[incremental.Mode]int{}
	for i := 0; i <= steps; i++ {
		desc := "initial"
		if i > 0 {
			next, d := workload.Change(world, rng)
			pushWorld(t, f, world, next, &rv)
			world, desc = next, d
		}
		snap, err := f.p.Snapshot(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		res, st := inc.Translate(snap, opts)
		modes[st.Mode]++
		want := rendered(t, gatewayapi.Translate(f.full(t), opts))
		if got := rendered(t, res); !bytes.Equal(got, want) {
			t.Fatalf("step %d (%s, %s): incremental translation of the snapshot differs from a full one", i, desc, st.Mode)
		}
	}
	if modes[incremental.ModeFull] != 1 {
		t.Errorf("translations by mode: %v, want one full", modes)
	}
	t.Logf("translations by mode: %v", modes)
}
