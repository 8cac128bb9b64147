package envoy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
)

// TestPlaintextWithholdsSecrets: `portico standalone` serving plaintext
// xDS without --xds-unauthenticated-secrets sends the quickstart's Envoy
// everything but the HTTPS listener's private key. Envoy goes LIVE (once
// its initial fetch of the secret times out), HTTP is served, HTTPS
// refuses handshakes, and Portico says why in its log and metrics.
func TestPlaintextWithholdsSecrets(t *testing.T) {
	s := startStackWith(t, []string{withheldSecrets}, nil, quickstartBackends...)

	s.routed(s.client(nil), "http://127.0.0.1:8080/api/x", "localhost", "api")

	pool := x509.NewCertPool()
	pool.AddCert(quickstartCert(t))
	c := s.client(&tls.Config{ServerName: "localhost", RootCAs: pool})
	for i := 0; i < 3; i++ {
		if r, err := s.get(c, "https://127.0.0.1:8443/api/x", "localhost"); err == nil {
			t.Fatalf("HTTPS served without its private key: %d %s", r.code, truncate(r.body, 200))
		}
	}
	_, dump, err := s.envoy.Admin(context.Background(), "/config_dump?resource=dynamic_active_secrets")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dump, "BEGIN") || strings.Contains(dump, "inline_bytes") {
		t.Fatalf("Envoy holds secret material:\n%s", truncate(dump, 2000))
	}

	if v := s.metric(`portico_xds_secrets_withheld{gateway="default/quickstart"}`); v != 1 {
		t.Errorf("portico_xds_secrets_withheld = %v, want 1", v)
	}
	if v := s.metric(`portico_xds_transport_security{mode="plaintext"}`); v != 1 {
		t.Errorf("portico_xds_transport_security{mode=plaintext} = %v, want 1", v)
	}
	logs := s.portico.Output()
	for _, want := range []string{`level=WARN msg="xDS is served without TLS`,
		`level=WARN msg="TLS secrets of this gateway are withheld`} {
		if !strings.Contains(logs, want) {
			t.Errorf("Portico's log lacks %q", want)
		}
	}
}
