// Package envoy tests Portico's configuration through a real Envoy (the
// version hack/envoy.sh installs), end to end: a running Portico process
// serves xDS, Envoy boots from a bootstrap, and requests go through
// Envoy to real backends (the conformance suite's echo server, which
// answers with a JSON description of the request it got).
//
// Each test gets a stack of its own in a network namespace that has only
// a loopback interface: Portico standalone, Envoy and the backends all
// listen on 127.0.0.1 inside it, with the fixed ports of
// examples/quickstart, and the test's clients dial in through
// testenv.Netns.DialContext. Nothing is sent anywhere else, and parallel
// test runs never compete for ports. The controller tests (controller_test.go)
// run Envoy in a namespace attached to a bridge so that it reaches the
// controller on the host, as a Pod reaches the xDS Service.
//
// Without Envoy or without root (network namespaces) the tests skip
// locally and fail in CI (CI=true).
package envoy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/testenv"
)

// porticoBin is the portico binary TestMain builds.
var porticoBin string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "portico-envoy-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	porticoBin = filepath.Join(dir, "portico")
	cmd := testenv.GoCommand(context.Background(), "build", "-o", porticoBin, "./cmd/portico")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build ./cmd/portico: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// backend is an echo server of a stack, on 127.0.0.1:port in its
// namespace; pod is the name it reports.
type backend struct {
	pod  string
	port int
	grpc bool
}

// quickstartBackends are the backends examples/quickstart's
// EndpointSlices point at.
var quickstartBackends = []backend{
	{pod: "app-v1", port: 9001},
	{pod: "app-v2", port: 9002},
	{pod: "api", port: 9003},
}

// stack is Portico standalone, one Envoy and backends in one isolated
// network namespace.
type stack struct {
	t         *testing.T
	ns        *testenv.Netns
	resources string
	portico   *testenv.Process
	envoy     *testenv.Envoy
	backends  map[string]*testenv.Process
}

// startStack copies examples/quickstart and extra (file name → content)
// into a resources directory, starts the backends, Portico standalone on
// it and an Envoy booted from the quickstart's bootstrap (node.cluster
// default/quickstart), and waits until Envoy is LIVE.
func startStack(t *testing.T, extra map[string]string, backends ...backend) *stack {
	t.Helper()
	return startStackWith(t, nil, extra, backends...)
}

// withheldSecrets, among the flags of startStackWith, leaves out
// --xds-unauthenticated-secrets: Portico then withholds the HTTPS
// listeners' private keys from the quickstart's plaintext bootstrap.
const withheldSecrets = "(withheld secrets)"

// envoyArgPrefix marks, among the flags of startStackWith, an argument of
// Envoy's command line (envoyArg).
const envoyArgPrefix = "(envoy)"

// envoyArg is an argument of Envoy's command line among the flags of
// startStackWith.
func envoyArg(a string) string { return envoyArgPrefix + a }

// startStackWith is startStack with more `portico standalone` flags. The
// quickstart bootstrap's xDS is plaintext (on loopback, in the stack's own
// network namespace), so Portico is told to send Secrets over it
// (--xds-unauthenticated-secrets) unless flags has withheldSecrets.
//
// Entries of flags made by envoyArg are Envoy's command-line arguments,
// not Portico's.
func startStackWith(t *testing.T, flags []string, extra map[string]string, backends ...backend) *stack {
	t.Helper()
	var envoyArgs []string
	flags = slices.DeleteFunc(slices.Clone(flags), func(f string) bool {
		if a, ok := strings.CutPrefix(f, envoyArgPrefix); ok {
			envoyArgs = append(envoyArgs, a)
			return true
		}
		return false
	})
	if i := slices.Index(flags, withheldSecrets); i >= 0 {
		flags = slices.Delete(slices.Clone(flags), i, i+1)
	} else {
		flags = append([]string{"--xds-unauthenticated-secrets"}, flags...)
	}
	testenv.RequireEnvoy(t)
	testenv.RequireNetns(t)
	echo := testenv.RequireEcho(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ns := isolatedNamespace(t)
	s := &stack{t: t, ns: ns, resources: t.TempDir(), backends: map[string]*testenv.Process{}}
	quick := filepath.Join(root, "examples", "quickstart")
	files, err := filepath.Glob(filepath.Join(quick, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s.write(filepath.Base(f), string(data))
	}
	for name, content := range extra {
		s.write(name, content)
	}
	logs := t.TempDir()
	for i, b := range backends {
		env := []string{"POD_NAME=" + b.pod, "NAMESPACE=default", "HTTP_PORT=" + strconv.Itoa(b.port),
			// echo-basic also serves h2c; give each its own port.
			"H2C_PORT=" + strconv.Itoa(20000+i)}
		if b.grpc {
			env = append(env, "GRPC_ECHO_SERVER=1")
		}
		s.backends[b.pod] = testenv.StartProcess(t, "backend-"+b.pod, logs, ns.Wrap([]string{echo}), env...)
	}
	s.portico = testenv.StartProcess(t, "portico", logs, ns.Wrap(append([]string{porticoBin, "standalone",
		"--resources", s.resources, "--xds-address", "127.0.0.1:18000", "--admin-address", "127.0.0.1:19000",
		"--debounce", "20ms", "--log-level", "debug"}, flags...)))
	for _, b := range backends {
		s.waitListening(b.port)
	}
	s.eventually(30*time.Second, "portico ready", func() error {
		code, _, err := s.porticoAdmin("/readyz")
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("/readyz: %d", code)
		}
		return err
	})
	s.envoy = testenv.StartEnvoy(t, testenv.EnvoyOptions{
		ConfigPath: filepath.Join(quick, ".envoy", "envoy-bootstrap.yaml"),
		Args:       envoyArgs,
		Wrap:       ns.Wrap,
		Dial:       ns.DialContext,
	})
	if err := s.envoy.WaitLive(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	return s
}

// isolatedNamespace is a network namespace with only a loopback, removed
// when the test ends.
func isolatedNamespace(t testing.TB) *testenv.Netns {
	t.Helper()
	ns, err := testenv.NewIsolatedNamespace()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Close(); err != nil {
			t.Errorf("removing network namespace: %v", err)
		}
	})
	return ns
}

