package envoy

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/internal/testenv"
)

// TestQuickstart serves examples/quickstart, unchanged, through Envoy and
// checks what its README promises.
func TestQuickstart(t *testing.T) {
	s := startStack(t, nil, quickstartBackends...)
	c := s.client(nil)

	t.Run("weighted split with a response header", func(t *testing.T) {
		s.routed(c, "http://127.0.0.1:8080/", "localhost", "app-v1")
		counts := map[string]int{}
		const n = 300
		for i := 0; i < n; i++ {
			r, err := s.get(c, "http://127.0.0.1:8080/split", "app.example.com")
			if err != nil {
				t.Fatal(err)
			}
			if r.echo == nil {
				t.Fatalf("request %d: %d %s", i, r.code, r.body)
			}
			if got := r.header.Get("X-Served-By"); got != "portico" {
				t.Fatalf("X-Served-By = %q, want portico", got)
			}
			counts[r.echo.Pod]++
		}
		// 90/10: with n = 300 the share of app-v1 is 0.9 ± 0.017 (one
		// standard deviation); 0.82–0.97 is more than four either side.
		share := float64(counts["app-v1"]) / n
		if counts["app-v2"] == 0 || share < 0.82 || share > 0.97 || counts["app-v1"]+counts["app-v2"] != n {
			t.Fatalf("split 90/10 over %d requests gave %v", n, counts)
		}
	})

	t.Run("redirect", func(t *testing.T) {
		r, err := s.get(c, "http://127.0.0.1:8080/old", "localhost")
		if err != nil {
			t.Fatal(err)
		}
		if r.code != 301 || r.header.Get("Location") != "http://localhost:8080/new" {
			t.Fatalf("got %d Location %q, want 301 http://localhost:8080/new", r.code, r.header.Get("Location"))
		}
	})

	t.Run("header match and prefix rewrite", func(t *testing.T) {
		r := s.routed(c, "http://127.0.0.1:8080/beta/home", "localhost", "app-v2", "X-Beta", "1")
		if r.echo.Path != "/home" {
			t.Fatalf("app-v2 got path %q, want /home", r.echo.Path)
		}
		// Without the header the request falls through to route app.
		r, err := s.get(c, "http://127.0.0.1:8080/beta/home", "localhost")
		if err != nil {
			t.Fatal(err)
		}
		if r.echo == nil || r.echo.Path != "/beta/home" {
			t.Fatalf("without X-Beta: %d %s", r.code, truncate(r.body, 200))
		}
	})

	t.Run("request header added", func(t *testing.T) {
		r := s.routed(c, "http://127.0.0.1:8080/api/items", "localhost", "api")
		if got := r.echo.Headers["X-Gateway"]; len(got) != 1 || got[0] != "portico-quickstart" {
			t.Fatalf("api got X-Gateway %q, want [portico-quickstart]", got)
		}
	})

	t.Run("unknown host", func(t *testing.T) {
		r, err := s.get(c, "http://127.0.0.1:8080/", "other.test")
		if err != nil {
			t.Fatal(err)
		}
		if r.code != 404 || r.echo != nil {
			t.Fatalf("Host other.test: %d %s, want Envoy's 404", r.code, truncate(r.body, 200))
		}
	})

	t.Run("HTTPS with SNI and the certificate by SDS", func(t *testing.T) {
		want := quickstartCert(t)
		pool := x509.NewCertPool()
		pool.AddCert(want)
		for _, sni := range []string{"localhost", "app.example.com"} {
			var peer *x509.Certificate
			conf := &tls.Config{ServerName: sni, RootCAs: pool, VerifyConnection: func(cs tls.ConnectionState) error {
				peer = cs.PeerCertificates[0]
				return nil
			}}
			r := s.routed(s.client(conf), "https://127.0.0.1:8443/api/x", sni, "api")
			if !bytes.Equal(peer.Raw, want.Raw) {
				t.Fatalf("SNI %s: Envoy presented %s, want the quickstart certificate", sni, peer.Subject)
			}
			if r.echo.Host != sni {
				t.Fatalf("SNI %s: backend saw Host %q", sni, r.echo.Host)
			}
		}
		// The certificate is a dynamic secret, not in the bootstrap.
		_, dump, err := s.envoy.Admin(context.Background(), "/config_dump?resource=dynamic_active_secrets")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(dump, "quickstart-tls") {
			t.Fatalf("Envoy has no dynamic secret for quickstart-tls:\n%s", truncate(dump, 2000))
		}
	})
}

// quickstartCert is the certificate of examples/quickstart/tls-secret.yaml.
func quickstartCert(t *testing.T) *x509.Certificate {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "examples", "quickstart", "tls-secret.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sec corev1.Secret
	if err := yaml.Unmarshal(data, &sec); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"])
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// tlsFor trusts cert and sends sni.
func tlsFor(cert *x509.Certificate, sni string) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{ServerName: sni, RootCAs: pool}
}
