package grpc

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"sigs.k8s.io/gateway-api-conformance-images/internal/echoutil"
	"sigs.k8s.io/gateway-api-conformance-images/internal/testcert"

	pb "sigs.k8s.io/gateway-api-conformance-images/echo-basic/grpcechoserver"
)

const service = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho"

var pod = &pb.Context{Namespace: "ns", Ingress: "gw", ServiceName: "grpc-svc", Pod: "grpc-backend-1"}

// start serves plaintext and TLS on loopback ports until the test ends.
func start(t *testing.T, tlsConfig *tls.Config) (plainAddr, tlsAddr string) {
	t.Helper()
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	secure, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{PodContext: pod, TLSConfig: tlsConfig, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, plain, secure) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after its context ended")
		}
	})
	return plain.Addr().String(), secure.Addr().String()
}

func dial(t *testing.T, addr string, opts ...grpc.DialOption) pb.GrpcEchoClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewGrpcEchoClient(conn)
}

func callContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "x-test", "one", "x-test", "two")
}

// checkCommon checks what plaintext and TLS answers share.
func checkCommon(t *testing.T, resp *pb.EchoResponse, method, authority string) {
	t.Helper()
	a := resp.GetAssertions()
	if got, want := a.GetFullyQualifiedMethod(), "/"+service+"/"+method; got != want {
		t.Errorf("method: got %q, want %q", got, want)
	}
	if a.GetAuthority() != authority {
		t.Errorf("authority: got %q, want %q", a.GetAuthority(), authority)
	}
	if !proto.Equal(a.GetContext(), pod) {
		t.Errorf("context: got %v", a.GetContext())
	}
	var tests []string
	sawAuthority := false
	for _, h := range a.GetHeaders() {
		switch h.GetKey() {
		case "x-test":
			tests = append(tests, h.GetValue())
		case ":authority":
			sawAuthority = h.GetValue() == authority
		}
	}
	if !slices.Equal(tests, []string{"one", "two"}) {
		t.Errorf("x-test headers: got %v in %v", tests, a.GetHeaders())
	}
	if !sawAuthority {
		t.Errorf("no :authority %q header in %v", authority, a.GetHeaders())
	}
}

func TestPlaintext(t *testing.T) {
	addr, _ := start(t, &tls.Config{Certificates: []tls.Certificate{testcert.New(t, "grpc").TLS}})
	c := dial(t, addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("grpc.example.com"))
	ctx := callContext(t)

	resp, err := c.Echo(ctx, &pb.EchoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	checkCommon(t, resp, "Echo", "grpc.example.com")
	if resp.GetAssertions().GetTlsAssertions() != nil {
		t.Errorf("TLS assertions over plaintext: %v", resp.GetAssertions().GetTlsAssertions())
	}

	resp, err = c.EchoTwo(ctx, &pb.EchoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	checkCommon(t, resp, "EchoTwo", "grpc.example.com")

	if _, err := c.EchoThree(ctx, &pb.EchoRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("EchoThree: got %v, want Unimplemented", err)
	}
}

func TestTLS(t *testing.T) {
	server := testcert.New(t, "grpc", "grpc.example.com")
	clientCert := testcert.New(t, "client")
	addr := func() string {
		certFile, keyFile := server.Files(t)
		// The configuration Run makes from TLS_SERVER_CERT and
		// TLS_SERVER_PRIV_KEY, asking for client certificates too.
		cfg, err := echoutil.ServerTLSConfig(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ClientCAs = clientCert.Pool()
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
		_, a := start(t, cfg)
		return a
	}()

	for _, withCert := range []bool{false, true} {
		clientTLS := &tls.Config{RootCAs: server.Pool(), ServerName: "grpc.example.com"}
		if withCert {
			clientTLS.Certificates = []tls.Certificate{clientCert.TLS}
		}
		c := dial(t, addr, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS)))
		ctx := callContext(t)
		for _, call := range []struct {
			method string
			rpc    func(context.Context, *pb.EchoRequest, ...grpc.CallOption) (*pb.EchoResponse, error)
		}{{"Echo", c.Echo}, {"EchoTwo", c.EchoTwo}} {
			resp, err := call.rpc(ctx, &pb.EchoRequest{})
			if err != nil {
				t.Fatal(err)
			}
			checkCommon(t, resp, call.method, "grpc.example.com")
			got := resp.GetAssertions().GetTlsAssertions()
			if got.GetVersion() != "TLSv1.3" || got.GetServerName() != "grpc.example.com" ||
				got.GetNegotiatedProtocol() != "h2" || got.GetCipherSuite() == "" {
				t.Errorf("TLS assertions: got %v", got)
			}
			var wantPeers []string
			if withCert {
				wantPeers = []string{string(clientCert.CertPEM)}
			}
			if !slices.Equal(got.GetPeerCertificates(), wantPeers) {
				t.Errorf("peer certificates (client certificate %v): got %q", withCert, got.GetPeerCertificates())
			}
		}
		if _, err := c.EchoThree(ctx, &pb.EchoRequest{}); status.Code(err) != codes.Unimplemented {
			t.Errorf("EchoThree: got %v, want Unimplemented", err)
		}
	}
}

func TestReflection(t *testing.T) {
	addr, _ := start(t, &tls.Config{Certificates: []tls.Certificate{testcert.New(t, "grpc").TLS}})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(callContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	if !slices.Contains(names, service) {
		t.Errorf("reflection lists %v, want %s among them", names, service)
	}
}

func TestDescriptor(t *testing.T) {
	fd := pb.File_grpcecho_proto
	if fd.Path() != "grpcecho.proto" || fd.Package() != "gateway_api_conformance.echo_basic.grpcecho" {
		t.Errorf("descriptor %s in package %s", fd.Path(), fd.Package())
	}
	svc := fd.Services().ByName("GrpcEcho")
	if svc == nil || string(svc.FullName()) != service || svc.Methods().Len() != 3 {
		t.Fatalf("service %v", svc)
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("HTTP_PORT", "")
	t.Setenv("HTTPS_PORT", "")
	t.Setenv("TLS_SERVER_CERT", "/c")
	t.Setenv("TLS_SERVER_PRIV_KEY", "/k")
	t.Setenv("SERVICE_NAME", "svc")
	cfg, err := ConfigFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPPort != 3000 || cfg.HTTPSPort != 8443 || cfg.TLSServerCert != "/c" || cfg.TLSServerPrivKey != "/k" || cfg.PodContext.GetServiceName() != "svc" {
		t.Errorf("got %+v", cfg)
	}
	t.Setenv("HTTPS_PORT", "x")
	if _, err := ConfigFromEnv(); err == nil {
		t.Error("a non-numeric HTTPS_PORT was accepted")
	}
}