// write puts a file into the resources directory atomically (Portico
// watches it).
func (s *stack) write(name, content string) {
	s.t.Helper()
	tmp := filepath.Join(s.resources, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.resources, name)); err != nil {
		s.t.Fatal(err)
	}
}

func (s *stack) remove(name string) {
	s.t.Helper()
	if err := os.Remove(filepath.Join(s.resources, name)); err != nil {
		s.t.Fatal(err)
	}
}

// waitListening waits until something accepts on 127.0.0.1:port in the
// namespace.
func (s *stack) waitListening(port int) {
	s.t.Helper()
	s.eventually(30*time.Second, fmt.Sprintf("127.0.0.1:%d listening", port), func() error {
		c, err := s.ns.DialContext(context.Background(), "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			c.Close()
		}
		return err
	})
}

// porticoAdmin GETs a path of Portico's admin server.
func (s *stack) porticoAdmin(path string) (int, string, error) {
	c := &http.Client{Transport: s.transport(nil), Timeout: 5 * time.Second}
	resp, err := c.Get("http://127.0.0.1:19000" + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// metric is the value of one sample of Portico's metrics whose line
// starts with prefix (name and labels), or 0.
func (s *stack) metric(prefix string) float64 {
	_, body, err := s.porticoAdmin("/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, prefix) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// transport dials into the stack's namespace; tlsConf (may be nil) is
// for HTTPS.
func (s *stack) transport(tlsConf *tls.Config) *http.Transport {
	return &http.Transport{DialContext: s.ns.DialContext, TLSClientConfig: tlsConf, ForceAttemptHTTP2: tlsConf != nil}
}

// client is an HTTP client into the namespace that does not follow
// redirects.
func (s *stack) client(tlsConf *tls.Config) *http.Client {
	return &http.Client{
		Transport:     s.transport(tlsConf),
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// echoed is what the echo server says about the request it got.
type echoed struct {
	Path      string              `json:"path"`
	Host      string              `json:"host"`
	Method    string              `json:"method"`
	Headers   map[string][]string `json:"headers"`
	Namespace string              `json:"namespace"`
	Pod       string              `json:"pod"`
}

// response is a response through Envoy, with the echo server's account
// of the request when a backend answered.
type response struct {
	code   int
	header http.Header
	body   string
	echo   *echoed
}

// get sends GET url (whose host is 127.0.0.1:port in the namespace) with
// Host host and extra headers (name, value pairs).
func (s *stack) get(c *http.Client, url, host string, headers ...string) (response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return response{}, err
	}
	req.Host = host
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	r := response{code: resp.StatusCode, header: resp.Header, body: string(body)}
	var e echoed
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") && json.Unmarshal(body, &e) == nil && e.Pod != "" {
		r.echo = &e
	}
	return r, nil
}

// eventually retries cond every 50 ms until it returns nil or timeout
// passes, then fails the test with cond's last error.
func (s *stack) eventually(timeout time.Duration, what string, cond func() error) {
	s.t.Helper()
	eventually(s.t, timeout, what, cond)
}

func eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// routed waits until GET url with host is answered by backend pod (and
// returns that response): configuration reaches Envoy asynchronously.
func (s *stack) routed(c *http.Client, url, host, pod string, headers ...string) response {
	s.t.Helper()
	var last response
	s.eventually(15*time.Second, fmt.Sprintf("%s (Host %s) served by %s", url, host, pod), func() error {
		r, err := s.get(c, url, host, headers...)
		if err != nil {
			return err
		}
		last = r
		if r.echo == nil || r.echo.Pod != pod {
			return fmt.Errorf("got %d %q", r.code, truncate(r.body, 200))
		}
		return nil
	})
	return last
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
