package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/portico-dev/portico/internal/pki"
)

// Validities of `portico certs`.
const (
	certsCAValidity      = 365 * 24 * time.Hour
	certsDefaultValidity = 30 * 24 * time.Hour
)

// certsCmd writes the files of mutual TLS between `portico standalone` and
// Envoys started from `portico bootstrap`, for local use: a CA (kept and
// reused if DIR already has one), a serving certificate for the given
// server names, and one client certificate per Gateway whose identity
// names it (pki.Identity, without UID: standalone has none). A production
// setup would use its own PKI; the identity format is what matters.
func certsCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("certs", "certs --dir DIR --gateway NS/NAME [--gateway …] [--server-name 127.0.0.1 …] [--validity 720h]", stderr)
	dir := fs.String("dir", "", "`directory` to write ca.crt, ca.key, server.crt, server.key and NS_NAME.crt/.key into (required)")
	var gateways, names stringList
	fs.Var(&gateways, "gateway", "Gateway `ns/name` to issue a client certificate for (repeatable, required)")
	fs.Var(&names, "server-name", "DNS name or IP of the xDS server's certificate (repeatable; default 127.0.0.1 and localhost)")
	validity := fs.Duration("validity", certsDefaultValidity, "validity of the server and client certificates (re-run to renew them)")
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if *dir == "" || len(gateways) == 0 {
		fmt.Fprintln(stderr, "portico certs: --dir and at least one --gateway are required")
		fs.Usage()
		return exitUsage
	}
	if *validity <= 0 || *validity > certsCAValidity {
		fmt.Fprintf(stderr, "portico certs: --validity must be positive and at most %v\n", certsCAValidity)
		return exitUsage
	}
	ids := make([]pki.Identity, 0, len(gateways))
	for _, g := range gateways {
		ns, name, ok := strings.Cut(g, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			fmt.Fprintf(stderr, "portico certs: --gateway must be ns/name, got %q\n", g)
			return exitUsage
		}
		ids = append(ids, pki.Identity{Namespace: ns, Name: name})
	}
	if len(names) == 0 {
		names = stringList{"127.0.0.1", "localhost"}
	}
	var dns []string
	var ips []net.IP
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, n)
		}
	}
	if err := writeCerts(*dir, ids, dns, ips, time.Now(), *validity); err != nil {
		fmt.Fprintf(stderr, "portico certs: %v\n", err)
		return exitError
	}
	d := *dir
	fmt.Fprintf(stdout, "wrote %s\n\n  portico standalone --xds-tls-cert %s --xds-tls-key %s --xds-client-ca %s …\n",
		d, filepath.Join(d, "server.crt"), filepath.Join(d, "server.key"), filepath.Join(d, "ca.crt"))
	for _, id := range ids {
		base := filepath.Join(d, id.Namespace+"_"+id.Name)
		fmt.Fprintf(stdout, "  portico bootstrap --gateway %s --xds-ca %s --xds-client-cert %s.crt --xds-client-key %s.key …\n",
			id.Gateway(), filepath.Join(d, "ca.crt"), base, base)
	}
	return exitOK
}

// writeCerts writes the CA (reusing a usable one in dir), the serving
// certificate and the client certificates of ids into dir.
func writeCerts(dir string, ids []pki.Identity, dns []string, ips []net.IP, now time.Time, validity time.Duration) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	caCert, caKey := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	var ca *pki.CA
	certPEM, err1 := os.ReadFile(caCert)
	keyPEM, err2 := os.ReadFile(caKey)
	if err1 == nil && err2 == nil {
		c, err := pki.ParseCA(certPEM, keyPEM)
		if err != nil {
			return fmt.Errorf("%s and %s: %w (remove them to create a new CA)", caCert, caKey, err)
		}
		if !now.Add(validity).Before(c.Certificate().NotAfter) {
			return fmt.Errorf("the CA in %s expires at %s, before the certificates would: remove ca.crt and ca.key to create a new CA",
				dir, c.Certificate().NotAfter)
		}
		ca = c
	} else {
		c, err := pki.NewCA(now, certsCAValidity)
		if err != nil {
			return err
		}
		ca = c
		if err := writeFileAtomic(caKey, ca.KeyPEM(), 0o600); err != nil {
			return err
		}
		if err := writeFileAtomic(caCert, ca.CertPEM(), 0o644); err != nil {
			return err
		}
	}
	certPEM, keyPEM, err := ca.IssueServer(dns, ips, now, validity)
	if err != nil {
		return err
	}
	if err := writePair(filepath.Join(dir, "server"), certPEM, keyPEM); err != nil {
		return err
	}
	for _, id := range ids {
		certPEM, keyPEM, err := ca.IssueClient(id, now, validity)
		if err != nil {
			return err
		}
		if err := writePair(filepath.Join(dir, id.Namespace+"_"+id.Name), certPEM, keyPEM); err != nil {
			return err
		}
	}
	return nil
}

// writePair writes base.key, then base.crt.
func writePair(base string, certPEM, keyPEM []byte) error {
	if err := writeFileAtomic(base+".key", keyPEM, 0o600); err != nil {
		return err
	}
	return writeFileAtomic(base+".crt", certPEM, 0o644)
}

// writeFileAtomic replaces name atomically (a reader sees the old or the new
// contents, never a part).
func writeFileAtomic(name string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}
