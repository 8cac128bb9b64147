// Package httpserver is the HTTP backend of the Gateway API conformance
// suite, the default mode of the echo-basic command. It serves
//
//   - HTTP/1.1 on the HTTP port;
//   - HTTP/1.1 and prior-knowledge HTTP/2 without TLS (h2c) on the H2C port,
//     where only HTTP/2 requests or requests asking to upgrade to h2c are
//     echoed, others getting 400 "Expected h2c request";
//   - HTTPS (HTTP/1.1 and HTTP/2) on the HTTPS port when a certificate is
//     configured, verifying client certificates against a CA bundle when one
//     is configured and a client presents a certificate.
//
// The HTTP and HTTPS ports route requests as Handler describes; the answer to
// most requests is a JSON RequestAssertions document describing the request.
//
// Portico wrote this package; it keeps the wire contract of the upstream
// sigs.k8s.io/gateway-api-conformance-images echo-basic HTTP server: the
// JSON field names the suite's utils/roundtripper decodes, the special paths,
// the X-Echo-Set-Header request header, and the "Echoing back request made
// to <request URI> to client (<address>)" line printed on standard output for
// every echoed request, which the suite's mirroring tests look for in pod
// logs.
package httpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"sigs.k8s.io/gateway-api-conformance-images/internal/echoutil"
)

// Context identifies the answering pod; its fields come from NAMESPACE,
// INGRESS_NAME, SERVICE_NAME and POD_NAME.
type Context struct {
	Namespace string `json:"namespace"`
	Ingress   string `json:"ingress"`
	Service   string `json:"service"`
	Pod       string `json:"pod"`
}

// RequestAssertions is the JSON answer to an echoed request. The pod context
// fields sit at the top level of the JSON object; "tls" is present only for
// requests that came over TLS.
type RequestAssertions struct {
	Path     string              `json:"path"` // the request URI as sent, query included
	Host     string              `json:"host"`
	Method   string              `json:"method"`
	Proto    string              `json:"proto"`
	Headers  map[string][]string `json:"headers"`
	HTTPPort string              `json:"httpPort"`
	Context
	TLS *TLSAssertions `json:"tls,omitempty"`
}

// TLSAssertions describe the TLS session of a request.
type TLSAssertions struct {
	Version            string   `json:"version"` // "TLSv1.3" or "TLSv1.2"
	PeerCertificates   []string `json:"peerCertificates,omitempty"`
	ServerName         string   `json:"serverName"`
	NegotiatedProtocol string   `json:"negotiatedProtocol,omitempty"`
	CipherSuite        string   `json:"cipherSuite"`
}

// Config is the server's deployment, as Main reads it from the environment.
type Config struct {
	HTTPPort  int // HTTP_PORT, default 3000
	H2CPort   int // H2C_PORT, default 3001
	HTTPSPort int // HTTPS_PORT, default 8443
	// TLS_SERVER_CERT and TLS_SERVER_PRIVKEY: PEM files; HTTPS is served
	// only when both are set.
	TLSServerCert    string
	TLSServerPrivKey string
	// TLS_CLIENT_CACERTS: optional PEM bundle; see ServerTLSConfig.
	TLSClientCACerts string
	Context          Context
}

// ConfigFromEnv reads the server configuration from environment variables.
func ConfigFromEnv() (Config, error) {
	var cfg Config
	var err error
	if cfg.HTTPPort, err = echoutil.Port("HTTP_PORT", 3000); err != nil {
		return Config{}, err
	}
	if cfg.H2CPort, err = echoutil.Port("H2C_PORT", 3001); err != nil {
		return Config{}, err
	}
	if cfg.HTTPSPort, err = echoutil.Port("HTTPS_PORT", 8443); err != nil {
		return Config{}, err
	}
	cfg.TLSServerCert = os.Getenv("TLS_SERVER_CERT")
	cfg.TLSServerPrivKey = os.Getenv("TLS_SERVER_PRIVKEY")
	cfg.TLSClientCACerts = os.Getenv("TLS_CLIENT_CACERTS")
	p := echoutil.PodFromEnv()
	cfg.Context = Context{Namespace: p.Namespace, Ingress: p.Ingress, Service: p.Service, Pod: p.Name}
	return cfg, nil
}

