package certstore_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/pki"
	"github.com/portico-dev/portico/internal/pki/certstore"
	"github.com/portico-dev/portico/internal/proxyspec"
)

// world is one test's namespace, clock and Manager.
type world struct {
	t     *testing.T
	ctx   context.Context
	ns    string
	clock *clock
	cfg   certstore.Config
	m     *certstore.Manager
}

func newWorld(t *testing.T, tweak func(*certstore.Config)) *world {
	t.Helper()
	needEnv(t)
	w := &world{t: t, ctx: ctxT(t), clock: newClock()}
	w.ns = newNamespace(t, w.ctx)
	w.cfg = certstore.Config{
		Client:    k8s,
		Namespace: w.ns,
		IPs:       []net.IP{net.ParseIP("127.0.0.1")},
		Now:       w.clock.Now,
	}
	if tweak != nil {
		tweak(&w.cfg)
	}
	w.m = w.manager()
	return w
}

// manager returns a new Manager of w's configuration (as a new leader
// would create).
func (w *world) manager() *certstore.Manager {
	w.t.Helper()
	m, err := certstore.NewManager(w.cfg)
	if err != nil {
		w.t.Fatal(err)
	}
	return m
}

func (w *world) ensure() {
	w.t.Helper()
	if err := w.m.Ensure(w.ctx); err != nil {
		w.t.Fatalf("Ensure: %v", err)
	}
}

func (w *world) secret(ns, name string) *corev1.Secret {
	w.t.Helper()
	var s corev1.Secret
	if err := k8s.Get(w.ctx, types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		w.t.Fatalf("get secret %s/%s: %v", ns, name, err)
	}
	return &s
}

func (w *world) caSecret() *corev1.Secret      { return w.secret(w.ns, certstore.CASecretName) }
func (w *world) servingSecret() *corev1.Secret { return w.secret(w.ns, certstore.ServingSecretName) }

// versions returns the resourceVersions of the given secrets.
func versions(secrets ...*corev1.Secret) []string {
	var out []string
	for _, s := range secrets {
		out = append(out, s.ResourceVersion)
	}
	return out
}

func certsOf(t *testing.T, pemData []byte) []*x509.Certificate {
	t.Helper()
	certs, err := pki.ParseCertificates(pemData)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return certs
}

// verifyLeaf checks that the secret's tls.crt/tls.key pair is valid at now
// for usage against the CAs of the secret's own ca.crt, and returns it.
func verifyLeaf(t *testing.T, s *corev1.Secret, usage x509.ExtKeyUsage, now time.Time, dnsName string) *x509.Certificate {
	t.Helper()
	if s.Type != corev1.SecretTypeTLS {
		t.Errorf("secret %s type %q, want %q", s.Name, s.Type, corev1.SecretTypeTLS)
	}
	if _, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"]); err != nil {
		t.Fatalf("secret %s: key pair: %v", s.Name, err)
	}
	pool, err := pki.Pool(s.Data["ca.crt"])
	if err != nil {
		t.Fatalf("secret %s ca.crt: %v", s.Name, err)
	}
	leaf := certsOf(t, s.Data["tls.crt"])[0]
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, DNSName: dnsName,
		KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		t.Fatalf("secret %s: certificate does not verify: %v", s.Name, err)
	}
	return leaf
}

func appliedByPortico(t *testing.T, s *corev1.Secret) {
	t.Helper()
	if !slices.ContainsFunc(s.ManagedFields, func(m metav1.ManagedFieldsEntry) bool {
		return m.Manager == proxyspec.FieldManager && m.Operation == metav1.ManagedFieldsOperationApply
	}) {
		t.Errorf("secret %s not applied by field manager %q: %+v", s.Name, proxyspec.FieldManager, s.ManagedFields)
	}
}

