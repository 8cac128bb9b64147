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
	certPEM, keyPEM, err := ca.IssueClient("team-a", "web", t0, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatalf("key pair: %v", err)
	}
	c := mustCert(t, certPEM)
	if len(c.URIs) != 1 || c.URIs[0].String() != "spiffe://portico.dev/gateway/team-a/web" {
		t.Errorf("URIs = %v", c.URIs)
	}
	if c.IsCA || !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("IsCA=%v ExtKeyUsage=%v", c.IsCA, c.ExtKeyUsage)
	}
	if ns, gw, ok := GatewayFromCert(c); !ok || ns != "team-a" || gw != "web" {
		t.Errorf("GatewayFromCert = %q %q %v", ns, gw, ok)
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
	for _, bad := range [][2]string{{"", "web"}, {"a/b", "web"}, {"a", "Web"}, {"a", ""}} {
		if _, _, err := ca.IssueClient(bad[0], bad[1], t0, time.Hour); err == nil {
			t.Errorf("IssueClient(%q, %q) succeeded", bad[0], bad[1])
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
	if _, _, ok := GatewayFromCert(c); ok {
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
	certPEM, _, err := ca.IssueClient("ns", "gw", t0.Add(5*time.Hour), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if c := mustCert(t, certPEM); !c.NotAfter.Equal(ca.Certificate().NotAfter) {
		t.Errorf("NotAfter = %v, want the CA's %v", c.NotAfter, ca.Certificate().NotAfter)
	}
	if _, _, err := ca.IssueClient("ns", "gw", t0.Add(11*time.Hour), time.Hour); err == nil {
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

func TestGatewayFromCert(t *testing.T) {
	if got := GatewayURI("ns", "gw"); got != "spiffe://portico.dev/gateway/ns/gw" {
		t.Errorf("GatewayURI = %q", got)
	}
	parse := func(s string) *url.URL {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	other := parse("spiffe://example.org/ns/x/sa/y")
	for _, tc := range []struct {
		uris     []string
		ns, name string
		ok       bool
	}{
		{[]string{"spiffe://portico.dev/gateway/ns/gw"}, "ns", "gw", true},
		{[]string{"spiffe://portico.dev/gateway/a.b/c-d"}, "a.b", "c-d", true},
		{nil, "", "", false},
		{[]string{"spiffe://portico.dev/gateway/ns"}, "", "", false},
		{[]string{"spiffe://portico.dev/gateway/ns/gw/extra"}, "", "", false},
		{[]string{"spiffe://portico.dev/gateway//gw"}, "", "", false},
		{[]string{"spiffe://portico.dev/gateway/ns/GW"}, "", "", false},
		{[]string{"spiffe://portico.dev/gateway/ns/gw?x=1"}, "", "", false},
		{[]string{"spiffe://portico.dev:1/gateway/ns/gw"}, "", "", false},
		{[]string{"https://portico.dev/gateway/ns/gw"}, "", "", false},
		{[]string{"spiffe://portico.dev/other/ns/gw"}, "", "", false},
		{[]string{"spiffe://portico.dev/gateway/ns/a", "spiffe://portico.dev/gateway/ns/b"}, "", "", false},
		{[]string{"spiffe://portico.dev/gateway/ns/%67w"}, "", "", false},
	} {
		c := &x509.Certificate{URIs: []*url.URL{other}}
		for _, u := range tc.uris {
			c.URIs = append(c.URIs, parse(u))
		}
		ns, name, ok := GatewayFromCert(c)
		if ns != tc.ns || name != tc.name || ok != tc.ok {
			t.Errorf("GatewayFromCert(%v) = %q %q %v, want %q %q %v", tc.uris, ns, name, ok, tc.ns, tc.name, tc.ok)
		}
	}
	if _, _, ok := GatewayFromCert(nil); ok {
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
