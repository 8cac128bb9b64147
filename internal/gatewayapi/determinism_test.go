package gatewayapi

import (
	"maps"
	"math/rand"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/testenv/workload"
)

// richObjects is a varied input: ListenerSets, HTTPS, GRPCRoutes,
// cross-namespace grants, conflicts and invalid rules.
func richObjects() []any {
	gw := allowListeners(gateway("infra", "gw",
		allowAll(httpL("http", 80, "")),
		allowAll(httpsL("https", 443, "*.example.com", "cert")),
		httpL("dup", 80, ""),
	), gwv1.NamespacesFromAll, nil)
	ls1 := listenerSet("apps", "ls1", 5, "infra", "gw", httpL("web", 8080, "web.example.com"))
	ls2 := listenerSet("apps", "ls2", 5, "infra", "gw", httpL("web", 8080, "web.example.com"), httpL("alt", 8081, ""))
	ref := gwv1.ParentReference{Name: "gw", Namespace: ptr(gwv1.Namespace("infra"))}
	cross := backend("db", 80)
	cross.Namespace = ptr(gwv1.Namespace("data"))
	r1 := httpRoute("apps", "r1", []gwv1.ParentReference{ref}, []string{"a.example.com", "b.example.com"},
		gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/a"), exactMatch("/a/x")}, BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80), cross}},
		gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{regexMatch("(")}},
	)
	r2 := httpRoute("apps", "r2", []gwv1.ParentReference{ref, {Kind: ptr(gwv1.Kind("ListenerSet")), Name: "ls2"}}, nil,
		gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{prefixMatch("/a")}, BackendRefs: []gwv1.HTTPBackendRef{backend("web", 80), backend("missing", 80)}})
	g1 := grpcRoute("apps", "g1", 1, []gwv1.ParentReference{ref}, []string{"grpc.example.com"},
		gwv1.GRPCRouteRule{BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: backend("web", 80).BackendRef}}})
	return []any{
		gw, ls1, ls2, r1, r2, g1,
		tlsSecret("infra", "cert"),
		service("apps", "web", 80), service("data", "db", 80),
		slice("apps", "web", "web-a", 8080, "10.0.0.2", "10.0.0.1"), slice("apps", "web", "web-b", 8080, "10.0.0.3"),
		refGrant("data", "g", "HTTPRoute", "apps", "Service", nil),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps", Labels: map[string]string{"team": "apps"}}},
	}
}

// TestDeterminism translates the same objects inserted in different orders
// and checks the results are deeply equal.
func TestDeterminism(t *testing.T) {
	objs := richObjects()
	var first *Result
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 20; i++ {
		perm := rng.Perm(len(objs))
		shuffled := make([]any, len(objs))
		for j, p := range perm {
			shuffled[j] = objs[p]
		}
		res := translate(shuffled...)
		if first == nil {
			first = res
			if len(res.Gateways) != 1 || res.StatusSet.Len() < 6 {
				t.Fatalf("unexpected result: %d gateways, %d statuses", len(res.Gateways), res.StatusSet.Len())
			}
			continue
		}
		if !reflect.DeepEqual(first, res) {
			t.Fatalf("permutation %d gave a different result", i)
		}
	}
	// Statuses are sorted by kind, namespace and name.
	list := statusList(first)
	for i := 1; i < len(list); i++ {
		a, b := list[i-1], list[i]
		if a.Kind.String() > b.Kind.String() || (a.Kind == b.Kind && (a.Namespace > b.Namespace || (a.Namespace == b.Namespace && a.Name >= b.Name))) {
			t.Errorf("statuses not sorted: %s before %s", a.Key(), b.Key())
		}
	}
}

// TestTranslateDoesNotModifyInput compares the snapshot before and after.
func TestTranslateDoesNotModifyInput(t *testing.T) {
	snap := workload.Snapshot(50)
	before := deepCopySnapshot(snap)
	Translate(snap, Options{ControllerName: workload.ControllerName})
	if !reflect.DeepEqual(maps.Collect(before.HTTPRoutes.All()), maps.Collect(snap.HTTPRoutes.All())) ||
		!reflect.DeepEqual(maps.Collect(before.Gateways.All()), maps.Collect(snap.Gateways.All())) {
		t.Error("Translate modified its input")
	}
}

func deepCopySnapshot(s *resource.Snapshot) *resource.Snapshot {
	out := resource.New()
	for k, v := range s.HTTPRoutes.All() {
		out.HTTPRoutes.Set(k, v.DeepCopy())
	}
	for k, v := range s.Gateways.All() {
		out.Gateways.Set(k, v.DeepCopy())
	}
	return out
}

func TestNilAndEmptyInput(t *testing.T) {
	if res := Translate(nil, Options{}); res == nil || res.StatusSet.Len() != 0 {
		t.Errorf("nil snapshot: %+v", res)
	}
	if res := Translate(resource.New(), Options{ControllerName: testController}); res.StatusSet.Len() != 0 || len(res.Gateways) != 0 {
		t.Errorf("empty snapshot: %+v", res)
	}
	// No controller name: nothing is ours.
	if res := Translate(workload.Snapshot(3), Options{}); res.StatusSet.Len() != 0 {
		t.Errorf("empty controller name claimed %d objects", res.StatusSet.Len())
	}
}
