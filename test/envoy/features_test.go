package envoy

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	pb "sigs.k8s.io/gateway-api-conformance-images/echo-basic/grpcechoserver"
)

// featureBackends are quickstartBackends and the extra backends of
// testdata/features.yaml.
var featureBackends = append(append([]backend(nil), quickstartBackends...),
	backend{pod: "mirror", port: 9004}, backend{pod: "grpc-echo", port: 50052, grpc: true})

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestFeatures checks, through Envoy, one rule per HTTPRoute and GRPCRoute
// feature of testdata/features.yaml.
func TestFeatures(t *testing.T) {
	s := startStack(t, map[string]string{"features.yaml": readTestdata(t, "features.yaml")}, featureBackends...)
	c := s.client(nil)
	const host = "features.example.com"

	t.Run("request mirror", func(t *testing.T) {
		path := fmt.Sprintf("/mirror/%d", time.Now().UnixNano())
		s.routed(c, "http://127.0.0.1:8080"+path, host, "app-v1")
		// The mirror's copy is sent alongside and its answer dropped; it
		// shows in the mirror backend's log.
		s.eventually(10*time.Second, "the mirror backend got "+path, func() error {
			if !strings.Contains(s.backends["mirror"].Output(), "request made to "+path+" ") {
				return fmt.Errorf("not in its log:\n%s", truncate(s.backends["mirror"].Output(), 1000))
			}
			return nil
		})
	})

	t.Run("hostname and full path rewrite", func(t *testing.T) {
		r := s.routed(c, "http://127.0.0.1:8080/rewrite-host/a", host, "app-v1")
		if r.echo.Host != "rewritten.example.com" || r.echo.Path != "/rewritten" {
			t.Fatalf("backend saw Host %q path %q, want rewritten.example.com /rewritten", r.echo.Host, r.echo.Path)
		}
	})

	t.Run("request and response header modifiers", func(t *testing.T) {
		r := s.routed(c, "http://127.0.0.1:8080/headers", host, "app-v2",
			"X-Set", "from-client", "X-Add", "from-client", "X-Remove", "gone")
		h := r.echo.Headers
		if got := h["X-Set"]; len(got) != 1 || got[0] != "set-by-portico" {
			t.Errorf("X-Set = %q, want [set-by-portico]", got)
		}
		if got := strings.Join(h["X-Add"], ","); got != "from-client,added" {
			t.Errorf("X-Add = %q, want from-client,added", got)
		}
		if _, ok := h["X-Remove"]; ok {
			t.Errorf("X-Remove reached the backend: %q", h["X-Remove"])
		}
		if got := r.header.Get("X-Response-Set"); got != "1" {
			t.Errorf("response X-Response-Set = %q, want 1", got)
		}
	})

	t.Run("redirect with scheme, hostname, port and status", func(t *testing.T) {
		r, err := s.get(c, "http://127.0.0.1:8080/to-https/x?q=1", host)
		if err != nil {
			t.Fatal(err)
		}
		if want := "https://secure.example.com:8443/to-https/x?q=1"; r.code != 302 || r.header.Get("Location") != want {
			t.Fatalf("got %d Location %q, want 302 %s", r.code, r.header.Get("Location"), want)
		}
	})

	t.Run("request timeout", func(t *testing.T) {
		s.routed(c, "http://127.0.0.1:8080/slow", host, "app-v1")
		start := time.Now()
		r, err := s.get(c, "http://127.0.0.1:8080/slow?delay=5s", host)
		if err != nil {
			t.Fatal(err)
		}
		if r.code != 504 || time.Since(start) > 4*time.Second {
			t.Fatalf("a 5 s backend behind a 500 ms timeout: %d after %s (%s), want Envoy's 504", r.code, time.Since(start), truncate(r.body, 200))
		}
	})

	t.Run("gRPC by service and method", func(t *testing.T) {
		conn, err := grpc.NewClient("passthrough:///127.0.0.1:8080",
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithAuthority("grpc-echo.example.com"),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				return s.ns.DialContext(ctx, "tcp", addr)
			}))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		client := pb.NewGrpcEchoClient(conn)
		var resp *pb.EchoResponse
		s.eventually(15*time.Second, "gRPC Echo through Envoy", func() error {
			ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "x-test", "portico"), 2*time.Second)
			defer cancel()
			r, err := client.Echo(ctx, &pb.EchoRequest{})
			resp = r
			return err
		})
		a := resp.GetAssertions()
		if a.GetContext().GetPod() != "grpc-echo" || a.GetFullyQualifiedMethod() != "/gateway_api_conformance.echo_basic.grpcecho.GrpcEcho/Echo" {
			t.Fatalf("gRPC Echo answered by %q for %q", a.GetContext().GetPod(), a.GetFullyQualifiedMethod())
		}
		if a.GetAuthority() != "grpc-echo.example.com" {
			t.Errorf("backend saw authority %q", a.GetAuthority())
		}
		// EchoTwo has no rule: Envoy answers, not the backend.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := client.EchoTwo(ctx, &pb.EchoRequest{}); err == nil {
			t.Fatal("EchoTwo, which no rule matches, succeeded")
		}
	})
}
