package certstore_test

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/pki"
)

// uriOf is the only URI SAN of a client certificate Secret's tls.crt.
func uriOf(t *testing.T, leaf *x509.Certificate) string {
	t.Helper()
	if len(leaf.URIs) != 1 {
		t.Fatalf("client certificate has URI SANs %v, want one", leaf.URIs)
	}
	return leaf.URIs[0].String()
}

// Client certificates are short-lived by default, and the leader renews
// them before they expire: two thirds into their lifetime, while the old
// one is still valid (the kubelet has the rest to deliver the new one).
func TestClientCertShortLivedAndRenewedBeforeExpiry(t *testing.T) {
	w := newWorld(t, nil) // default validities
	w.gateway("web")
	if err := w.m.EnsureClientCert(w.ctx, w.ns, "web"); err != nil {
		t.Fatal(err)
	}
	first := w.clientSecret("web")
	old := verifyLeaf(t, first, x509.ExtKeyUsageClientAuth, w.clock.Now(), "")
	if life := old.NotAfter.Sub(old.NotBefore); life > 24*time.Hour+pki.Backdate {
		t.Fatalf("client certificate lifetime %v, want at most 24h (+%v backdate)", life, pki.Backdate)
	}

	// Just before its renewal time: kept.
	w.clock.Set(pki.RenewalTime(old).Add(-time.Minute))
	w.ensure()
	if rv := w.clientSecret("web").ResourceVersion; rv != first.ResourceVersion {
		t.Fatal("client certificate rewritten before its renewal time")
	}
	// Past it, before it expires: renewed by the periodic check alone.
	renewAt := pki.RenewalTime(old).Add(time.Minute)
	if !renewAt.Before(old.NotAfter) {
		t.Fatalf("renewal time %v is not before expiry %v", renewAt, old.NotAfter)
	}
	w.clock.Set(renewAt)
	w.ensure()
	next := verifyLeaf(t, w.clientSecret("web"), x509.ExtKeyUsageClientAuth, w.clock.Now(), "")
	if next.SerialNumber.Cmp(old.SerialNumber) == 0 {
		t.Fatal("client certificate not renewed past its renewal time")
	}
	if !next.NotAfter.After(old.NotAfter) || uriOf(t, next) != uriOf(t, old) {
		t.Errorf("renewed certificate: NotAfter %v (old %v), identity %s (old %s)",
			next.NotAfter, old.NotAfter, uriOf(t, next), uriOf(t, old))
	}

	// A configured validity is used.
	w.cfg.ClientValidity = 2 * time.Hour
	w.m = w.manager()
	w.clock.Set(pki.RenewalTime(next).Add(time.Minute))
	w.ensure()
	short := verifyLeaf(t, w.clientSecret("web"), x509.ExtKeyUsageClientAuth, w.clock.Now(), "")
	if life := short.NotAfter.Sub(short.NotBefore); life != 2*time.Hour+pki.Backdate {
		t.Errorf("lifetime with ClientValidity 2h: %v", life)
	}
}

// A client certificate names the UID of its Gateway; when the Gateway is
// deleted and re-created under the same name, the next reconcile issues a
// certificate naming the new UID at once (not at the old one's renewal
// time), so the old certificate names a Gateway that no longer exists.
func TestClientCertNamesGatewayUID(t *testing.T) {
	w := newWorld(t, nil)
	gw := w.gateway("web")
	if err := w.m.EnsureClientCert(w.ctx, w.ns, "web"); err != nil {
		t.Fatal(err)
	}
	old := verifyLeaf(t, w.clientSecret("web"), x509.ExtKeyUsageClientAuth, w.clock.Now(), "")
	want := "spiffe://portico.dev/ns/" + w.ns + "/gateway/web/uid/" + string(gw.UID)
	if got := uriOf(t, old); got != want {
		t.Fatalf("identity %s, want %s", got, want)
	}

	// Deleted and re-created: the API server has no garbage collector
	// here, so the Secret of the old Gateway is still there (as it may be
	// for a while in a cluster).
	if err := k8s.Delete(w.ctx, gw); err != nil {
		t.Fatal(err)
	}
	again := w.gateway("web")
	if again.UID == gw.UID {
		t.Fatal("re-created Gateway has the same UID")
	}
	if err := w.m.EnsureClientCert(w.ctx, w.ns, "web"); err != nil {
		t.Fatal(err)
	}
	s := w.clientSecret("web")
	next := verifyLeaf(t, s, x509.ExtKeyUsageClientAuth, w.clock.Now(), "")
	if next.SerialNumber.Cmp(old.SerialNumber) == 0 {
		t.Fatal("the certificate of the deleted Gateway was kept for the re-created one")
	}
	if got, want := uriOf(t, next), "spiffe://portico.dev/ns/"+w.ns+"/gateway/web/uid/"+string(again.UID); got != want {
		t.Errorf("identity %s, want %s", got, want)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != again.UID {
		t.Errorf("owner references %+v, want the new Gateway", s.OwnerReferences)
	}
	// And the periodic check keeps it.
	rv := s.ResourceVersion
	w.ensure()
	if w.clientSecret("web").ResourceVersion != rv {
		t.Error("the periodic check rewrote a current certificate")
	}

	// A Secret without owner references is checked against the live
	// Gateway's UID.
	s.OwnerReferences = nil
	s.Data["tls.key"] = []byte("junk") // unusable: reissued
	if err := k8s.Update(w.ctx, s); err != nil {
		t.Fatal(err)
	}
	w.ensure()
	fixed := verifyLeaf(t, w.clientSecret("web"), x509.ExtKeyUsageClientAuth, w.clock.Now(), "")
	if !strings.HasSuffix(uriOf(t, fixed), "/uid/"+string(again.UID)) {
		t.Errorf("reissued without owner: identity %s, want the live Gateway's UID %s", uriOf(t, fixed), again.UID)
	}
}
