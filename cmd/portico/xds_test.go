package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	secretservice "github.com/envoyproxy/go-control-plane/envoy/service/secret/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/portico-dev/portico/internal/pki"
)

var xdsListeningRE = regexp.MustCompile(`xDS listening on (\S+),`)

// quickstartDir is examples/quickstart: Gateway default/quickstart with an
// HTTPS listener and its certificate Secret.
func quickstartDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "examples", "quickstart"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// runStandaloneArgs runs `portico standalone` with args until the test ends
// and returns its xDS address once it listens, and its stderr.
func runStandaloneArgs(t *testing.T, args ...string) (string, *syncBuffer) {
	t.Helper()
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() { exited <- runContext(ctx, append([]string{"standalone"}, args...), stdout, stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-exited:
			if code != 0 {
				t.Errorf("standalone exited %d; stderr:\n%s", code, stderr)
			}
		case <-time.After(deadline):
			t.Errorf("standalone did not stop")
		}
	})
	eventually(t, "the listening line", func() bool { return xdsListeningRE.MatchString(stdout.String()) })
	return xdsListeningRE.FindStringSubmatch(stdout.String())[1], stderr
}

// fetchSecrets asks for the Secrets of gateway over conn (unary SDS),
// retrying while standalone has not served its first translation yet.
func fetchSecrets(t *testing.T, conn *grpc.ClientConn, gateway string) (*discoveryv3.DiscoveryResponse, error) {
	t.Helper()
	var resp *discoveryv3.DiscoveryResponse
	var err error
	end := time.Now().Add(deadline)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err = secretservice.NewSecretDiscoveryServiceClient(conn).FetchSecrets(ctx,
			&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "test", Cluster: gateway}})
		cancel()
		// Unavailable: the server does not serve before the first
		// translation (the connection waits), or is not up yet.
		if status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded && status.Code(err) != codes.Unknown {
			return resp, err
		}
		if time.Now().After(end) {
			return resp, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Unauthenticated xDS (plaintext here) listens on loopback unless told
// otherwise; with mutual TLS on every interface.
func TestXDSListenAddressDefaults(t *testing.T) {
	fs := newFlagSet("t", "", &bytes.Buffer{})
	xf := addXDSFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if got := xf.listenAddress(false); got != "127.0.0.1:18000" {
		t.Errorf("unauthenticated default %q, want 127.0.0.1:18000", got)
	}
	if got := xf.listenAddress(true); got != ":18000" {
		t.Errorf("mTLS default %q, want :18000", got)
	}
	if err := fs.Parse([]string{"--xds-address", "0.0.0.0:1"}); err != nil {
		t.Fatal(err)
	}
	if got := xf.listenAddress(false); got != "0.0.0.0:1" {
		t.Errorf("explicit address %q", got)
	}

	// The command itself: it listens on 127.0.0.1:18000, or fails saying
	// it could not bind that (another process has the port).
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() {
		exited <- runContext(ctx, []string{"standalone", "--resources", quickstartDir(t),
			"--admin-address", "127.0.0.1:0", "--debug-address", ""}, stdout, stderr)
	}()
	defer func() {
		cancel()
		<-exited
	}()
	eventually(t, "listening or failing", func() bool {
		return xdsListeningRE.MatchString(stdout.String()) || strings.Contains(stderr.String(), "xDS listener")
	})
	if m := xdsListeningRE.FindStringSubmatch(stdout.String()); m != nil {
		if m[1] != "127.0.0.1:18000" {
			t.Errorf("plaintext standalone listens on %s by default, want 127.0.0.1:18000", m[1])
		}
	} else if !strings.Contains(stderr.String(), "127.0.0.1:18000") {
		t.Errorf("standalone failed to listen elsewhere than 127.0.0.1:18000: %s", stderr)
	}
}

// Plaintext standalone withholds TLS private keys and warns, unless
// --xds-unauthenticated-secrets.
func TestStandalonePlaintextSecrets(t *testing.T) {
	for _, optIn := range []bool{false, true} {
		args := []string{"--resources", quickstartDir(t), "--xds-address", "127.0.0.1:0",
			"--admin-address", "127.0.0.1:0", "--debug-address", ""}
		if optIn {
			args = append(args, "--xds-unauthenticated-secrets")
		}
		addr, stderr := runStandaloneArgs(t, args...)
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		resp, err := fetchSecrets(t, conn, "default/quickstart")
		if err != nil {
			t.Fatalf("optIn=%v: FetchSecrets: %v", optIn, err)
		}
		if got := len(resp.GetResources()); (got > 0) != optIn {
			t.Errorf("--xds-unauthenticated-secrets=%v: %d secrets served over plaintext", optIn, got)
		}
		want := []string{`level=WARN msg="xDS is served without TLS`}
		if !optIn {
			want = append(want, `level=WARN msg="TLS secrets of this gateway are withheld`)
		}
		for _, w := range want {
			eventually(t, w, func() bool { return strings.Contains(stderr.String(), w) })
		}
	}
}

// writeTestCerts runs `portico certs` into a new directory.
func writeTestCerts(t *testing.T, gateways ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	args := []string{"certs", "--dir", dir}
	for _, g := range gateways {
		args = append(args, "--gateway", g)
	}
	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != exitOK {
		t.Fatalf("portico certs: exit %d: %s", code, errb.String())
	}
	return dir
}

func dialMTLS(t *testing.T, addr, certsDir, client string) *grpc.ClientConn {
	t.Helper()
	caPEM, err := os.ReadFile(filepath.Join(certsDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if client != "" {
		base := filepath.Join(certsDir, client)
		cert, err := tls.LoadX509KeyPair(base+".crt", base+".key")
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// Standalone with --xds-tls-cert/--xds-tls-key/--xds-client-ca (files of
// `portico certs`): mutual TLS, a proxy gets its own Gateway only, TLS
// private keys included; no certificate, no connection.
func TestStandaloneMTLS(t *testing.T) {
	certs := writeTestCerts(t, "default/quickstart", "default/other")
	addr, stderr := runStandaloneArgs(t, "--resources", quickstartDir(t), "--xds-address", "127.0.0.1:0",
		"--admin-address", "127.0.0.1:0", "--debug-address", "",
		"--xds-tls-cert", filepath.Join(certs, "server.crt"), "--xds-tls-key", filepath.Join(certs, "server.key"),
		"--xds-client-ca", filepath.Join(certs, "ca.crt"))

	resp, err := fetchSecrets(t, dialMTLS(t, addr, certs, "default_quickstart"), "default/quickstart")
	if err != nil {
		t.Fatalf("FetchSecrets over mTLS: %v", err)
	}
	if len(resp.GetResources()) == 0 {
		t.Error("no secrets over mutual TLS")
	}
	_, err = fetchSecrets(t, dialMTLS(t, addr, certs, "default_other"), "default/quickstart")
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("another gateway's certificate: %v, want PermissionDenied", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = secretservice.NewSecretDiscoveryServiceClient(dialMTLS(t, addr, certs, "")).FetchSecrets(ctx,
		&discoveryv3.DiscoveryRequest{Node: &corev3.Node{Id: "test", Cluster: "default/quickstart"}})
	if err == nil {
		t.Error("a client without certificate was served")
	}
	if strings.Contains(stderr.String(), "level=WARN msg=\"xDS is served") {
		t.Error("mutual TLS warned as unauthenticated")
	}
}

func TestStandaloneXDSFlagErrors(t *testing.T) {
	certs := writeTestCerts(t, "default/quickstart")
	for _, extra := range [][]string{
		{"--xds-tls-cert", filepath.Join(certs, "server.crt")},
		{"--xds-client-ca", filepath.Join(certs, "ca.crt")},
		{"--xds-tls-cert", filepath.Join(certs, "nope.crt"), "--xds-tls-key", filepath.Join(certs, "server.key")},
		{"--xds-max-connection-age", "-1s"},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"standalone", "--resources", quickstartDir(t), "--xds-address", "127.0.0.1:0",
			"--admin-address", "127.0.0.1:0", "--debug-address", ""}, extra...)
		if code := run(args, &out, &errb); code != exitUsage || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q; want %d and a message", extra, code, errb.String(), exitUsage)
		}
	}
	for _, extra := range [][]string{
		{"--xds-client-cert-validity", "1m"},
		{"--xds-max-connection-age-grace", "-1s"},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"controller", "--kubeconfig", filepath.Join(t.TempDir(), "none")}, extra...)
		if code := run(args, &out, &errb); code != exitUsage || errb.Len() == 0 {
			t.Errorf("controller %v: exit %d, stderr %q; want %d and a message", extra, code, errb.String(), exitUsage)
		}
	}
}

// `portico certs` writes a CA, a serving certificate and client
// certificates naming their Gateways; a second run keeps the CA.
func TestCertsCommand(t *testing.T) {
	dir := writeTestCerts(t, "default/quickstart", "team-a/web")
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	caPEM := read("ca.crt")
	pool, err := pki.Pool(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	for gw, base := range map[string]string{"default/quickstart": "default_quickstart", "team-a/web": "team-a_web"} {
		cert, err := tls.X509KeyPair(read(base+".crt"), read(base+".key"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s: %v", gw, err)
		}
		if id, ok := pki.IdentityFromCert(cert.Leaf); !ok || id.Gateway() != gw || id.UID != "" {
			t.Errorf("%s: identity %+v %v", gw, id, ok)
		}
		if st, err := os.Stat(filepath.Join(dir, base+".key")); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s key mode %v %v", gw, st.Mode(), err)
		}
	}
	srv, err := tls.X509KeyPair(read("server.crt"), read("server.key"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("server certificate for 127.0.0.1: %v", err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"certs", "--dir", dir, "--gateway", "x/y"}, &out, &errb); code != exitOK {
		t.Fatalf("second run: %d %s", code, errb.String())
	}
	if !bytes.Equal(read("ca.crt"), caPEM) {
		t.Error("a second run replaced the CA")
	}
	for _, args := range [][]string{{"certs"}, {"certs", "--dir", dir}, {"certs", "--dir", dir, "--gateway", "nope"},
		{"certs", "--dir", dir, "--gateway", "a/B"}, {"certs", "--dir", dir, "--gateway", "a/b", "--validity", "0s"}} {
		out.Reset()
		errb.Reset()
		if code := run(args, &out, &errb); code == exitOK || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q; want an error", args, code, errb.String())
		}
	}
}

// `portico bootstrap --xds-ca … --xds-client-cert … --xds-client-key …`
// connects Envoy with mutual TLS: a TLS transport socket with those files
// and the server name checked.
func TestBootstrapTLSCommand(t *testing.T) {
	certs := writeTestCerts(t, "default/quickstart")
	var out, errb bytes.Buffer
	code := run([]string{"bootstrap", "--gateway", "default/quickstart", "--xds-address", "127.0.0.1:18000",
		"--xds-ca", filepath.Join(certs, "ca.crt"), "--xds-client-cert", filepath.Join(certs, "default_quickstart.crt"),
		"--xds-client-key", filepath.Join(certs, "default_quickstart.key")}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var b map[string]any
	if err := json.Unmarshal(out.Bytes(), &b); err != nil {
		t.Fatal(err)
	}
	compact, err := json.Marshal(b) // protojson's spacing varies
	if err != nil {
		t.Fatal(err)
	}
	text := string(compact)
	for _, want := range []string{`"envoy.transport_sockets.tls"`, filepath.Join(certs, "ca.crt"),
		filepath.Join(certs, "default_quickstart.crt"), filepath.Join(certs, "default_quickstart.key"),
		`"sanType":"IP_ADDRESS"`, `"exact":"127.0.0.1"`} {
		if !strings.Contains(text, want) {
			t.Errorf("bootstrap lacks %s:\n%s", want, text)
		}
	}
	for _, args := range [][]string{
		{"--xds-client-cert", filepath.Join(certs, "default_quickstart.crt")},
		{"--xds-ca", filepath.Join(certs, "missing.crt")},
		{"--xds-ca", filepath.Join(certs, "ca.crt"), "--xds-client-cert", filepath.Join(certs, "default_quickstart.crt")},
	} {
		out.Reset()
		errb.Reset()
		if code := run(append([]string{"bootstrap", "--gateway", "default/quickstart"}, args...), &out, &errb); code != exitUsage || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q; want %d", args, code, errb.String(), exitUsage)
		}
	}
}
