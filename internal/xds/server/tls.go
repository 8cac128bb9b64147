package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// CertSource provides the current serving certificate of the xDS server and
// the pool of CAs its clients' certificates must chain to.
// pki.ServingSource is one; it is asked on every TLS handshake, so a
// rotated certificate or CA bundle is used without a restart.
type CertSource interface {
	Current() (*tls.Certificate, *x509.CertPool, error)
}

// CertSourceFunc adapts a function to CertSource.
type CertSourceFunc func() (*tls.Certificate, *x509.CertPool, error)

// Current calls f.
func (f CertSourceFunc) Current() (*tls.Certificate, *x509.CertPool, error) { return f() }

// TLSConfig returns the mTLS configuration of the xDS server: TLS 1.2 or
// later, and a client certificate verified against the source's CA pool is
// required. Each handshake takes the source's current certificate and pool;
// while the source has none, handshakes fail.
func TLSConfig(src CertSource) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientAuth: tls.RequireAndVerifyClientCert,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool, err := src.Current()
			if err != nil {
				return nil, err
			}
			if cert == nil || pool == nil {
				return nil, errors.New("xds server: no serving certificate")
			}
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*cert},
				ClientAuth:   tls.RequireAndVerifyClientCert,
				ClientCAs:    pool,
				NextProtos:   []string{"h2"},
			}, nil
		},
	}
}
