package envoy

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
)

// tcpOnTLSListener adds to the quickstart Gateway a TLS listener of mode
// Terminate on 8883 (the quickstart's certificate) and a TCPRoute on it
// to the api Service.
const tcpOnTLSListener = `
  - name: tls-terminate
    port: 8883
    protocol: TLS
    tls:
      mode: Terminate
      certificateRefs:
      - kind: Secret
        name: quickstart-tls
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: decrypted, namespace: default}
spec:
  parentRefs: [{name: quickstart, sectionName: tls-terminate}]
  rules:
  - backendRefs: [{name: api, port: 80}]
`

// TestTCPRouteOnTLSTerminate: a TCPRoute on a TLS listener of mode
// Terminate gets the decrypted stream, through Portico standalone and
// Envoy: an HTTPS request to the listener is answered by the plain-HTTP
// api backend, the TLS ended by Envoy with the listener's certificate.
func TestTCPRouteOnTLSTerminate(t *testing.T) {
	s := startStack(t, map[string]string{"gateway.yaml": readExample(t, "gateway.yaml") + tcpOnTLSListener}, quickstartBackends...)
	pool := x509.NewCertPool()
	pool.AddCert(quickstartCert(t))
	c := s.client(&tls.Config{ServerName: "localhost", RootCAs: pool})
	r := s.routed(c, "https://127.0.0.1:8883/any/path", "whatever.example", "api")
	if r.echo.Path != "/any/path" {
		t.Errorf("path %q: the stream was not forwarded as it is", r.echo.Path)
	}
}
