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