// ServerTLSConfig loads the HTTPS server certificate and key; both empty
// gives nil (no HTTPS). When clientCAFile is set, clients may present a
// certificate, which must then chain to one of the file's certificates
// (tls.VerifyClientCertIfGiven): clients without one are still served.
func ServerTLSConfig(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cfg, err := echoutil.ServerTLSConfig(certFile, keyFile)
	if err != nil || cfg == nil {
		return nil, err
	}
	if clientCAFile != "" {
		pool, err := echoutil.CertPool(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("loading client CA certificates: %w", err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return cfg, nil
}

// Main runs the server configured by the environment until SIGINT or
// SIGTERM.
func Main() { echoutil.Main("http echo server", ConfigFromEnv, Run) }

// Run listens on all interfaces at the configured ports (HTTPS only when a
// certificate and key are set) and serves until ctx ends.
func Run(ctx context.Context, cfg Config) (err error) {
	tlsConfig, err := ServerTLSConfig(cfg.TLSServerCert, cfg.TLSServerPrivKey, cfg.TLSClientCACerts)
	if err != nil {
		return err
	}
	var (
		lc     net.ListenConfig
		ls     Listeners
		opened []net.Listener
	)
	defer func() {
		if err != nil {
			for _, l := range opened {
				l.Close()
			}
		}
	}()
	listen := func(port int) (net.Listener, error) {
		l, err := lc.Listen(ctx, "tcp", fmt.Sprintf(":%d", port))
		if err == nil {
			opened = append(opened, l)
		}
		return l, err
	}
	if ls.HTTP, err = listen(cfg.HTTPPort); err != nil {
		return err
	}
	if ls.H2C, err = listen(cfg.H2CPort); err != nil {
		return err
	}
	if tlsConfig != nil {
		if ls.HTTPS, err = listen(cfg.HTTPSPort); err != nil {
			return err
		}
	}
	s := &Server{
		Context:   cfg.Context,
		HTTPPort:  strconv.Itoa(ls.HTTP.Addr().(*net.TCPAddr).Port),
		TLSConfig: tlsConfig,
	}
	return s.Serve(ctx, ls)
}

// Listeners are the sockets Serve uses; a nil one is not served.
type Listeners struct {
	HTTP  net.Listener // HTTP/1.1, routed by Handler
	H2C   net.Listener // HTTP/1.1 and h2c, H2CHandler
	HTTPS net.Listener // TLS, HTTP/1.1 and HTTP/2, routed by Handler
}

// Server is the HTTP echo server. Its zero value is usable, with an empty
// pod context and no HTTPS.
type Server struct {
	// Context is reported in every echo.
	Context Context
	// HTTPPort is reported as "httpPort" in every echo, whichever port the
	// request came to.
	HTTPPort string
	// TLSConfig terminates TLS on the HTTPS listener; required when Serve
	// gets one. ServerTLSConfig makes it from files.
	TLSConfig *tls.Config
	// Log receives the request log lines; nil means standard output.
	Log io.Writer

	logMu   sync.Mutex
	retries retrySimulation
	wsMu    sync.Mutex
	ws      map[io.Closer]struct{} // open websocket connections
	wsDone  bool                   // Serve is stopping: close new websockets at once
}

// logf writes one line to the request log.
func (s *Server) logf(format string, args ...any) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	w := s.Log
	if w == nil {
		w = os.Stdout
	}
	fmt.Fprintf(w, format+"\n", args...)
}

// Serve serves the given listeners until ctx ends or one of them fails; call
// it once per Server.
// Requests in progress then get a few seconds to finish before their
// connections, and every websocket, are closed. It returns nil when ctx
// ended, otherwise the first serving error.
func (s *Server) Serve(ctx context.Context, ls Listeners) error {
	if ls.HTTP == nil && ls.H2C == nil && ls.HTTPS == nil {
		return errors.New("http echo: no listener")
	}
	if ls.HTTPS != nil && s.TLSConfig == nil {
		return errors.New("http echo: an HTTPS listener needs a TLS configuration")
	}
	type served struct {
		srv   *http.Server
		serve func() error
	}
	var servers []served
	newServer := func(h http.Handler) *http.Server {
		return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	}
	if l := ls.HTTP; l != nil {
		srv := newServer(s.Handler())
		servers = append(servers, served{srv, func() error { return srv.Serve(l) }})
		s.logf("Starting server, listening on %s (http)", l.Addr())
	}
	if l := ls.H2C; l != nil {
		srv := newServer(s.H2CHandler())
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetUnencryptedHTTP2(true)
		servers = append(servers, served{srv, func() error { return srv.Serve(l) }})
		s.logf("Starting server, listening on %s (h2c)", l.Addr())
	}
	if l := ls.HTTPS; l != nil {
		srv := newServer(s.Handler())
		srv.TLSConfig = s.TLSConfig
		servers = append(servers, served{srv, func() error { return srv.ServeTLS(l, "", "") }})
		s.logf("Starting server, listening on %s (https)", l.Addr())
	}

	errs := make(chan error, len(servers))
	for _, sv := range servers {
		go func() { errs <- sv.serve() }()
	}
	var first error
	select {
	case <-ctx.Done():
	case first = <-errs:
	}
	s.closeWebsockets()
	var wg sync.WaitGroup
	for _, sv := range servers {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(context.Background(), echoutil.ShutdownGrace)
			defer cancel()
			if sv.srv.Shutdown(sctx) != nil {
				sv.srv.Close()
			}
		})
	}
	wg.Wait()
	return first
}

func (s *Server) trackWebsocket(c io.Closer, open bool) {
	s.wsMu.Lock()
	defer s.wsMu.Unlock()
	if s.ws == nil {
		s.ws = map[io.Closer]struct{}{}
	}
	if open && s.wsDone {
		c.Close()
	} else if open {
		s.ws[c] = struct{}{}
	} else {
		delete(s.ws, c)
	}
}

func (s *Server) closeWebsockets() {
	s.wsMu.Lock()
	defer s.wsMu.Unlock()
	s.wsDone = true
	for c := range s.ws {
		c.Close()
	}
}
