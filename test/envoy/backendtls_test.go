package envoy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/testenv"
)

// testCA is a CA that signs certificates for a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// issue returns a certificate (PEM) and its key, signed by ca, for the DNS
// names and URIs given, usable by servers and clients.
func (ca *testCA) issue(t *testing.T, dns []string, uris ...string) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: dns, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, u := range uris {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, pu)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}))
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pad)
}

// tlsBackendPort is where the test's TLS echo server listens (HTTPS).
const tlsBackendPort = 9443

// backendTLSObjects are a Service "secure" whose endpoint is the TLS echo
// server, routes to it on the quickstart's HTTP listener (Host
// secure.example), the CA ConfigMap and a BackendTLSPolicy with hostname
// and SANs as given.
func backendTLSObjects(caPEM, hostname, sans string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: secure, namespace: default}
spec:
  ports:
  - {name: https, port: 443, targetPort: %[1]d}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: secure-local
  namespace: default
  labels: {kubernetes.io/service-name: secure}
addressType: IPv4
ports:
- {name: https, port: %[1]d, protocol: TCP}
endpoints:
- addresses: [127.0.0.1]
  conditions: {ready: true}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: secure, namespace: default}
spec:
  parentRefs: [{name: quickstart, sectionName: http}]
  hostnames: [secure.example]
  rules:
  - backendRefs: [{name: secure, port: 443}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: backend-ca, namespace: default}
data:
  ca.crt: |
%[2]s
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: secure, namespace: default}
spec:
  targetRefs: [{group: "", kind: Service, name: secure, sectionName: https}]
  validation:
    caCertificateRefs: [{group: "", kind: ConfigMap, name: backend-ca}]
    hostname: %[3]s
%[4]s`, tlsBackendPort, indent(caPEM, 4), hostname, sans)
}

// echoTLS is the TLS part of the echo server's answer.
type echoTLS struct {
	TLS *struct {
		ServerName       string   `json:"serverName"`
		PeerCertificates []string `json:"peerCertificates"`
	} `json:"tls"`
}

// TestBackendTLSPolicy: Envoy connects to a TLS backend as the policy says
// (SNI, CA, SANs) and presents the Gateway's client certificate; a wrong
// name or an unusable CA gets 503, and nothing reaches the backend in
// plaintext.
func TestBackendTLSPolicy(t *testing.T) {
	ca := newTestCA(t, "backend CA")
	serverCert, serverKey := ca.issue(t, []string{"backend.example.com"}, "spiffe://example.com/ns/default/sa/secure")
	clientCA := newTestCA(t, "client CA")
	clientCert, clientKey := clientCA.issue(t, []string{"gateway.example.com"})

	s := startStack(t, map[string]string{"secure.yaml": backendTLSObjects(ca.pem, "backend.example.com", "")})
	dir := t.TempDir()
	files := map[string]string{"server.crt": serverCert, "server.key": serverKey, "client-ca.crt": clientCA.pem}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	echo := testenv.RequireEcho(t)
	testenv.StartProcess(t, "backend-secure", t.TempDir(), s.ns.Wrap([]string{echo}),
		"POD_NAME=secure", "NAMESPACE=default", "HTTP_PORT=9101", "H2C_PORT=9102", fmt.Sprintf("HTTPS_PORT=%d", tlsBackendPort),
		"TLS_SERVER_CERT="+filepath.Join(dir, "server.crt"), "TLS_SERVER_PRIVKEY="+filepath.Join(dir, "server.key"),
		"TLS_CLIENT_CACERTS="+filepath.Join(dir, "client-ca.crt"))
	s.waitListening(tlsBackendPort)
	c := s.client(nil)
	const url = "http://127.0.0.1:8080/"

	// The backend sees TLS with the policy's SNI.
	r := s.routed(c, url, "secure.example", "secure")
	var e echoTLS
	if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.TLS == nil {
		t.Fatalf("the backend saw no TLS: %v %s", err, r.body)
	}
	if e.TLS.ServerName != "backend.example.com" {
		t.Errorf("SNI %q, want backend.example.com", e.TLS.ServerName)
	}
	if len(e.TLS.PeerCertificates) != 0 {
		t.Errorf("a client certificate was presented without spec.tls.backend")
	}

	fails := func(what string) {
		t.Helper()
		s.eventually(15*time.Second, what, func() error {
			r, err := s.get(c, url, "secure.example")
			if err != nil {
				return err
			}
			if r.code != 503 {
				return fmt.Errorf("got %d %q", r.code, truncate(r.body, 200))
			}
			return nil
		})
	}

	// A hostname the certificate does not carry: the handshake fails.
	s.write("secure.yaml", backendTLSObjects(ca.pem, "wrong.example.com", ""))
	fails("503 with a wrong hostname")
	// SANs checked instead of the hostname: a URI the certificate has.
	s.write("secure.yaml", backendTLSObjects(ca.pem, "wrong.example.com",
		"    subjectAltNames: [{type: URI, uri: \"spiffe://example.com/ns/default/sa/secure\"}]"))
	s.routed(c, url, "secure.example", "secure")
	// A CA that did not sign the certificate.
	s.write("secure.yaml", backendTLSObjects(newTestCA(t, "other CA").pem, "backend.example.com", ""))
	fails("503 with another CA")
	// A CA that cannot be used: fail closed (the cluster has no endpoints).
	s.write("secure.yaml", strings.Replace(backendTLSObjects(ca.pem, "backend.example.com", ""), "name: backend-ca}]", "name: missing}]", 1))
	fails("503 with a missing CA")
	// The CA in a ClusterTrustBundle (feature ClusterTrustBundle).
	s.write("bundle.yaml", clusterTrustBundle("backend-cas", ca.pem))
	s.write("secure.yaml", strings.Replace(backendTLSObjects(ca.pem, "backend.example.com", ""), `{group: "", kind: ConfigMap, name: backend-ca}`,
		`{group: certificates.k8s.io, kind: ClusterTrustBundle, name: backend-cas}`, 1))
	s.routed(c, url, "secure.example", "secure")
	s.write("bundle.yaml", clusterTrustBundle("backend-cas", newTestCA(t, "other CA").pem))
	fails("503 with another CA in the bundle")

	// The Gateway's client certificate is presented to the backend.
	s.write("secure.yaml", backendTLSObjects(ca.pem, "backend.example.com", ""))
	gw := readExample(t, "gateway.yaml") + `
  tls:
    backend:
      clientCertificateRef: {name: backend-client}
`
	s.write("gateway.yaml", gw)
	s.write("client.yaml", fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: backend-client, namespace: default}
type: kubernetes.io/tls
stringData:
  tls.crt: |
%s
  tls.key: |
%s
`, indent(clientCert, 4), indent(clientKey, 4)))
	s.eventually(15*time.Second, "the client certificate presented", func() error {
		r, err := s.get(c, url, "secure.example")
		if err != nil {
			return err
		}
		var e echoTLS
		if json.Unmarshal([]byte(r.body), &e) != nil || e.TLS == nil || len(e.TLS.PeerCertificates) == 0 {
			return fmt.Errorf("got %d %q", r.code, truncate(r.body, 300))
		}
		if !strings.Contains(e.TLS.PeerCertificates[0], strings.Split(strings.TrimSpace(clientCert), "\n")[1]) {
			return fmt.Errorf("another client certificate: %s", e.TLS.PeerCertificates[0])
		}
		return nil
	})
}

// readExample reads a file of examples/quickstart.
func readExample(t *testing.T, name string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "examples", "quickstart", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
