package refs

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

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
	for _, obj := range []any{nil, (*gwv1.Gateway)(nil), (*gwv1.ListenerSet)(nil), &corev1.Service{}, &gwv1.Gateway{}} {
		if n := len(slices.Collect(Certificates(obj))); n != 0 {
			t.Errorf("Certificates(%T) = %d", obj, n)
		}
	}
}

func TestCACertificates(t *testing.T) {
	p := &gwv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "p"}}
	p.Spec.Validation.CACertificateRefs = []gwv1.LocalObjectReference{
		{Kind: "ConfigMap", Name: "ca"},
		{Group: GroupCertificates, Kind: KindClusterTrustBundle, Name: "bundle"},
		{Kind: "Secret", Name: "s"},
	}
	want := []Object{{"", KindConfigMap, "apps", "ca"}, {GroupCertificates, KindClusterTrustBundle, "", "bundle"}, {"", KindSecret, "apps", "s"}}
	if got := slices.Collect(CACertificates(p)); !slices.Equal(got, want) {
		t.Errorf("CACertificates(BackendTLSPolicy) = %+v, want %+v", got, want)
	}
	g := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw"}}
	if n := len(slices.Collect(CACertificates(g))); n != 0 {
		t.Errorf("a Gateway without spec.tls: %d references", n)
	}
	g.Spec.TLS = &gwv1.GatewayTLSConfig{Frontend: &gwv1.FrontendTLSConfig{
		Default: gwv1.TLSConfig{Validation: &gwv1.FrontendTLSValidation{CACertificateRefs: []gwv1.ObjectReference{
			{Kind: "ConfigMap", Name: "a"},
			{Kind: "ConfigMap", Name: "b", Namespace: ptr.To(gwv1.Namespace("certs"))},
		}}},
		PerPort: []gwv1.TLSPortConfig{
			{Port: 8443},
			{Port: 9443, TLS: gwv1.TLSConfig{Validation: &gwv1.FrontendTLSValidation{CACertificateRefs: []gwv1.ObjectReference{
				{Group: GroupCertificates, Kind: KindClusterTrustBundle, Name: "ctb", Namespace: ptr.To(gwv1.Namespace("x"))},
			}}}},
		},
	}}
	want = []Object{{"", KindConfigMap, "infra", "a"}, {"", KindConfigMap, "certs", "b"}, {GroupCertificates, KindClusterTrustBundle, "", "ctb"}}
	if got := slices.Collect(CACertificates(g)); !slices.Equal(got, want) {
		t.Errorf("CACertificates(Gateway) = %+v, want %+v", got, want)
	}
	for _, obj := range []any{nil, (*gwv1.Gateway)(nil), (*gwv1.BackendTLSPolicy)(nil), &corev1.Service{}} {
		if n := len(slices.Collect(CACertificates(obj))); n != 0 {
			t.Errorf("CACertificates(%T) = %d", obj, n)
		}
	}
}