func TestManagerCreatesCAAndServingCert(t *testing.T) {
	w := newWorld(t, nil)
	w.ensure()

	caSec, srvSec := w.caSecret(), w.servingSecret()
	appliedByPortico(t, caSec)
	appliedByPortico(t, srvSec)
	ca, err := pki.ParseCA(caSec.Data["ca.crt"], caSec.Data["ca.key"])
	if err != nil {
		t.Fatalf("CA secret: %v", err)
	}
	if n := len(certsOf(t, caSec.Data["ca.crt"])); n != 1 {
		t.Errorf("ca.crt holds %d certificates, want 1", n)
	}
	if !bytes.Equal(srvSec.Data["ca.crt"], caSec.Data["ca.crt"]) {
		t.Error("serving secret ca.crt differs from the CA bundle")
	}
	now := w.clock.Now()
	for _, host := range append(pki.ServerDNSNames(w.ns), "127.0.0.1") {
		verifyLeaf(t, srvSec, x509.ExtKeyUsageServerAuth, now, host)
	}
	leaf := verifyLeaf(t, srvSec, x509.ExtKeyUsageServerAuth, now, "portico-xds."+w.ns+".svc")
	if err := leaf.CheckSignatureFrom(ca.Certificate()); err != nil {
		t.Errorf("serving certificate not signed by the CA: %v", err)
	}
	if !slices.Contains(leaf.DNSNames, "portico-xds."+w.ns+".svc.cluster.local") {
		t.Errorf("DNS names %v", leaf.DNSNames)
	}

	// Idempotent: neither this Manager nor a new one (another leader)
	// writes anything when all is current.
	before := versions(caSec, srvSec)
	w.ensure()
	w.m = w.manager()
	w.ensure()
	if after := versions(w.caSecret(), w.servingSecret()); !slices.Equal(before, after) {
		t.Errorf("second run wrote: resourceVersions %v → %v", before, after)
	}
}

func TestManagerRenewsServingCert(t *testing.T) {
	w := newWorld(t, func(c *certstore.Config) { c.ServerValidity = 3 * time.Hour })
	w.ensure()
	first := w.servingSecret()
	caRV := w.caSecret().ResourceVersion
	leaf := certsOf(t, first.Data["tls.crt"])[0]

	// Just before two thirds of its lifetime: kept.
	w.clock.Set(pki.RenewalTime(leaf).Add(-time.Minute))
	w.ensure()
	if rv := w.servingSecret().ResourceVersion; rv != first.ResourceVersion {
		t.Fatalf("serving secret rewritten before its renewal time")
	}

	// Past it: renewed (new key and serial), by the same CA.
	w.clock.Set(pki.RenewalTime(leaf).Add(time.Minute))
	w.ensure()
	renewed := w.servingSecret()
	next := verifyLeaf(t, renewed, x509.ExtKeyUsageServerAuth, w.clock.Now(), "portico-xds")
	if next.SerialNumber.Cmp(leaf.SerialNumber) == 0 || bytes.Equal(renewed.Data["tls.key"], first.Data["tls.key"]) {
		t.Error("serving certificate not renewed")
	}
	if !next.NotAfter.After(leaf.NotAfter) {
		t.Errorf("renewed NotAfter %v not after %v", next.NotAfter, leaf.NotAfter)
	}
	if w.caSecret().ResourceVersion != caRV {
		t.Error("CA secret rewritten by a serving certificate renewal")
	}

	// A changed SAN set (new flag value) reissues it too.
	w.cfg.DNSNames = []string{"xds.example.test"}
	w.m = w.manager()
	w.ensure()
	verifyLeaf(t, w.servingSecret(), x509.ExtKeyUsageServerAuth, w.clock.Now(), "xds.example.test")

	// Damaged contents are repaired.
	s := w.servingSecret()
	s.Data["tls.key"] = []byte("junk")
	if err := k8s.Update(w.ctx, s); err != nil {
		t.Fatal(err)
	}
	w.ensure()
	verifyLeaf(t, w.servingSecret(), x509.ExtKeyUsageServerAuth, w.clock.Now(), "portico-xds")
}

// gateway creates a minimal Gateway ns/name.
func (w *world) gateway(name string) *gwv1.Gateway {
	w.t.Helper()
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: "portico",
			Listeners:        []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}},
		},
	}
	if err := k8s.Create(w.ctx, gw); err != nil {
		w.t.Fatalf("create gateway: %v", err)
	}
	return gw
}

func (w *world) clientSecret(gw string) *corev1.Secret {
	return w.secret(w.ns, proxyspec.ClientCertSecretName(gw))
}

