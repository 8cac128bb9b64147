package gatewayapi

import (
	"bytes"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/refs"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/testenv"
	"github.com/portico-dev/portico/internal/testenv/workload"
)

func configMap(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: data}
}

type recorded []resource.Ref

func (r *recorded) Read(_, ref resource.Ref) { *r = append(*r, ref) }

// The resolver reads ConfigMaps, Secrets and ClusterTrustBundles alike,
// keeps the certificates of the usable references (each once) and says of
// each other one why it is not.
func TestCABundle(t *testing.T) {
	other, _, err := testenv.SelfSignedCert("other.example")
	if err != nil {
		t.Fatal(err)
	}
	ca := workload.TestCertPEM
	secret := tlsSecret("apps", "ca-secret")
	secret.Data[caDataKey] = []byte(ca)
	snap := snapshot(
		configMap("apps", "ca", map[string]string{caDataKey: ca}),
		configMap("apps", "two", map[string]string{caDataKey: ca + "\n" + string(other)}),
		configMap("apps", "nokey", map[string]string{"other": ca}),
		configMap("apps", "garbage", map[string]string{caDataKey: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}),
		configMap("apps", "empty", map[string]string{caDataKey: "not PEM"}),
		configMap("certs", "remote", map[string]string{caDataKey: ca}),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "binary"}, BinaryData: map[string][]byte{caDataKey: []byte(ca)}},
		secret,
		&certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: "bundle"}, Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: string(other)}},
	)
	var rec recorded
	tr := newTranslator(snap, Options{ControllerName: testController}, &rec, newOneTranslation()).
		readingFor(resource.Ref{Kind: resource.KindGateway, Key: resource.Key{Namespace: "apps", Name: "gw"}})
	from := objRef{group: refs.GroupGateway, kind: "Gateway", namespace: "apps"}
	cm := func(ns, name string) refs.Object {
		return refs.Object{Kind: refs.KindConfigMap, Namespace: ns, Name: name}
	}
	ctb := refs.Object{Group: refs.GroupCertificates, Kind: refs.KindClusterTrustBundle, Name: "bundle"}

	type failure struct {
		cause caCause
		msg   string
	}
	for _, tc := range []struct {
		name  string
		refs  []refs.Object
		certs int // in the bundle
		fails []failure
	}{
		{"configmap", []refs.Object{cm("apps", "ca")}, 1, nil},
		{"binaryData", []refs.Object{cm("apps", "binary")}, 1, nil},
		{"secret", []refs.Object{{Kind: refs.KindSecret, Namespace: "apps", Name: "ca-secret"}}, 1, nil},
		{"cluster trust bundle", []refs.Object{ctb}, 1, nil},
		{"each certificate once", []refs.Object{cm("apps", "ca"), cm("apps", "two"), ctb}, 2, nil},
		{"missing", []refs.Object{cm("apps", "nope")}, 0, []failure{{caInvalid, "ConfigMap apps/nope does not exist"}}},
		{"missing bundle", []refs.Object{{Group: refs.GroupCertificates, Kind: refs.KindClusterTrustBundle, Name: "nope"}}, 0,
			[]failure{{caInvalid, "ClusterTrustBundle nope does not exist"}}},
		{"no key", []refs.Object{cm("apps", "nokey")}, 0, []failure{{caInvalid, "has no ca.crt"}}},
		{"unparsable", []refs.Object{cm("apps", "garbage")}, 0, []failure{{caInvalid, "invalid certificate"}}},
		{"not PEM", []refs.Object{cm("apps", "empty")}, 0, []failure{{caInvalid, "no PEM certificate"}}},
		{"kind", []refs.Object{{Group: "example.com", Kind: "Bundle", Namespace: "apps", Name: "x"}}, 0,
			[]failure{{caKindUnsupported, "example.com/Bundle is not a supported kind"}}},
		{"other namespace", []refs.Object{cm("certs", "remote")}, 0, []failure{{caNotPermitted, "no ReferenceGrant in namespace certs"}}},
		{"some usable", []refs.Object{cm("apps", "nope"), cm("apps", "ca")}, 1, []failure{{caInvalid, "does not exist"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := tr.caBundle(from, tc.refs)
			certs, _ := parseCertificates(res.pem)
			if len(certs) != tc.certs || (tc.certs == 0) != (res.pem == nil) {
				t.Errorf("%d certificates in %q, want %d", len(certs), res.pem, tc.certs)
			}
			if len(res.failures) != len(tc.fails) {
				t.Fatalf("failures %+v, want %+v", res.failures, tc.fails)
			}
			for i, f := range tc.fails {
				if got := res.failures[i]; got.cause != f.cause || !strings.Contains(got.message, f.msg) {
					t.Errorf("failure %d = %+v, want %+v", i, got, f)
				}
			}
			if res.ok() != (len(tc.fails) == 0) {
				t.Errorf("ok = %v", res.ok())
			}
		})
	}

	// A grant lets the Gateway use the other namespace's ConfigMap.
	granted := snapshot(configMap("certs", "remote", map[string]string{caDataKey: ca}),
		refGrant("certs", "g", "Gateway", "apps", "ConfigMap", nil))
	gt := newTranslator(granted, Options{ControllerName: testController}, nil, newOneTranslation())
	if res := gt.caBundle(from, []refs.Object{cm("certs", "remote")}); !res.ok() || !bytes.Contains(res.pem, []byte("BEGIN CERTIFICATE")) {
		t.Errorf("granted reference: %+v", res)
	}

	// Every read is recorded, also of what does not exist.
	rec = nil
	tr.caBundle(from, []refs.Object{cm("apps", "nope"), ctb, {Kind: refs.KindSecret, Namespace: "apps", Name: "s"}})
	want := []resource.Ref{
		{Kind: resource.KindConfigMap, Key: resource.Key{Namespace: "apps", Name: "nope"}},
		{Kind: resource.KindClusterTrustBundle, Key: resource.Key{Name: "bundle"}},
		{Kind: resource.KindSecret, Key: resource.Key{Namespace: "apps", Name: "s"}},
	}
	if len(rec) != len(want) {
		t.Fatalf("recorded %v, want %v", rec, want)
	}
	for i := range want {
		if rec[i] != want[i] {
			t.Errorf("record %d = %v, want %v", i, rec[i], want[i])
		}
	}

	// The reasons, by user.
	p := caResolution{failures: []caFailure{{index: 1, cause: caKindUnsupported, message: "m1"}, {index: 2, cause: caInvalid, message: "m2"}}}.
		problem("caCertificateRefs", backendReason)
	if p.reason != "InvalidKind" || p.message != "caCertificateRefs[1]: m1; caCertificateRefs[2]: m2" {
		t.Errorf("problem = %+v", p)
	}
	if listenerReason(caNotPermitted) != "RefNotPermitted" || listenerReason(caKindUnsupported) != "InvalidCACertificateKind" ||
		backendReason(caInvalid) != "InvalidCACertificateRef" {
		t.Error("reasons")
	}
}
