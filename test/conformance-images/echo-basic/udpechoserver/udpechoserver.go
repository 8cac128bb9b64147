// Package udpechoserver is the UDP backend of the Gateway API conformance
// suite: every datagram it receives is answered, to its sender, with one
// datagram holding the JSON encoding of EchoResponse, for instance
//
//	{"request":"hello\n","namespace":"gateway-conformance-infra","ingress":"","service":"udp-echo","pod":"udp-echo-5d8f-x2x"}
//
// Portico wrote this package; it keeps the wire contract of the upstream
// sigs.k8s.io/gateway-api-conformance-images udpechoserver package, whose
// EchoResponse the suite decodes.
package udpechoserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"

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

// EchoResponse is the answer to one datagram: its payload, unchanged, and
// the pod context (its fields at the top level of the JSON object).
type EchoResponse struct {
	Request string `json:"request"`
	Context
}

// Config is the server's deployment, as Main reads it from the environment.
type Config struct {
	UDPPort int // UDP_PORT, default 8080
	Context Context
}

// ConfigFromEnv reads the server configuration from environment variables.
func ConfigFromEnv() (Config, error) {
	port, err := echoutil.Port("UDP_PORT", 8080)
	if err != nil {
		return Config{}, err
	}
	return Config{
		UDPPort: port,
		Context: podContext(echoutil.PodFromEnv()),
	}, nil
}

// podContext is p as the UDP contract's Context.
func podContext(p echoutil.Pod) Context {
	return Context{Namespace: p.Namespace, Ingress: p.Ingress, Service: p.Service, Pod: p.Name}
}

// Main runs the server configured by the environment until SIGINT or
// SIGTERM; echo-basic calls it when UDP_ECHO_SERVER is set.
func Main() { echoutil.Main("udp echo server", ConfigFromEnv, Run) }

// Run listens on all interfaces at the configured port and serves until ctx
// ends.
func Run(ctx context.Context, cfg Config) error {
	var lc net.ListenConfig
	conn, err := lc.ListenPacket(ctx, "udp", fmt.Sprintf(":%d", cfg.UDPPort))
	if err != nil {
		return err
	}
	s := &Server{Context: cfg.Context}
	return s.Serve(ctx, conn)
}

// Server answers datagrams on the connection given to Serve.
type Server struct {
	// Context is copied into every answer.
	Context Context
	// Logger receives one line per datagram; nil means slog.Default().
	Logger *slog.Logger
}

// maxDatagram is the largest UDP payload; longer ones cannot exist.
const maxDatagram = 64 << 10

// Serve answers every datagram read from conn until ctx ends (it then closes
// conn and returns nil) or reading fails for another reason (it returns that
// error).
func (s *Server) Serve(ctx context.Context, conn net.PacketConn) error {
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	log.Info("udp echo server listening", "address", conn.LocalAddr().String())

	buf := make([]byte, maxDatagram)
	for {
		n, from, err := conn.ReadFrom(buf)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Errors such as ICMP port unreachable reported for an
			// earlier answer concern one peer only: keep serving.
			log.Warn("reading datagram", "error", err)
			continue
		}
		answer, err := json.Marshal(EchoResponse{Request: string(buf[:n]), Context: s.Context})
		if err != nil {
			log.Error("encoding answer", "error", err)
			continue
		}
		log.Info("echoing datagram", "from", from.String(), "bytes", n)
		if _, err := conn.WriteTo(answer, from); err != nil {
			log.Warn("writing answer", "to", from.String(), "error", err)
		}
	}
}
