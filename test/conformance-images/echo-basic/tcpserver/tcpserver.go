// Package tcpserver is the TCP backend of the Gateway API conformance suite:
// a line-based echo protocol served in plain TCP and, when a certificate is
// configured, over TLS.
//
// Portico wrote this package; it keeps the wire contract of the upstream
// sigs.k8s.io/gateway-api-conformance-images tcpserver package, whose types
// the suite's utils/tcp decodes:
//
//   - on connect (after the TLS handshake, on the TLS port) the server sends
//     WelcomeMessage;
//   - then it reads commands, one per line, and answers each with one line:
//     "PING" gets "PONG", "IS_TLS" gets "true" or "false", and "TEST" gets
//     the JSON encoding of TCPAssertions. Other lines are ignored.
package tcpserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"sigs.k8s.io/gateway-api-conformance-images/internal/echoutil"
)

// WelcomeMessage is the first line the server writes on every connection.
const WelcomeMessage = "Gateway API Test TCP Server\n"

// Context identifies the answering pod and the ports it serves.
type Context struct {
	Namespace string `json:"namespace"`
	Ingress   string `json:"ingress"`
	Service   string `json:"service"`
	Pod       string `json:"pod"`
	TCPPort   string `json:"tcpport"`
	TLSPort   string `json:"tlsport,omitempty"`
}

// TLSAssertions describe the TLS session of a connection to the TLS port.
// Version and CipherSuite are spelled as crypto/tls names them
// (tls.VersionName, tls.CipherSuiteName).
type TLSAssertions struct {
	Version            string `json:"version"`
	ServerName         string `json:"serverName"`
	NegotiatedProtocol string `json:"negotiatedProtocol,omitempty"`
	Curves             string `json:"curves,omitempty"`
	CipherSuite        string `json:"cipherSuite"`
}

// TCPAssertions is the answer to TEST: the pod context (its fields at the top
// level of the JSON object), whether the connection uses TLS, and the TLS
// details when it does.
type TCPAssertions struct {
	Context
	IsTLS        bool           `json:"isTLS"`
	TLSAssertion *TLSAssertions `json:"tls,omitempty"`
}

// Config is the server's deployment, as Main reads it from the environment.
type Config struct {
	TCPPort          int    // TCP_PORT, default 3000
	TLSPort          int    // TLS_PORT, default 8443
	TLSServerCert    string // TLS_SERVER_CERT: PEM certificate chain file
	TLSServerPrivKey string // TLS_SERVER_PRIV_KEY: PEM private key file
	// Context gives namespace (NAMESPACE), ingress (INGRESS_NAME), service
	// (SERVICE_NAME) and pod (POD_NAME); Run fills in the ports.
	Context Context
}

// ConfigFromEnv reads the server configuration from environment variables.
func ConfigFromEnv() (Config, error) {
	tcpPort, err := echoutil.Port("TCP_PORT", 3000)
	if err != nil {
		return Config{}, err
	}
	tlsPort, err := echoutil.Port("TLS_PORT", 8443)
	if err != nil {
		return Config{}, err
	}
	return Config{
		TCPPort:          tcpPort,
		TLSPort:          tlsPort,
		TLSServerCert:    os.Getenv("TLS_SERVER_CERT"),
		TLSServerPrivKey: os.Getenv("TLS_SERVER_PRIV_KEY"),
		Context:          podContext(echoutil.PodFromEnv()),
	}, nil
}

// podContext is p as the TCP contract's Context (Run fills in the ports).
func podContext(p echoutil.Pod) Context {
	return Context{Namespace: p.Namespace, Ingress: p.Ingress, Service: p.Service, Pod: p.Name}
}

// Main runs the server configured by the environment until SIGINT or
// SIGTERM; echo-basic calls it when TCP_ECHO_SERVER is set.
func Main() { echoutil.Main("tcp echo server", ConfigFromEnv, Run) }

// Run listens on all interfaces at the configured ports (the TLS one only
// when both certificate and key are set) and serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	tlsConfig, err := echoutil.ServerTLSConfig(cfg.TLSServerCert, cfg.TLSServerPrivKey)
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	plain, err := lc.Listen(ctx, "tcp", fmt.Sprintf(":%d", cfg.TCPPort))
	if err != nil {
		return err
	}
	pod := cfg.Context
	pod.TCPPort = strconv.Itoa(plain.Addr().(*net.TCPAddr).Port)
	pod.TLSPort = strconv.Itoa(cfg.TLSPort)
	var secure net.Listener
	if tlsConfig != nil {
		secure, err = lc.Listen(ctx, "tcp", fmt.Sprintf(":%d", cfg.TLSPort))
		if err != nil {
			plain.Close()
			return err
		}
		pod.TLSPort = strconv.Itoa(secure.Addr().(*net.TCPAddr).Port)
	}
	s := &Server{Context: pod, TLSConfig: tlsConfig}
	return s.Serve(ctx, plain, secure)
}

