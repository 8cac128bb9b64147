package envoy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/portico-dev/portico/internal/testenv"
)

// TestGatewayBindAddresses: in standalone mode a Gateway's spec.addresses
// are where Envoy's listeners bind. The quickstart Gateway asks for
// 127.0.0.2 (local, as all of 127/8 is on loopback): it is served there
// and nothing listens on 127.0.0.1; once the addresses are removed, the
// listeners are back on all addresses.
func TestGatewayBindAddresses(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(filepath.Join(root, "examples", "quickstart", "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	withAddr := strings.Replace(string(orig), "  listeners:\n", "  addresses:\n  - type: IPAddress\n    value: 127.0.0.2\n  listeners:\n", 1)
	if withAddr == string(orig) {
		t.Fatal("the quickstart Gateway has no listeners: line to add addresses before")
	}
	s := startStack(t, map[string]string{"gateway.yaml": withAddr}, quickstartBackends...)
	c := s.client(nil)
	s.routed(c, "http://127.0.0.2:8080/api/x", "localhost", "api")
	refused := func(addr string) error {
		conn, err := s.ns.DialContext(context.Background(), "tcp", addr)
		if err == nil {
			conn.Close()
			return fmt.Errorf("%s accepts connections", addr)
		}
		return nil
	}
	if err := refused("127.0.0.1:8080"); err != nil {
		t.Fatalf("listener not bound to the Gateway's address only: %v", err)
	}

	s.write("gateway.yaml", string(orig))
	s.routed(c, "http://127.0.0.1:8080/api/x", "localhost", "api")
	s.routed(c, "http://127.0.0.2:8080/api/x", "localhost", "api") // 0.0.0.0 again
}
