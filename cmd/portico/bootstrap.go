package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/portico-dev/portico/internal/infra"
)

// bootstrapCmd prints the Envoy bootstrap of a proxy for one Gateway of
// `portico standalone`: plaintext xDS, or TLS with --xds-ca, mutual TLS
// with a client certificate too, matching standalone's --xds-tls-cert and
// --xds-client-ca (the controller provisions its proxies' bootstraps
// itself, with mutual TLS).
func bootstrapCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bootstrap", "bootstrap --gateway NS/NAME [--xds-address 127.0.0.1:18000] [--xds-ca FILE [--xds-client-cert FILE --xds-client-key FILE] [--xds-server-name NAME]] [--admin-address 127.0.0.1:9901] [--metrics-address HOST:PORT] [--node-id ID]", stderr)
	gateway := fs.String("gateway", "", "the Gateway `ns/name` whose configuration the Envoy gets (node.cluster; required)")
	xdsAddr := fs.String("xds-address", "127.0.0.1:18000", "`host:port` of portico standalone's xDS server")
	adminAddr := fs.String("admin-address", "127.0.0.1:9901", "`host:port` of Envoy's admin interface (keep it on loopback)")
	metricsAddr := fs.String("metrics-address", "", "`host:port` of a listener serving only /stats/prometheus of the admin interface (e.g. 127.0.0.1:19090; default: none)")
	host, _ := os.Hostname()
	nodeID := fs.String("node-id", "envoy-"+host, "node.id of the Envoy, unique per Envoy")
	caFile := fs.String("xds-ca", "", "PEM `file` of the CA of the xDS server's certificate: connect over TLS (standalone's --xds-tls-cert)")
	certFile := fs.String("xds-client-cert", "", "PEM `file` of the Envoy's client certificate, naming --gateway (standalone's --xds-client-ca; needs --xds-ca)")
	keyFile := fs.String("xds-client-key", "", "PEM `file` of the client certificate's private key")
	serverName := fs.String("xds-server-name", "", "DNS name or IP the xDS server's certificate must name (default: the host of --xds-address)")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if ns, name, ok := strings.Cut(*gateway, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		fmt.Fprintf(stderr, "portico bootstrap: --gateway must be ns/name, got %q\n", *gateway)
		return exitUsage
	}
	var tlsOpts *infra.StandaloneTLS
	switch {
	case *caFile != "":
		// Envoy reads the files when it starts, relative to its own
		// working directory: check them now and make them absolute.
		for _, p := range []*string{caFile, certFile, keyFile} {
			if *p == "" {
				continue
			}
			abs, err := filepath.Abs(*p)
			if err == nil {
				_, err = os.Stat(abs)
			}
			if err != nil {
				fmt.Fprintf(stderr, "portico bootstrap: %v\n", err)
				return exitUsage
			}
			*p = abs
		}
		tlsOpts = &infra.StandaloneTLS{CAFile: *caFile, CertFile: *certFile, KeyFile: *keyFile, ServerName: *serverName}
	case *certFile != "" || *keyFile != "" || *serverName != "":
		fmt.Fprintln(stderr, "portico bootstrap: --xds-client-cert, --xds-client-key and --xds-server-name need --xds-ca")
		return exitUsage
	}
	out, err := infra.StandaloneBootstrapWith(infra.StandaloneOptions{Gateway: *gateway, NodeID: *nodeID,
		XDSAddress: *xdsAddr, AdminAddress: *adminAddr, TLS: tlsOpts, MetricsAddress: *metricsAddr})
	if err != nil {
		fmt.Fprintf(stderr, "portico bootstrap: %v\n", err)
		return exitUsage
	}
	fmt.Fprint(stdout, out)
	return exitOK
}
