// Package grpc is the gRPC backend of the Gateway API conformance suite: the
// GrpcEcho service of grpcecho.proto, served in plaintext HTTP/2 and, when a
// certificate is configured, over TLS, with gRPC server reflection.
//
// Portico wrote this package; it keeps the behaviour of the upstream
// sigs.k8s.io/gateway-api-conformance-images grpc package:
//
//   - Echo and EchoTwo answer with Assertions: the method's full name (such as
//     "/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/Echo"), one
//     Header per incoming metadata value (":authority" included), the
//     authority, the pod Context and, over TLS only, TLSAssertions (version
//     "TLSv1.3" or "TLSv1.2", SNI, cipher suite, PEM client certificates);
//   - EchoThree is left unimplemented and fails with codes.Unimplemented.
package grpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"sigs.k8s.io/gateway-api-conformance-images/internal/echoutil"

	pb "sigs.k8s.io/gateway-api-conformance-images/echo-basic/grpcechoserver"
)

// Config is the server's deployment, as Main reads it from the environment.
type Config struct {
	HTTPPort         int    // HTTP_PORT: plaintext port, default 3000
	HTTPSPort        int    // HTTPS_PORT: TLS port, default 8443
	TLSServerCert    string // TLS_SERVER_CERT: PEM certificate chain file
	TLSServerPrivKey string // TLS_SERVER_PRIV_KEY: PEM private key file
	// PodContext gives NAMESPACE, INGRESS_NAME, SERVICE_NAME and POD_NAME.
	PodContext *pb.Context
}

// ConfigFromEnv reads the server configuration from environment variables.
func ConfigFromEnv() (Config, error) {
	httpPort, err := echoutil.Port("HTTP_PORT", 3000)
	if err != nil {
		return Config{}, err
	}
	httpsPort, err := echoutil.Port("HTTPS_PORT", 8443)
	if err != nil {
		return Config{}, err
	}
	return Config{
		HTTPPort:         httpPort,
		HTTPSPort:        httpsPort,
		TLSServerCert:    os.Getenv("TLS_SERVER_CERT"),
		TLSServerPrivKey: os.Getenv("TLS_SERVER_PRIV_KEY"),
		PodContext:       podContext(echoutil.PodFromEnv()),
	}, nil
}

// podContext is p as the gRPC contract's Context.
func podContext(p echoutil.Pod) *pb.Context {
	return &pb.Context{Namespace: p.Namespace, Ingress: p.Ingress, ServiceName: p.Service, Pod: p.Name}
}

// Main runs the server configured by the environment until SIGINT or
// SIGTERM; echo-basic calls it when GRPC_ECHO_SERVER is set.
func Main() { echoutil.Main("grpc echo server", ConfigFromEnv, Run) }

// Run listens on all interfaces at the configured ports (the TLS one only
// when both certificate and key are set) and serves until ctx ends.
func Run(ctx context.Context, cfg Config) error {
	tlsConfig, err := echoutil.ServerTLSConfig(cfg.TLSServerCert, cfg.TLSServerPrivKey)
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	plain, err := lc.Listen(ctx, "tcp", fmt.Sprintf(":%d", cfg.HTTPPort))
	if err != nil {
		return err
	}
	var secure net.Listener
	if tlsConfig != nil {
		if secure, err = lc.Listen(ctx, "tcp", fmt.Sprintf(":%d", cfg.HTTPSPort)); err != nil {
			plain.Close()
			return err
		}
	}
	s := &Server{PodContext: cfg.PodContext, TLSConfig: tlsConfig}
	return s.Serve(ctx, plain, secure)
}

// Server runs the echo service on the listeners given to Serve.
type Server struct {
	// PodContext is reported in every answer.
	PodContext *pb.Context
	// TLSConfig terminates TLS on the secure listener; required when Serve
	// gets one. Set ClientAuth and ClientCAs in it to ask for client
	// certificates.
	TLSConfig *tls.Config
	// Logger receives one line per call; nil means slog.Default().
	Logger *slog.Logger
}

