package envoy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/portico-dev/portico/internal/testenv"
)

// filtersGateway replaces the quickstart's Gateway: its HTTP listener runs
// two listener filters, an HTTP ext_authz server then a gRPC one; a route
// sends requests carrying the headers both add to app-v2, others to app-v1.
const filtersGateway = `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: quickstart, namespace: default}
spec:
  gatewayClassName: portico
  listeners:
  - name: http
    port: 8080
    protocol: HTTP
    filters:
      requests:
      - type: ExternalAuth
        externalAuth:
          protocol: HTTP
          backendRef: {name: authz-http, port: 80}
          http:
            path: /check
            allowedHeaders: [x-deny, x-skip-user]
            allowedResponseHeaders: [x-auth-user, host]
      - type: ExternalAuth
        externalAuth:
          protocol: GRPC
          backendRef: {name: authz-grpc, port: 50051}
  # Serves while the filters' Services do not exist yet (the HTTP listener
  # is not programmed until then).
  - name: https
    port: 8443
    protocol: HTTPS
    tls: {certificateRefs: [{name: quickstart-tls}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: filtered, namespace: default}
spec:
  parentRefs: [{name: quickstart}]
  hostnames: [filters.example.com]
  rules:
  - matches:
    - headers:
      - {name: x-auth-user, value: alice}
      - {name: x-grpc-auth, value: ok}
    backendRefs: [{name: app-v2, port: 80}]
  - backendRefs: [{name: app-v1, port: 80}]
`

// authService is a Service and EndpointSlice for a server of the test on
// 127.0.0.1:port.
func authService(name string, port, target int) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Service
metadata: {name: %[1]s, namespace: default}
spec:
  ports: [{name: auth, port: %[2]d, targetPort: %[3]d}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %[1]s-local
  namespace: default
  labels: {kubernetes.io/service-name: %[1]s}
addressType: IPv4
ports: [{name: auth, port: %[3]d, protocol: TCP}]
endpoints: [{addresses: [127.0.0.1], conditions: {ready: true}}]
`, name, port, target)
}

// grpcAuthz allows requests that carry x-auth-user: alice (the header the
// HTTP server, which runs first, adds) and adds x-grpc-auth: ok; it denies
// the others.
type grpcAuthz struct {
	authv3.UnimplementedAuthorizationServer
}

func (grpcAuthz) Check(_ context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	h := req.GetAttributes().GetRequest().GetHttp().GetHeaders()
	if h["x-auth-user"] != "alice" {
		return &authv3.CheckResponse{
			Status: &status.Status{Code: int32(codes.PermissionDenied)},
			HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
				Status: &typev3.HttpStatus{Code: typev3.StatusCode_Forbidden}, Body: "denied by grpc authz"}},
		}, nil
	}
	return &authv3.CheckResponse{
		Status: &status.Status{Code: int32(codes.OK)},
		HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{Headers: []*corev3.HeaderValueOption{
			{Header: &corev3.HeaderValue{Key: "x-grpc-auth", Value: "ok"}},
			// Not allowed: the request keeps its Host.
			{Header: &corev3.HeaderValue{Key: ":authority", Value: "grpc-evil.example.com"}},
		}}},
	}, nil
}

// TestListenerFilterExtAuth: the listener filters of an HTTP listener run
// through Envoy in order (the gRPC server sees the header the HTTP server
// added), deny with the server's answer, add headers that route matching
// then sees, and cannot change the Host.
func TestListenerFilterExtAuth(t *testing.T) {
	s := startStack(t, map[string]string{"gateway.yaml": filtersGateway}, quickstartBackends...)

	// The HTTP server: /check<path>; x-deny denies, x-skip-user allows
	// without the user header. It also tries to change Host.
	hl, err := testenv.InNetns(s.ns, func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") })
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var checked []string
	hs := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		checked = append(checked, r.URL.Path)
		mu.Unlock()
		if r.Header.Get("X-Deny") != "" {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, "denied by http authz")
			return
		}
		if r.Header.Get("X-Skip-User") == "" {
			w.Header().Set("X-Auth-User", "alice")
		}
		w.Header().Set("Host", "evil.example.com")
		w.WriteHeader(http.StatusOK)
	})}
	go hs.Serve(hl)
	t.Cleanup(func() { hs.Close() })

	gl, err := testenv.InNetns(s.ns, func() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") })
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	authv3.RegisterAuthorizationServer(gs, grpcAuthz{})
	go gs.Serve(gl)
	t.Cleanup(gs.Stop)

	s.write("authz.yaml", authService("authz-http", 80, hl.Addr().(*net.TCPAddr).Port)+"---"+
		authService("authz-grpc", 50051, gl.Addr().(*net.TCPAddr).Port))

	c := s.client(nil)
	const url, host = "http://127.0.0.1:8080/hello", "filters.example.com"
	r := s.routed(c, url, host, "app-v2")
	if got := r.echo.Headers["X-Auth-User"]; len(got) != 1 || got[0] != "alice" {
		t.Errorf("backend got X-Auth-User %q, want [alice] (from the HTTP server)", got)
	}
	if got := r.echo.Headers["X-Grpc-Auth"]; len(got) != 1 || got[0] != "ok" {
		t.Errorf("backend got X-Grpc-Auth %q, want [ok] (from the gRPC server)", got)
	}
	if r.echo.Host != host {
		t.Errorf("backend got Host %q, want %q: an authorization server changed it", r.echo.Host, host)
	}
	mu.Lock()
	if len(checked) == 0 || checked[len(checked)-1] != "/check/hello" {
		t.Errorf("HTTP authorization server checked %q, want /check/hello", checked)
	}
	mu.Unlock()

	for _, tc := range []struct {
		name    string
		headers []string
		body    string
	}{
		{"denied by the HTTP server, with its answer", []string{"X-Deny", "1"}, "denied by http authz"},
		// The first filter allows without adding the user; the second
		// denies: it runs after the first and sees its headers.
		{"denied by the gRPC server", []string{"X-Skip-User", "1"}, "denied by grpc authz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := s.get(c, url, host, tc.headers...)
			if err != nil {
				t.Fatal(err)
			}
			if r.code != http.StatusForbidden || r.echo != nil || !strings.Contains(r.body, tc.body) {
				t.Errorf("got %d %q, want 403 %q", r.code, truncate(r.body, 200), tc.body)
			}
		})
	}

	t.Run("an unreachable server denies", func(t *testing.T) {
		gs.Stop()
		s.eventually(15*time.Second, "a request denied without the gRPC server", func() error {
			r, err := s.get(c, url, host)
			if err != nil {
				return err
			}
			if r.code != http.StatusForbidden || r.echo != nil {
				return fmt.Errorf("got %d %q", r.code, truncate(r.body, 200))
			}
			return nil
		})
	})
}