func TestEnsureClientCert(t *testing.T) {
	w := newWorld(t, nil)
	gw := w.gateway("web")
	if err := w.m.EnsureClientCert(w.ctx, w.ns, "web"); err != nil {
		t.Fatalf("EnsureClientCert: %v", err)
	}
	s := w.clientSecret("web")
	appliedByPortico(t, s)
	for k, v := range proxyspec.Labels(w.ns, "web") {
		if s.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, s.Labels[k], v)
		}
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != gw.UID || s.OwnerReferences[0].Kind != "Gateway" {
		t.Errorf("owner references %+v", s.OwnerReferences)
	}
	leaf := verifyLeaf(t, s, x509.ExtKeyUsageClientAuth, w.clock.Now(), "")
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != pki.GatewayURI(w.ns, "web", string(gw.UID)) {
		t.Errorf("URI SANs %v, want %s", leaf.URIs, pki.GatewayURI(w.ns, "web", string(gw.UID)))
	}
	if id, ok := pki.IdentityFromCert(leaf); !ok || id != (pki.Identity{Namespace: w.ns, Name: "web", UID: string(gw.UID)}) {
		t.Errorf("IdentityFromCert = %+v %v", id, ok)
	}
	// Its ca.crt also verifies the serving certificate (what Envoy checks).
	w.ensure()
	if !bytes.Equal(s.Data["ca.crt"], w.caSecret().Data["ca.crt"]) {
		t.Error("client secret ca.crt differs from the CA bundle")
	}
	verifyLeaf(t, w.servingSecret(), x509.ExtKeyUsageServerAuth, w.clock.Now(), "portico-xds."+w.ns+".svc")

	// Idempotent, from this Manager, a new one, and Ensure's refresh.
	rvs := versions(s, w.caSecret(), w.servingSecret())
	if err := w.m.EnsureClientCert(w.ctx, w.ns, "web"); err != nil {
		t.Fatal(err)
	}
	w.m = w.manager()
	if err := w.m.EnsureClientCert(w.ctx, w.ns, "web"); err != nil {
		t.Fatal(err)
	}
	w.ensure()
	if after := versions(w.clientSecret("web"), w.caSecret(), w.servingSecret()); !slices.Equal(rvs, after) {
		t.Errorf("repeated calls wrote: %v → %v", rvs, after)
	}

	// Renewal at two thirds of its lifetime, by EnsureClientCert and by
	// Ensure alone (a Gateway that was not reconciled meanwhile).
	for _, byEnsure := range []bool{false, true} {
		before := w.clientSecret("web")
		old := certsOf(t, before.Data["tls.crt"])[0]
		w.clock.Set(pki.RenewalTime(old).Add(time.Minute))
		if byEnsure {
			w.ensure()
		} else if err := w.m.EnsureClientCert(w.ctx, w.ns, "web"); err != nil {
			t.Fatal(err)
		}
		after := w.clientSecret("web")
		leaf := verifyLeaf(t, after, x509.ExtKeyUsageClientAuth, w.clock.Now(), "")
		if leaf.SerialNumber.Cmp(old.SerialNumber) == 0 {
			t.Errorf("byEnsure=%v: client certificate not renewed", byEnsure)
		}
		if len(after.OwnerReferences) != 1 || after.OwnerReferences[0].UID != gw.UID {
			t.Errorf("byEnsure=%v: owner references lost: %+v", byEnsure, after.OwnerReferences)
		}
	}

	// A Gateway that does not exist gets no certificate.
	if err := w.m.EnsureClientCert(w.ctx, w.ns, "ghost"); !apierrors.IsNotFound(err) {
		t.Errorf("EnsureClientCert of a missing gateway: %v, want NotFound", err)
	}

	if err := w.m.DeleteClientCert(w.ctx, w.ns, "web"); err != nil {
		t.Fatalf("DeleteClientCert: %v", err)
	}
	var gone corev1.Secret
	if err := k8s.Get(w.ctx, types.NamespacedName{Namespace: w.ns, Name: proxyspec.ClientCertSecretName("web")}, &gone); !apierrors.IsNotFound(err) {
		t.Errorf("client secret after delete: %v", err)
	}
	if err := w.m.DeleteClientCert(w.ctx, w.ns, "web"); err != nil {
		t.Errorf("second DeleteClientCert: %v", err)
	}
}

