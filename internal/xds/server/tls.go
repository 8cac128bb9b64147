package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/portico-dev/portico/internal/pki"
)

// CertSource provides the current serving certificate of the xDS server and
// the pool of CAs its clients' certificates must chain to. The
// controller's is internal/pki/certstore's ServingSource (this package
// does not import it, to stay free of the Kubernetes client libraries);
// it is asked on every TLS handshake, so a rotated certificate or CA
// bundle is used without a restart.
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
func TLSConfig(src CertSource) *tls.Config { return ServerTLSConfig(src, true) }

// ServerTLSConfig is TLSConfig, or, with clientAuth false, a configuration
// that asks for no client certificate (TLS keeps the traffic private but
// does not authenticate proxies: see Server.UnauthenticatedSecrets); the
// source's pool may then be nil.
func ServerTLSConfig(src CertSource, clientAuth bool) *tls.Config {
	auth := tls.NoClientCert
	if clientAuth {
		auth = tls.RequireAndVerifyClientCert
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientAuth: auth,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool, err := src.Current()
			if err != nil {
				return nil, err
			}
			if cert == nil || (clientAuth && pool == nil) {
				return nil, errors.New("xds server: no serving certificate")
			}
			cfg := &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*cert},
				ClientAuth:   auth,
				NextProtos:   []string{"h2"},
			}
			if clientAuth {
				cfg.ClientCAs = pool
			}
			return cfg, nil
		},
	}
}

// FileSource is a CertSource of PEM files, for `portico standalone`: a
// serving certificate (chain) and its key, and optionally a bundle of the
// CAs client certificates must chain to. On each handshake it checks the
// files' size and modification time and loads them again when one
// changed, so a rotated certificate (a file replaced, or a Kubernetes
// Secret volume's atomic swap) is used without a restart. Files that do
// not load keep the last good certificate, and the error is logged.
type FileSource struct {
	certFile, keyFile, caFile string
	log                       *slog.Logger

	mu    sync.Mutex
	stamp string // sizes and times of the files loaded
	cert  *tls.Certificate
	pool  *x509.CertPool // nil without caFile
}

// NewFileSource loads certFile and keyFile, and caFile unless it is
// empty; it fails if they do not load.
func NewFileSource(certFile, keyFile, caFile string, log *slog.Logger) (*FileSource, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("xds server: a serving certificate needs both a certificate and a key file")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &FileSource{certFile: certFile, keyFile: keyFile, caFile: caFile, log: log}
	stamp, err := f.stampFiles()
	if err != nil {
		return nil, err
	}
	if err := f.load(stamp); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *FileSource) files() []string {
	out := []string{f.certFile, f.keyFile}
	if f.caFile != "" {
		out = append(out, f.caFile)
	}
	return out
}

// stampFiles identifies the files' current contents by size and time.
func (f *FileSource) stampFiles() (string, error) {
	var b strings.Builder
	for _, name := range f.files() {
		st, err := os.Stat(name)
		if err != nil {
			return "", fmt.Errorf("xds server: %w", err)
		}
		fmt.Fprintf(&b, "%s:%d:%d;", name, st.Size(), st.ModTime().UnixNano())
	}
	return b.String(), nil
}

// load reads the files and installs them, tagged with stamp. Called with
// f.mu held, or before f is shared.
func (f *FileSource) load(stamp string) error {
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return fmt.Errorf("xds server: serving certificate %s, key %s: %w", f.certFile, f.keyFile, err)
	}
	var pool *x509.CertPool
	if f.caFile != "" {
		data, err := os.ReadFile(f.caFile)
		if err != nil {
			return fmt.Errorf("xds server: client CA: %w", err)
		}
		if pool, err = pki.Pool(data); err != nil {
			return fmt.Errorf("xds server: client CA %s: %w", f.caFile, err)
		}
	}
	f.cert, f.pool, f.stamp = &cert, pool, stamp
	f.log.Info("xDS serving certificate loaded", "cert", f.certFile, "client_ca", f.caFile,
		"not_after", cert.Leaf.NotAfter)
	return nil
}

// Current returns the certificate and client CA pool (nil without a CA
// file), loading the files again first if they changed.
func (f *FileSource) Current() (*tls.Certificate, *x509.CertPool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	stamp, err := f.stampFiles()
	if err == nil && stamp != f.stamp {
		err = f.load(stamp)
	}
	if err != nil {
		f.log.Error("xDS serving certificate files unusable, keeping the loaded certificate", "error", err)
	}
	return f.cert, f.pool, nil
}