// Server answers the echo protocol on the listeners given to Serve.
type Server struct {
	// Context is reported by TEST.
	Context Context
	// TLSConfig terminates TLS on the secure listener; required when Serve
	// gets one.
	TLSConfig *tls.Config
	// Logger receives connection events; nil means slog.Default().
	Logger *slog.Logger
}

// Serve accepts connections on plain (speaking the protocol directly) and on
// secure (TLS first), either of which may be nil, until ctx ends or a
// listener fails. It then closes both listeners and every open connection
// and returns once all connection handlers have finished: nil when ctx
// ended, otherwise the listener's error.
func (s *Server) Serve(ctx context.Context, plain, secure net.Listener) error {
	if plain == nil && secure == nil {
		return errors.New("tcpserver: no listener")
	}
	if secure != nil && s.TLSConfig == nil {
		return errors.New("tcpserver: a TLS listener needs a TLS configuration")
	}
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var listeners []net.Listener
	if plain != nil {
		listeners = append(listeners, plain)
	}
	if secure != nil {
		listeners = append(listeners, tls.NewListener(secure, s.TLSConfig))
	}

	var (
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
		wg    sync.WaitGroup
	)
	stopped := context.AfterFunc(ctx, func() {
		for _, l := range listeners {
			l.Close()
		}
		mu.Lock()
		defer mu.Unlock()
		for c := range conns {
			c.Close()
		}
	})
	defer stopped()

	errs := make(chan error, len(listeners))
	for _, l := range listeners {
		log.Info("tcp echo server listening", "address", l.Addr().String(), "tls", l != plain)
		go func() {
			errs <- acceptLoop(ctx, l, log, func(c net.Conn) {
				mu.Lock()
				if ctx.Err() != nil {
					mu.Unlock()
					c.Close()
					return
				}
				conns[c] = struct{}{}
				wg.Add(1)
				mu.Unlock()
				go func() {
					defer wg.Done()
					s.handle(ctx, c, log)
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
				}()
			})
		}()
	}
	// Whichever accept loop ends first, for whatever reason, stops the rest.
	first := <-errs
	cancel()
	for range len(listeners) - 1 {
		if err := <-errs; first == nil {
			first = err
		}
	}
	wg.Wait()
	return first
}

// acceptLoop hands accepted connections to handle until ctx ends (nil) or
// the listener is closed by someone else (its error). Other accept errors,
// such as running out of file descriptors, are retried after a pause.
func acceptLoop(ctx context.Context, l net.Listener, log *slog.Logger, handle func(net.Conn)) error {
	pause := 5 * time.Millisecond
	for {
		c, err := l.Accept()
		if ctx.Err() != nil {
			if c != nil {
				c.Close()
			}
			return nil
		}
		if errors.Is(err, net.ErrClosed) {
			return err
		}
		if err != nil {
			log.Error("accept failed", "error", err)
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			pause = min(2*pause, time.Second)
			continue
		}
		pause = 5 * time.Millisecond
		handle(c)
	}
}

// handshakeTimeout bounds the TLS handshake of one connection.
const handshakeTimeout = 10 * time.Second

func (s *Server) handle(ctx context.Context, conn net.Conn, log *slog.Logger) {
	defer conn.Close()
	answer := TCPAssertions{Context: s.Context}
	if tc, ok := conn.(*tls.Conn); ok {
		hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			log.Warn("TLS handshake failed", "remote", conn.RemoteAddr().String(), "error", err)
			return
		}
		answer.IsTLS = true
		answer.TLSAssertion = tlsAssertions(tc.ConnectionState())
	}
	payload, err := json.Marshal(answer)
	if err != nil {
		log.Error("encoding TEST answer", "error", err)
		return
	}
	payload = append(payload, '\n')

	if _, err := conn.Write([]byte(WelcomeMessage)); err != nil {
		return
	}
	lines := bufio.NewScanner(conn)
	for lines.Scan() {
		var reply []byte
		switch lines.Text() {
		case "TEST":
			reply = payload
		case "IS_TLS":
			reply = []byte(strconv.FormatBool(answer.IsTLS) + "\n")
		case "PING":
			reply = []byte("PONG\n")
		default:
			continue
		}
		if _, err := conn.Write(reply); err != nil {
			return
		}
	}
}

func tlsAssertions(st tls.ConnectionState) *TLSAssertions {
	a := &TLSAssertions{
		Version:            tls.VersionName(st.Version),
		ServerName:         st.ServerName,
		NegotiatedProtocol: st.NegotiatedProtocol,
		CipherSuite:        tls.CipherSuiteName(st.CipherSuite),
	}
	if st.CurveID != 0 {
		a.Curves = st.CurveID.String()
	}
	return a
}