func TestManagerRotatesCAWithOverlap(t *testing.T) {
	w := newWorld(t, func(c *certstore.Config) {
		c.CAValidity = 30 * time.Hour
		c.ServerValidity = 12 * time.Hour
		c.ClientValidity = 12 * time.Hour
	})
	t0 := w.clock.Now()
	w.gateway("web")
	if err := w.m.EnsureClientCert(w.ctx, w.ns, "web"); err != nil {
		t.Fatal(err)
	}
	ca1 := certsOf(t, w.caSecret().Data["ca.crt"])[0]

	// t0+19h: the leaves (due at ~8h) are renewed; the CA (due at ~20h) not.
	w.clock.Set(t0.Add(19 * time.Hour))
	w.ensure()
	srv19, cli19 := w.servingSecret(), w.clientSecret("web")
	if got := certsOf(t, w.caSecret().Data["ca.crt"]); len(got) != 1 || !got[0].Equal(ca1) {
		t.Fatalf("CA changed before its renewal time")
	}

	// t0+20h: the CA is rotated. The new CA signs from now on; the old
	// stays trusted in every bundle; the leaves, still fresh, are kept, so
	// proxies get the new bundle before the serving certificate changes CA.
	w.clock.Set(t0.Add(20 * time.Hour))
	w.ensure()
	caSec := w.caSecret()
	bundle := certsOf(t, caSec.Data["ca.crt"])
	if len(bundle) != 2 || bundle[0].Equal(ca1) || !bundle[1].Equal(ca1) {
		t.Fatalf("bundle after rotation: %d certificates, want [new, old]", len(bundle))
	}
	ca2, err := pki.ParseCA(caSec.Data["ca.crt"], caSec.Data["ca.key"])
	if err != nil || !ca2.Certificate().Equal(bundle[0]) {
		t.Fatalf("ca.key does not belong to the new CA: %v", err)
	}
	for _, pair := range [][2]*corev1.Secret{{srv19, w.servingSecret()}, {cli19, w.clientSecret("web")}} {
		before, after := pair[0], pair[1]
		if !bytes.Equal(before.Data["tls.crt"], after.Data["tls.crt"]) {
			t.Errorf("%s: leaf reissued at the CA rotation", after.Name)
		}
		if !bytes.Equal(after.Data["ca.crt"], caSec.Data["ca.crt"]) {
			t.Errorf("%s: ca.crt not updated to the new bundle", after.Name)
		}
	}
	verifyLeaf(t, w.servingSecret(), x509.ExtKeyUsageServerAuth, w.clock.Now(), "portico-xds")
	verifyLeaf(t, w.clientSecret("web"), x509.ExtKeyUsageClientAuth, w.clock.Now(), "")

	// t0+27h: leaves due again, now issued by the new CA; the old CA is
	// still in the bundle until it expires.
	w.clock.Set(t0.Add(27 * time.Hour))
	w.ensure()
	for _, s := range []*corev1.Secret{w.servingSecret(), w.clientSecret("web")} {
		leaf := certsOf(t, s.Data["tls.crt"])[0]
		if err := leaf.CheckSignatureFrom(ca2.Certificate()); err != nil {
			t.Errorf("%s: renewed leaf not signed by the new CA: %v", s.Name, err)
		}
		if n := len(certsOf(t, s.Data["ca.crt"])); n != 2 {
			t.Errorf("%s: bundle has %d CAs before the old one expired, want 2", s.Name, n)
		}
	}

	// t0+31h: the old CA expired and leaves every bundle.
	w.clock.Set(t0.Add(31 * time.Hour))
	w.ensure()
	for _, s := range []*corev1.Secret{w.caSecret(), w.servingSecret(), w.clientSecret("web")} {
		got := certsOf(t, s.Data["ca.crt"])
		if len(got) != 1 || !got[0].Equal(ca2.Certificate()) {
			t.Errorf("%s: bundle after the old CA expired has %d CAs, want only the new one", s.Name, len(got))
		}
	}
	verifyLeaf(t, w.clientSecret("web"), x509.ExtKeyUsageClientAuth, w.clock.Now(), "")
}

func TestManagerRecoversFromBrokenCA(t *testing.T) {
	w := newWorld(t, nil)
	w.ensure()
	s := w.caSecret()
	old := certsOf(t, s.Data["ca.crt"])[0]
	s.Data["ca.key"] = []byte("lost")
	if err := k8s.Update(w.ctx, s); err != nil {
		t.Fatal(err)
	}
	w.ensure()
	// A new CA signs; the old certificate stays trusted (its leaves keep
	// working) until it expires; the serving certificate chains to the new.
	s = w.caSecret()
	ca, err := pki.ParseCA(s.Data["ca.crt"], s.Data["ca.key"])
	if err != nil {
		t.Fatalf("CA not repaired: %v", err)
	}
	if bundle := certsOf(t, s.Data["ca.crt"]); len(bundle) != 2 || !bundle[0].Equal(ca.Certificate()) || !bundle[1].Equal(old) {
		t.Errorf("bundle is not [new, old]")
	}
	leaf := verifyLeaf(t, w.servingSecret(), x509.ExtKeyUsageServerAuth, w.clock.Now(), "portico-xds")
	if err := leaf.CheckSignatureFrom(old); err != nil {
		t.Errorf("valid serving certificate of the old CA was replaced: %v", err)
	}
}

func TestManagerRunStopsWithContext(t *testing.T) {
	w := newWorld(t, nil)
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan error, 1)
	go func() { done <- w.m.Run(ctx) }()
	eventually(t, "serving secret created by Run", func() bool {
		var s corev1.Secret
		return k8s.Get(w.ctx, types.NamespacedName{Namespace: w.ns, Name: certstore.ServingSecretName}, &s) == nil
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return after cancel")
	}
}
