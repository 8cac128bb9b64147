package faults

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/portico-dev/portico/test/faults/faultproxy"
)

// replica is one `portico controller` process whose only way to the API
// server is its fault proxy.
type replica struct {
	name  string
	proxy *faultproxy.Proxy
	xds   string // host:port
	admin string // host:port
	debug string // host:port of /debug
	log   string // path of its log file
	cmd   *exec.Cmd
	done  chan struct{} // closed when the process has exited
	mu    sync.Mutex
	exit  error
	stop  sync.Once
}

// newProxy starts a fault proxy to the cluster's API server, authenticating
// upstream as the harness's (cluster-admin) user.
func newProxy(t *testing.T) (*faultproxy.Proxy, []byte) {
	t.Helper()
	cert, caPEM, err := faultproxy.SelfSigned()
	if err != nil {
		t.Fatal(err)
	}
	cfg := restConfig()
	upstream, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{
		TLSClientConfig:     tlsCfg,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
	}
	p, err := faultproxy.Start(faultproxy.Config{Upstream: upstream, Transport: tr, Certificate: cert})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(); tr.CloseIdleConnections() })
	return p, caPEM
}

// writeKubeconfig writes a kubeconfig for a replica that points at its
// proxy (no credentials: the proxy authenticates upstream).
func writeKubeconfig(path, server string, caPEM []byte) error {
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: proxy
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: nobody
  user: {}
contexts:
- name: proxy
  context: {cluster: proxy, user: nobody}
current-context: proxy
`, server, path+".ca.crt")
	if err := os.WriteFile(path+".ca.crt", caPEM, 0o600); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(kc), 0o600)
}

// freePort returns a loopback address with a port that was free a moment
// ago.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startReplicas starts n replicas named a, b, … of w's controller and waits
// until each is ready.
func (w *world) startReplicas(t *testing.T, n int, extra ...string) []*replica {
	t.Helper()
	var rs []*replica
	for i := range n {
		rs = append(rs, w.startReplica(t, string(rune('a'+i)), extra...))
	}
	for _, r := range rs {
		r.waitReady(t, 60*time.Second)
	}
	return rs
}

// startReplica starts one replica process (it is stopped when the test
// ends). It does not wait for readiness.
func (w *world) startReplica(t *testing.T, name string, extra ...string) *replica {
	t.Helper()
	proxy, caPEM := newProxy(t)
	logDir := filepath.Join(harness.outDir, "logs", strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig-"+name)
	if err := writeKubeconfig(kubeconfig, proxy.URL(), caPEM); err != nil {
		t.Fatal(err)
	}
	r := &replica{name: name, proxy: proxy, log: filepath.Join(logDir, name+".log")}
	// The ports are picked before the process binds them; on the rare
	// clash the process exits at once and we try other ports.
	for attempt := 0; ; attempt++ {
		xds, err1 := freePort()
		admin, err2 := freePort()
		debug, err3 := freePort()
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatal(err)
		}
		r.xds, r.admin, r.debug = xds, admin, debug
		args := append([]string{"controller",
			"--kubeconfig", kubeconfig,
			"--namespace", w.ns,
			"--controller-name", w.controller,
			"--identity", name,
			"--lease-duration", leaseDuration.String(),
			"--renew-deadline", renewDeadline.String(),
			"--retry-period", retryPeriod.String(),
			"--xds-extra-san", "127.0.0.1",
			"--debounce", "20ms",
			"--max-delay", "200ms",
			"--xds-address", xds,
			"--admin-address", admin,
			"--debug-address", debug,
		}, extra...)
		flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
		if attempt == 0 {
			flags |= os.O_TRUNC // a fresh log per run
		}
		logf, err := os.OpenFile(r.log, flags, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(logf, "=== %s %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(args, " "))
		cmd := exec.Command(harness.portico, args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		// If the test binary dies, so do its replicas.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			_ = logf.Close()
			t.Fatal(err)
		}
		r.cmd, r.done = cmd, make(chan struct{})
		go func(done chan struct{}) {
			err := cmd.Wait()
			_ = logf.Close()
			r.mu.Lock()
			r.exit = err
			r.mu.Unlock()
			close(done)
		}(r.done)
		select {
		case <-r.done:
			if attempt < 3 && strings.Contains(tail(r.log, 5), "address already in use") {
				continue
			}
			t.Fatalf("replica %s exited at once: %v\n%s", name, r.exitErr(), tail(r.log, 20))
		case <-time.After(300 * time.Millisecond):
		}
		break
	}
	t.Cleanup(func() {
		r.terminate(t)
		if t.Failed() {
			t.Logf("last lines of replica %s (%s):\n%s", name, r.log, tail(r.log, 40))
		}
	})
	return r
}

func (r *replica) exitErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exit
}

// running reports whether the process is still alive.
func (r *replica) running() bool {
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

func (r *replica) pid() int { return r.cmd.Process.Pid }

// kill sends SIGKILL and waits for the process to be gone.
func (r *replica) kill(t *testing.T) {
	t.Helper()
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("replica %s survived SIGKILL", r.name)
	}
}

// terminate stops the process gracefully (SIGTERM), then forcibly.
func (r *replica) terminate(t *testing.T) {
	r.stop.Do(func() {
		if !r.running() {
			return
		}
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.done:
		case <-time.After(15 * time.Second):
			t.Errorf("replica %s ignored SIGTERM for 15s; killing it", r.name)
			_ = r.cmd.Process.Signal(syscall.SIGKILL)
			<-r.done
		}
	})
}

var adminClient = &http.Client{Timeout: 2 * time.Second}

func (r *replica) get(path string) ([]byte, error) {
	addr := r.admin
	if strings.HasPrefix(path, "/debug/") {
		addr = r.debug
	}
	resp, err := adminClient.Get("http://" + addr + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, strings.TrimSpace(b.String()))
	}
	return []byte(b.String()), sc.Err()
}

func (r *replica) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, "replica "+r.name+" ready", func() error {
		if !r.running() {
			t.Fatalf("replica %s exited: %v\n%s", r.name, r.exitErr(), tail(r.log, 30))
		}
		_, err := r.get("/readyz")
		return err
	})
}

// isLeader asks the replica's /debug/leader.
func (r *replica) isLeader() (bool, error) {
	b, err := r.get("/debug/leader")
	if err != nil {
		return false, err
	}
	var body struct {
		Leader   bool   `json:"leader"`
		Identity string `json:"identity"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return false, err
	}
	if body.Identity != r.name {
		return false, fmt.Errorf("identity %q, want %q", body.Identity, r.name)
	}
	return body.Leader, nil
}