// Serve runs the service in plaintext on plain and over TLS on secure,
// either of which may be nil, until ctx ends or a listener fails. Calls in
// progress then get a few seconds to finish before connections are closed.
// It returns nil when ctx ended, otherwise the first serving error.
func (s *Server) Serve(ctx context.Context, plain, secure net.Listener) error {
	if plain == nil && secure == nil {
		return errors.New("grpc echo: no listener")
	}
	if secure != nil && s.TLSConfig == nil {
		return errors.New("grpc echo: a TLS listener needs a TLS configuration")
	}
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	type served struct {
		srv *grpc.Server
		lis net.Listener
	}
	var servers []served
	if plain != nil {
		servers = append(servers, served{s.newGRPCServer(false, log), plain})
	}
	if secure != nil {
		servers = append(servers, served{s.newGRPCServer(true, log), secure})
	}

	errs := make(chan error, len(servers))
	for _, sv := range servers {
		log.Info("grpc echo server listening", "address", sv.lis.Addr().String(), "tls", sv.lis == secure)
		go func() { errs <- sv.srv.Serve(sv.lis) }()
	}
	var first error
	select {
	case <-ctx.Done():
	case first = <-errs:
	}
	for _, sv := range servers {
		stopGracefully(sv.srv, echoutil.ShutdownGrace)
	}
	return first
}

// stopGracefully lets calls in progress finish, for at most grace.
func stopGracefully(srv *grpc.Server, grace time.Duration) {
	done := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		srv.Stop()
		<-done
	}
}

func (s *Server) newGRPCServer(secure bool, log *slog.Logger) *grpc.Server {
	var opts []grpc.ServerOption
	if secure {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.TLSConfig)))
	}
	srv := grpc.NewServer(opts...)
	pb.RegisterGrpcEchoServer(srv, &echoService{pod: s.PodContext, tls: secure, log: log})
	reflection.Register(srv)
	return srv
}

// echoService implements GrpcEcho; the embedded Unimplemented server answers
// EchoThree.
type echoService struct {
	pb.UnimplementedGrpcEchoServer
	pod *pb.Context
	tls bool
	log *slog.Logger
}

func (e *echoService) Echo(ctx context.Context, req *pb.EchoRequest) (*pb.EchoResponse, error) {
	return e.echo(ctx, pb.GrpcEcho_Echo_FullMethodName, req)
}

func (e *echoService) EchoTwo(ctx context.Context, req *pb.EchoRequest) (*pb.EchoResponse, error) {
	return e.echo(ctx, pb.GrpcEcho_EchoTwo_FullMethodName, req)
}

func (e *echoService) echo(ctx context.Context, method string, _ *pb.EchoRequest) (*pb.EchoResponse, error) {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "no metadata in the incoming call")
	}
	a := &pb.Assertions{FullyQualifiedMethod: method, Context: e.pod}
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range md[k] {
			a.Headers = append(a.Headers, &pb.Header{Key: k, Value: v})
		}
	}
	if vs := md[":authority"]; len(vs) > 0 {
		a.Authority = vs[0]
	}
	if e.tls {
		info, err := tlsInfo(ctx)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		a.TlsAssertions = info
	}
	e.log.Info("echoing call", "method", method, "authority", a.Authority, "tls", e.tls)
	return &pb.EchoResponse{Assertions: a}, nil
}

func tlsInfo(ctx context.Context) (*pb.TLSAssertions, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil, errors.New("no peer in the incoming call")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil, errors.New("the incoming call carries no TLS information")
	}
	st := info.State
	return &pb.TLSAssertions{
		Version:            echoutil.TLSVersion(st.Version),
		NegotiatedProtocol: st.NegotiatedProtocol,
		ServerName:         st.ServerName,
		CipherSuite:        tls.CipherSuiteName(st.CipherSuite),
		PeerCertificates:   echoutil.PEMCertificates(st.PeerCertificates),
	}, nil
}
