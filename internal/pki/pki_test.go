package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func mustCA(t *testing.T, now time.Time, validity time.Duration) *CA {
	t.Helper()
	ca, err := NewCA(now, validity)
	if err != nil {
		t.Fatalf("NewCA: %v", err)
	}
	return ca
}

func mustCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		t.Fatalf("ParseCertificates: %v", err)
	}
	if len(certs) != 1 {
		t.Fatalf("%d certificates, want 1", len(certs))
	}
	return certs[0]
}

func TestNewCA(t *testing.T) {
	ca := mustCA(t, t0, 24*time.Hour)
	c := ca.Certificate()
	if !c.IsCA || !c.BasicConstraintsValid || c.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("not a CA: IsCA=%v basic=%v usage=%v", c.IsCA, c.BasicConstraintsValid, c.KeyUsage)
	}
	if pub, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Errorf("key %T, want ECDSA P-256", c.PublicKey)
	}
	if !c.NotBefore.Before(t0) || !c.NotBefore.Equal(t0.Add(-Backdate)) {
		t.Errorf("NotBefore = %v, want %v", c.NotBefore, t0.Add(-Backdate))
	}
	if !c.NotAfter.Equal(t0.Add(24 * time.Hour)) {
		t.Errorf("NotAfter = %v", c.NotAfter)
	}
	if err := c.CheckSignatureFrom(c); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
	other := mustCA(t, t0, 24*time.Hour)
	if c.SerialNumber.Cmp(other.Certificate().SerialNumber) == 0 || c.SerialNumber.Sign() <= 0 {
		t.Errorf("serials not random/positive: %v %v", c.SerialNumber, other.Certificate().SerialNumber)
	}

	// Round trip through PEM, also as the second certificate of a bundle.
	for _, certPEM := range [][]byte{ca.CertPEM(), append(other.CertPEM(), ca.CertPEM()...)} {
		back, err := ParseCA(certPEM, ca.KeyPEM())
		if err != nil {
			t.Fatalf("ParseCA: %v", err)
		}
		if !back.Certificate().Equal(c) || string(back.KeyPEM()) != string(ca.KeyPEM()) {
			t.Errorf("ParseCA did not round-trip")
		}
	}
	if _, err := ParseCA(other.CertPEM(), ca.KeyPEM()); err == nil {
		t.Errorf("ParseCA accepted a key of another certificate")
	}
	if _, err := ParseCA([]byte("junk"), ca.KeyPEM()); err == nil {
		t.Errorf("ParseCA accepted junk")
	}
	certPEM, keyPEM, err := ca.IssueServer([]string{"x"}, nil, t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseCA(certPEM, keyPEM); err == nil {
		t.Errorf("ParseCA accepted a leaf certificate")
	}
}