// leaderOf returns the one replica that leads, or an error if none or
// several do.
func leaderOf(rs ...*replica) (*replica, error) {
	var found *replica
	for _, r := range rs {
		if !r.running() {
			continue
		}
		l, err := r.isLeader()
		if err != nil {
			return nil, fmt.Errorf("replica %s: %w", r.name, err)
		}
		if l {
			if found != nil {
				return nil, fmt.Errorf("two leaders: %s and %s", found.name, r.name)
			}
			found = r
		}
	}
	if found == nil {
		return nil, errors.New("no leader")
	}
	return found, nil
}

func waitLeader(t *testing.T, timeout time.Duration, rs ...*replica) *replica {
	t.Helper()
	var l *replica
	eventually(t, timeout, "a leader", func() (err error) {
		l, err = leaderOf(rs...)
		return err
	})
	return l
}

// others returns rs without r.
func others(r *replica, rs []*replica) []*replica {
	var out []*replica
	for _, x := range rs {
		if x != r {
			out = append(out, x)
		}
	}
	return out
}

// metric sums the samples of a metric whose labels include want.
func (r *replica) metric(name string, want map[string]string) (float64, error) {
	b, err := r.get("/metrics")
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		labels := ""
		if strings.HasPrefix(rest, "{") {
			end := strings.Index(rest, "}")
			if end < 0 {
				continue
			}
			labels, rest = rest[1:end], rest[end+1:]
		} else if !strings.HasPrefix(rest, " ") {
			continue // a longer metric name
		}
		ok := true
		for k, v := range want {
			if !strings.Contains(","+labels+",", fmt.Sprintf(`,%s=%q,`, k, v)) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", name, line, err)
		}
		sum += v
	}
	return sum, nil
}

// statusWrites counts the status writes that reached the replica's proxy
// and match (nil: all).
func (r *replica) statusWrites(match func(*faultproxy.Record) bool) int {
	return r.proxy.Count(func(rec *faultproxy.Record) bool {
		return rec.Class == faultproxy.ClassStatusWrite && (match == nil || match(rec))
	})
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
