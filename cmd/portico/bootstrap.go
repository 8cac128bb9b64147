package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/portico-dev/portico/internal/infra"
)

// bootstrapCmd prints the Envoy bootstrap of a proxy for one Gateway of
// `portico standalone` (plaintext xDS; the controller provisions its
// proxies' bootstraps itself, with mutual TLS).
func bootstrapCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bootstrap", "bootstrap --gateway NS/NAME [--xds-address 127.0.0.1:18000] [--admin-address 127.0.0.1:9901] [--node-id ID]", stderr)
	gateway := fs.String("gateway", "", "the Gateway `ns/name` whose configuration the Envoy gets (node.cluster; required)")
	xdsAddr := fs.String("xds-address", "127.0.0.1:18000", "`host:port` of portico standalone's xDS server")
	adminAddr := fs.String("admin-address", "127.0.0.1:9901", "`host:port` of Envoy's admin interface (keep it on loopback)")
	host, _ := os.Hostname()
	nodeID := fs.String("node-id", "envoy-"+host, "node.id of the Envoy, unique per Envoy")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if ns, name, ok := strings.Cut(*gateway, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		fmt.Fprintf(stderr, "portico bootstrap: --gateway must be ns/name, got %q\n", *gateway)
		return exitUsage
	}
	out, err := infra.StandaloneBootstrap(*gateway, *nodeID, *xdsAddr, *adminAddr)
	if err != nil {
		fmt.Fprintf(stderr, "portico bootstrap: %v\n", err)
		return exitUsage
	}
	fmt.Fprint(stdout, out)
	return exitOK
}