func TestIssueClient(t *testing.T) {
	ca := mustCA(t, t0, 365*24*time.Hour)
	const uid = "0b5e2f1c-8d3a-4c6e-9f21-7a4b3c2d1e0f"
	certPEM, keyPEM, err := ca.IssueClient(Identity{"team-a", "web", uid}, t0, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatalf("key pair: %v", err)
	}
	c := mustCert(t, certPEM)
	if len(c.URIs) != 1 || c.URIs[0].String() != "spiffe://portico.dev/ns/team-a/gateway/web/uid/"+uid {
		t.Errorf("URIs = %v", c.URIs)
	}
	if c.IsCA || !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("IsCA=%v ExtKeyUsage=%v", c.IsCA, c.ExtKeyUsage)
	}
	if id, ok := IdentityFromCert(c); !ok || id != (Identity{"team-a", "web", uid}) {
		t.Errorf("IdentityFromCert = %+v %v", id, ok)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	opts := x509.VerifyOptions{Roots: pool, CurrentTime: t0, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if _, err := c.Verify(opts); err != nil {
		t.Errorf("client cert does not verify for client auth: %v", err)
	}
	opts.KeyUsages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	if _, err := c.Verify(opts); err == nil {
		t.Errorf("client cert verifies for server auth")
	}
	opts.KeyUsages = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	opts.CurrentTime = t0.Add(25 * time.Hour)
	if _, err := c.Verify(opts); err == nil {
		t.Errorf("client cert verifies after its validity")
	}
	for _, bad := range []Identity{{"", "web", ""}, {"a/b", "web", ""}, {"a", "Web", ""}, {"a", "", ""},
		{"a", "b", "UPPER"}, {"a", "b", "x/y"}, {"a", "b", "g-h"}} {
		if _, _, err := ca.IssueClient(bad, t0, time.Hour); err == nil {
			t.Errorf("IssueClient(%+v) succeeded", bad)
		}
	}
}

func TestIssueServer(t *testing.T) {
	ca := mustCA(t, t0, 365*24*time.Hour)
	dns := ServerDNSNames("portico-system")
	certPEM, keyPEM, err := ca.IssueServer(dns, []net.IP{net.ParseIP("127.0.0.1")}, t0, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatalf("key pair: %v", err)
	}
	c := mustCert(t, certPEM)
	if !slices.Equal(c.DNSNames, dns) || len(c.IPAddresses) != 1 || !c.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) {
		t.Errorf("SANs = %v %v", c.DNSNames, c.IPAddresses)
	}
	if !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}) {
		t.Errorf("ExtKeyUsage = %v", c.ExtKeyUsage)
	}
	if _, ok := IdentityFromCert(c); ok {
		t.Errorf("server cert has a gateway identity")
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate())
	for _, host := range []string{"portico-xds.portico-system.svc", "127.0.0.1"} {
		if _, err := c.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: t0, DNSName: host}); err != nil {
			t.Errorf("verify for %s: %v", host, err)
		}
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: t0, DNSName: "other.example"}); err == nil {
		t.Errorf("verifies for another host")
	}
	if _, _, err := ca.IssueServer(nil, nil, t0, time.Hour); err == nil {
		t.Errorf("IssueServer without names succeeded")
	}
}

