package envoy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/ir"
)

// testCA and newTestCA: backendtls_test.go.

// client is a client certificate signed by ca.
func (ca *testCA) client(t *testing.T, name string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestClientCertificateValidation: terminating chains with a client
// validation (ir.ClientValidation) through a real Envoy. AllowValidOnly
// fails the handshake of a client without a certificate and of one with a
// certificate of another CA, and passes one signed by the CA;
// AllowInsecureFallback passes all three. A chain without validation on
// the same listener asks for no certificate.
func TestClientCertificateValidation(t *testing.T) {
	s := newL4Stack(t)
	envoyCert := selfSigned(t, "strict.example.com", "lax.example.com", "open.example.com")
	backend := s.tcpBackend(func(c net.Conn) {
		line, err := readLine(c)
		if err != nil {
			return
		}
		io.WriteString(c, line)
	})
	ca, other := newTestCA(t, "trusted CA"), newTestCA(t, "other CA")
	chain := func(name string, cv *ir.ClientValidation) *ir.FilterChain {
		return &ir.FilterChain{Name: name, ServerNames: []string{name + ".example.com"}, CertificateSecrets: []string{"default/cert"},
			ClientValidation: cv,
			TCP:              &ir.TCPForward{Name: "tlsroute/default/" + name + "/rule/0", Backends: []ir.WeightedBackend{backendTo("default/echo/9000", 1)}}}
	}
	s.start(l4IR([]*ir.Listener{{Name: "tls", Port: tlsPort, Protocol: ir.ProtocolHTTPS, FilterChains: []*ir.FilterChain{
		chain("strict", &ir.ClientValidation{CACertificates: ca.pem, Mode: ir.ClientValidationAllowValidOnly}),
		chain("lax", &ir.ClientValidation{CACertificates: ca.pem, Mode: ir.ClientValidationAllowInsecureFallback}),
		chain("open", nil),
	}}}, []*ir.Cluster{tcpCluster("default/echo/9000", backend)},
		&ir.Secret{Name: "default/cert", Cert: envoyCert.certPEM, Key: envoyCert.keyPEM}))

	roots := poolOf(envoyCert)
	good, bad := ca.client(t, "good client"), other.client(t, "bad client")
	// try shakes hands and echoes one line: with TLS 1.3 a rejected client
	// certificate shows only on the first read.
	try := func(sni string, cert *tls.Certificate) error {
		raw, err := s.dial(tlsPort)
		if err != nil {
			return err
		}
		conf := &tls.Config{ServerName: sni, RootCAs: roots, MinVersion: tls.VersionTLS12}
		if cert != nil {
			conf.Certificates = []tls.Certificate{*cert}
		}
		c := tls.Client(raw, conf)
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if err := c.Handshake(); err != nil {
			return err
		}
		if _, err := io.WriteString(c, "ping\n"); err != nil {
			return err
		}
		line, err := readLine(c)
		if err != nil {
			return err
		}
		if line != "ping\n" {
			return fmt.Errorf("echoed %q", line)
		}
		return nil
	}
	for _, tc := range []struct {
		sni    string
		who    string
		cert   *tls.Certificate
		passes bool
	}{
		{"strict", "no certificate", nil, false},
		{"strict", "the CA's certificate", &good, true},
		{"strict", "another CA's certificate", &bad, false},
		{"lax", "no certificate", nil, true},
		{"lax", "the CA's certificate", &good, true},
		{"lax", "another CA's certificate", &bad, true},
		{"open", "no certificate", nil, true},
	} {
		err := try(tc.sni+".example.com", tc.cert)
		if tc.passes && err != nil {
			t.Errorf("%s with %s: %v, want it served", tc.sni, tc.who, err)
		}
		if !tc.passes && err == nil {
			t.Errorf("%s with %s: served, want a handshake failure", tc.sni, tc.who)
		}
	}
	if n := s.stat("listener.0.0.0.0_10443.ssl.fail_verify_no_cert"); n == 0 {
		t.Errorf("fail_verify_no_cert = %d after a client without a certificate on AllowValidOnly", n)
	}
}

// TestGatewayFrontendValidation: the quickstart Gateway with
// spec.tls.frontend through Portico standalone and Envoy. By default
// (AllowValidOnly, the CA in an Opaque Secret's ca.crt) the HTTPS listener
// refuses a client without a certificate and one of another CA, and serves
// one of the CA; switched to AllowInsecureFallback it serves all three. The
// plain HTTP listener never asks for a certificate.
func TestGatewayFrontendValidation(t *testing.T) {
	ca, other := newTestCA(t, "trusted CA"), newTestCA(t, "other CA")
	gateway := func(mode string) string {
		return `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: quickstart
  namespace: default
spec:
  gatewayClassName: portico
  tls:
    frontend:
      default:
        validation:
          mode: ` + mode + `
          caCertificateRefs:
          - {group: "", kind: Secret, name: client-ca}
  listeners:
  - name: http
    port: 8080
    protocol: HTTP
  - name: https
    port: 8443
    protocol: HTTPS
    tls:
      certificateRefs:
      - kind: Secret
        name: quickstart-tls
`
	}
	caSecret := "apiVersion: v1\nkind: Secret\nmetadata: {name: client-ca, namespace: default}\ntype: Opaque\nstringData:\n  ca.crt: |\n"
	for _, l := range strings.Split(strings.TrimSpace(ca.pem), "\n") {
		caSecret += "    " + l + "\n"
	}
	s := startStack(t, map[string]string{"gateway.yaml": gateway("AllowValidOnly"), "client-ca.yaml": caSecret}, quickstartBackends...)
	pool := x509.NewCertPool()
	pool.AddCert(quickstartCert(t))
	good, bad := ca.client(t, "good"), other.client(t, "bad")
	client := func(cert *tls.Certificate) *http.Client {
		conf := &tls.Config{ServerName: "localhost", RootCAs: pool}
		if cert != nil {
			conf.Certificates = []tls.Certificate{*cert}
		}
		c := s.client(conf)
		c.Transport.(*http.Transport).DisableKeepAlives = true
		return c
	}
	const url = "https://127.0.0.1:8443/api/x"
	s.routed(client(&good), url, "localhost", "api")
	for who, c := range map[string]*http.Client{"no certificate": client(nil), "another CA's certificate": client(&bad)} {
		if r, err := s.get(c, url, "localhost"); err == nil {
			t.Errorf("AllowValidOnly, %s: %d, want a handshake failure", who, r.code)
		}
	}
	s.routed(s.client(nil), "http://127.0.0.1:8080/api/x", "localhost", "api")

	s.write("gateway.yaml", gateway("AllowInsecureFallback"))
	s.routed(client(nil), url, "localhost", "api")
	s.routed(client(&bad), url, "localhost", "api")
	s.routed(client(&good), url, "localhost", "api")

	// The CA in a ClusterTrustBundle (feature ClusterTrustBundle): the
	// other CA's bundle lets only its clients in.
	s.write("bundle.yaml", clusterTrustBundle("client-cas", other.pem))
	s.write("gateway.yaml", strings.Replace(gateway("AllowValidOnly"), `{group: "", kind: Secret, name: client-ca}`,
		`{group: certificates.k8s.io, kind: ClusterTrustBundle, name: client-cas}`, 1))
	s.eventually(15*time.Second, "the bundle's CA checks clients", func() error {
		if r, err := s.get(client(&good), url, "localhost"); err == nil {
			return fmt.Errorf("a client of a CA not in the bundle got %d", r.code)
		}
		return nil
	})
	s.routed(client(&bad), url, "localhost", "api")
	if r, err := s.get(client(nil), url, "localhost"); err == nil {
		t.Errorf("ClusterTrustBundle, no certificate: %d, want a handshake failure", r.code)
	}
}

// clusterTrustBundle is a ClusterTrustBundle named name holding caPEM.
func clusterTrustBundle(name, caPEM string) string {
	return fmt.Sprintf(`apiVersion: certificates.k8s.io/v1
kind: ClusterTrustBundle
metadata: {name: %s}
spec:
  trustBundle: |
%s
`, name, indent(caPEM, 4))
}
