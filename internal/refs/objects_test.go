package refs

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func svc(ns, name string) Backend {
	return Backend{Object: Object{GroupCore, KindService, ns, name}}
}

func TestBackendsOfHTTPRoute(t *testing.T) {
	mirror := func(name string) gwv1.HTTPRouteFilter {
		return gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestMirror,
			RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name)}}}
	}
	r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "r"}}
	r.Spec.Rules = []gwv1.HTTPRouteRule{
		{
			Filters: []gwv1.HTTPRouteFilter{
				{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gwv1.HTTPHeaderFilter{}},
				mirror("rule-mirror"),
				{Type: gwv1.HTTPRouteFilterRequestMirror}, // without its field: nothing
			},
			BackendRefs: []gwv1.HTTPBackendRef{
				{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "a", Port: ptr.To(gwv1.PortNumber(80))}},
					Filters: []gwv1.HTTPRouteFilter{mirror("backend-mirror")}},
				{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "b", Namespace: ptr.To(gwv1.Namespace("other"))}}},
			},
		},
		{BackendRefs: []gwv1.HTTPBackendRef{
			{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "a", Port: ptr.To(gwv1.PortNumber(80))}}},
			{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "x", Kind: ptr.To(gwv1.Kind("Other"))}}},
		}},
	}
	a := svc("apps", "a")
	a.Port, a.HasPort = 80, true
	want := []Backend{
		svc("apps", "rule-mirror"),
		a, svc("apps", "backend-mirror"),
		svc("other", "b"),
		a, // duplicates kept
		{Object: Object{GroupCore, "Other", "apps", "x"}},
	}
	if got := slices.Collect(Backends(r)); !slices.Equal(got, want) {
		t.Errorf("Backends =\n%+v\nwant\n%+v", got, want)
	}
	// Stopping early is honoured.
	n := 0
	for range Backends(r) {
		n++
		if n == 2 {
			break
		}
	}
	if n != 2 {
		t.Errorf("early stop: %d", n)
	}
}

func TestBackendsOfGRPCRoute(t *testing.T) {
	mirror := func(name string) gwv1.GRPCRouteFilter {
		return gwv1.GRPCRouteFilter{Type: gwv1.GRPCRouteFilterRequestMirror,
			RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name)}}}
	}
	r := &gwv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "g"}}
	r.Spec.Rules = []gwv1.GRPCRouteRule{{
		Filters: []gwv1.GRPCRouteFilter{mirror("m")},
		BackendRefs: []gwv1.GRPCBackendRef{
			{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: "s"}}, Filters: []gwv1.GRPCRouteFilter{mirror("bm")}},
		},
	}}
	want := []Backend{svc("apps", "m"), svc("apps", "s"), svc("apps", "bm")}
	if got := slices.Collect(Backends(r)); !slices.Equal(got, want) {
		t.Errorf("Backends = %+v, want %+v", got, want)
	}
}

func TestCertificatesOf(t *testing.T) {
	tls := func(refs ...gwv1.SecretObjectReference) *gwv1.ListenerTLSConfig {
		return &gwv1.ListenerTLSConfig{CertificateRefs: refs}
	}
	g := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw"}}
	g.Spec.Listeners = []gwv1.Listener{
		{Name: "http"},
		{Name: "https", TLS: tls(gwv1.SecretObjectReference{Name: "a"}, gwv1.SecretObjectReference{Name: "b", Namespace: ptr.To(gwv1.Namespace("certs"))})},
		{Name: "other", TLS: tls(gwv1.SecretObjectReference{Name: "c", Kind: ptr.To(gwv1.Kind("ConfigMap"))})},
	}
	want := []Object{{"", KindSecret, "infra", "a"}, {"", KindSecret, "certs", "b"}, {"", "ConfigMap", "infra", "c"}}
	if got := slices.Collect(Certificates(g)); !slices.Equal(got, want) {
		t.Errorf("Certificates(Gateway) = %+v, want %+v", got, want)
	}
	ls := &gwv1.ListenerSet{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "ls"}}
	ls.Spec.Listeners = []gwv1.ListenerEntry{{Name: "x", TLS: tls(gwv1.SecretObjectReference{Name: "a"})}, {Name: "y"}}
	if got := slices.Collect(Certificates(ls)); !slices.Equal(got, []Object{{"", KindSecret, "apps", "a"}}) {
		t.Errorf("Certificates(ListenerSet) = %+v", got)
	}
}

func TestNoReferences(t *testing.T) {
	for _, obj := range []any{nil, (*gwv1.HTTPRoute)(nil), (*gwv1.GRPCRoute)(nil), (*gwv1.Gateway)(nil), (*gwv1.ListenerSet)(nil), &corev1.Service{}, &gwv1.Gateway{}} {
		if n := len(slices.Collect(Backends(obj))); n != 0 {
			t.Errorf("Backends(%T) = %d", obj, n)
		}
		if n := len(slices.Collect(Certificates(obj))); n != 0 {
			t.Errorf("Certificates(%T) = %d", obj, n)
		}
	}
}