func TestLeafNeverOutlivesCA(t *testing.T) {
	ca := mustCA(t, t0, 10*time.Hour)
	certPEM, _, err := ca.IssueClient(Identity{"ns", "gw", ""}, t0.Add(5*time.Hour), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if c := mustCert(t, certPEM); !c.NotAfter.Equal(ca.Certificate().NotAfter) {
		t.Errorf("NotAfter = %v, want the CA's %v", c.NotAfter, ca.Certificate().NotAfter)
	}
	if _, _, err := ca.IssueClient(Identity{"ns", "gw", ""}, t0.Add(11*time.Hour), time.Hour); err == nil {
		t.Errorf("an expired CA issued a certificate")
	}
}

func TestNeedsRenewal(t *testing.T) {
	ca := mustCA(t, t0, 30*time.Hour)
	// Lifetime 30h + 5m backdate; two thirds in: NotBefore + 20h03m20s.
	c := ca.Certificate()
	at := RenewalTime(c)
	if want := c.NotBefore.Add((30*time.Hour + Backdate) / 3 * 2); !at.Equal(want) {
		t.Fatalf("RenewalTime = %v, want %v", at, want)
	}
	for _, tc := range []struct {
		now  time.Time
		want bool
	}{
		{t0, false},
		{at.Add(-time.Second), false},
		{at, true},
		{t0.Add(31 * time.Hour), true},
		{t0.Add(-time.Hour), true}, // not yet valid
	} {
		if got := NeedsRenewal(ca.CertPEM(), tc.now); got != tc.want {
			t.Errorf("NeedsRenewal at %v = %v, want %v", tc.now, got, tc.want)
		}
	}
	if !NeedsRenewal(nil, t0) || !NeedsRenewal([]byte("junk"), t0) {
		t.Errorf("missing or junk certificate does not need renewal")
	}
}

func TestIdentityFromCert(t *testing.T) {
	if got := GatewayURI("ns", "gw", ""); got != "spiffe://portico.dev/ns/ns/gateway/gw" {
		t.Errorf("GatewayURI = %q", got)
	}
	if got := GatewayURI("ns", "gw", "1-2"); got != "spiffe://portico.dev/ns/ns/gateway/gw/uid/1-2" {
		t.Errorf("GatewayURI with uid = %q", got)
	}
	parse := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	other := parse("spiffe://example.org/ns/x/sa/y")
	const p = "spiffe://portico.dev/ns/"
	for _, tc := range []struct {
		uris []string
		want Identity
		ok   bool
	}{
		{[]string{p + "ns/gateway/gw"}, Identity{"ns", "gw", ""}, true},
		{[]string{p + "a.b/gateway/c-d"}, Identity{"a.b", "c-d", ""}, true},
		{[]string{p + "ns/gateway/gw/uid/0b5e2f1c-8d3a"}, Identity{"ns", "gw", "0b5e2f1c-8d3a"}, true},
		{nil, Identity{}, false},
		// The identity of certificates before Gateway UIDs: refused.
		{[]string{"spiffe://portico.dev/gateway/ns/gw"}, Identity{}, false},
		{[]string{p + "ns"}, Identity{}, false},
		{[]string{p + "ns/gateway"}, Identity{}, false},
		{[]string{p + "ns/gateway/gw/extra"}, Identity{}, false},
		{[]string{p + "ns/gateway/gw/uid"}, Identity{}, false},
		{[]string{p + "ns/gateway/gw/uid/"}, Identity{}, false},
		{[]string{p + "ns/gateway/gw/uid/ABC"}, Identity{}, false},
		{[]string{p + "ns/gateway/gw/oid/abc"}, Identity{}, false},
		{[]string{p + "ns/gateway/gw/uid/abc/more"}, Identity{}, false},
		{[]string{p + "/gateway/gw"}, Identity{}, false},
		{[]string{p + "ns/gateway/GW"}, Identity{}, false},
		{[]string{p + "ns/gateway/gw?x=1"}, Identity{}, false},
		{[]string{p + "ns/gateway/gw?"}, Identity{}, false},
		{[]string{p + "ns/gateway/gw#f"}, Identity{}, false},
		{[]string{"spiffe://portico.dev:1/ns/ns/gateway/gw"}, Identity{}, false},
		{[]string{"https://portico.dev/ns/ns/gateway/gw"}, Identity{}, false},
		{[]string{"spiffe://portico.dev/other/ns/gateway/gw"}, Identity{}, false},
		{[]string{p + "ns/gateway/a", p + "ns/gateway/b"}, Identity{}, false},
		{[]string{p + "ns/gateway/a", p + "ns/gateway/a"}, Identity{}, false},
		{[]string{p + "ns/gateway/%67w"}, Identity{}, false},
	} {
		c := &x509.Certificate{URIs: []*url.URL{other}}
		for _, u := range tc.uris {
			c.URIs = append(c.URIs, parse(u))
		}
		id, ok := IdentityFromCert(c)
		if id != tc.want || ok != tc.ok {
			t.Errorf("IdentityFromCert(%v) = %+v %v, want %+v %v", tc.uris, id, ok, tc.want, tc.ok)
		}
	}
	if _, ok := IdentityFromCert(nil); ok {
		t.Errorf("nil certificate has an identity")
	}
}

func TestParseCertificatesAndPool(t *testing.T) {
	a, b := mustCA(t, t0, time.Hour), mustCA(t, t0, time.Hour)
	bundle := EncodeCertificates([]*x509.Certificate{a.Certificate(), b.Certificate()})
	certs, err := ParseCertificates(append([]byte("# comment\n"), bundle...))
	if err != nil || len(certs) != 2 || !certs[0].Equal(a.Certificate()) || !certs[1].Equal(b.Certificate()) {
		t.Fatalf("ParseCertificates = %v, %v", certs, err)
	}
	if _, err := Pool([]byte("nothing")); err == nil || !strings.Contains(err.Error(), "no certificate") {
		t.Errorf("Pool(nothing) err = %v", err)
	}
}
