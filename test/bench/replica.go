package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ControllerNamespace holds the leader-election Lease and PKI Secrets.
const ControllerNamespace = "portico-system"

// Replica is one `portico controller` process.
type Replica struct {
	Name      string
	XDSAddr   string
	AdminAddr string
	DebugAddr string // /debug (leader, pprof)
	cmd       *exec.Cmd
	done      chan struct{}
	exitErr   error
	http      *http.Client
}

// ReplicaArgs are the flags every replica gets besides its addresses and
// identity: the defaults of `portico controller` otherwise (lease timings,
// debounce, client QPS, provisioning and xDS mTLS), plus extra.
func ReplicaArgs(kubeconfig string, extra []string) []string {
	args := []string{
		"--kubeconfig", kubeconfig,
		"--namespace", ControllerNamespace,
		"--xds-extra-san", "127.0.0.1",
		"--log-level", "warn",
	}
	return append(args, extra...)
}

// StartReplica starts bin as a controller replica; its output goes to
// logDir/<name>.log.
func StartReplica(bin, logDir, name string, args []string) (*Replica, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	r := &Replica{
		Name:      name,
		XDSAddr:   fmt.Sprintf("127.0.0.1:%d", ports[0]),
		AdminAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		DebugAddr: fmt.Sprintf("127.0.0.1:%d", ports[2]),
		done:      make(chan struct{}),
		http:      &http.Client{Timeout: 10 * time.Second},
	}
	logf, err := os.OpenFile(filepath.Join(logDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	all := append([]string{"controller", "--identity", name,
		"--xds-address", r.XDSAddr, "--admin-address", r.AdminAddr, "--debug-address", r.DebugAddr}, args...)
	r.cmd = exec.Command(bin, all...)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	// Die with the suite: a leftover replica would hold the Lease.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() {
		r.exitErr = r.cmd.Wait()
		logf.Close()
		close(r.done)
	}()
	return r, nil
}

// Pid is the process id.
func (r *Replica) Pid() int { return r.cmd.Process.Pid }

// Exited reports whether the process has exited.
func (r *Replica) Exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// Signal sends sig to the process.
func (r *Replica) Signal(sig syscall.Signal) error { return r.cmd.Process.Signal(sig) }

// Stop sends SIGTERM and waits up to timeout, then SIGKILLs.
func (r *Replica) Stop(timeout time.Duration) {
	if r.Exited() {
		return
	}
	_ = r.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(timeout):
		_ = r.Signal(syscall.SIGKILL)
		<-r.done
	}
}

// Wait waits for the process to exit.
func (r *Replica) Wait(timeout time.Duration) error {
	select {
	case <-r.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("replica %s still running after %s", r.Name, timeout)
	}
}

func (r *Replica) get(ctx context.Context, path string) (*http.Response, error) {
	return r.getWith(ctx, r.http, path)
}

// getWith is get through client c.
func (r *Replica) getWith(ctx context.Context, c *http.Client, path string) (*http.Response, error) {
	addr := r.AdminAddr
	if strings.HasPrefix(path, "/debug/") {
		addr = r.DebugAddr
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return nil, err
	}
	return c.Do(req)
}

// SaveProfile writes the profile the debug server serves at path (a
// /debug/pprof/ one) to file. A CPU profile takes as long as it asks for
// (?seconds=), longer than the client's timeout may be: the request has
// a minute more than that instead.
func (r *Replica) SaveProfile(ctx context.Context, path, file string) error {
	wait := time.Minute
	if u, err := url.Parse(path); err == nil {
		if n, err := strconv.Atoi(u.Query().Get("seconds")); err == nil && n > 0 {
			wait += time.Duration(n) * time.Second
		}
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	resp, err := r.getWith(ctx, &http.Client{Transport: r.http.Transport}, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s (is --debug-pprof set?)", path, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Ready reports whether /readyz answers 200.
func (r *Replica) Ready(ctx context.Context) bool {
	resp, err := r.get(ctx, "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Leader asks /debug/leader.
func (r *Replica) Leader(ctx context.Context) (bool, error) {
	resp, err := r.get(ctx, "/debug/leader")
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var v struct {
		Leader bool `json:"leader"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return false, err
	}
	return v.Leader, nil
}

// Metrics scrapes /metrics.
func (r *Replica) Metrics(ctx context.Context) (Samples, error) {
	resp, err := r.get(ctx, "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s /metrics: %s", r.Name, resp.Status)
	}
	return ParseMetrics(resp.Body)
}

// ProcStatus reads VmRSS and VmHWM (peak RSS) of the process, in MiB.
func (r *Replica) ProcStatus() (rss, hwm float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.Pid()))
	if err != nil {
		return 0, 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = round(kb/1024, 1)
		case "VmHWM:":
			hwm = round(kb/1024, 1)
		}
	}
	return rss, hwm, nil
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
