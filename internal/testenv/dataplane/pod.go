package dataplane

// One Pod: its network namespace, its containers' processes (restarted
// with a back-off when they exit, restartPolicy Always), their logs and
// the readiness probes that tell the load balancers where to send.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-dev/portico/internal/testenv"
)

type podRun struct {
	d   *DataPlane
	pod *corev1.Pod

	// set by start, cleared by stop; the loop's goroutine only
	netns      *testenv.Netns
	dir        string
	containers []*containerRun
	cancel     context.CancelFunc
	probes     sync.WaitGroup

	unsupported bool
	failures    int
	retryAt     time.Time
	lastErr     string

	ready atomic.Bool
	// terminating is set when the Pod's graceful termination starts
	// (terminate.go); termDone is closed when its containers have
	// stopped (the loop's goroutine only).
	terminating atomic.Bool
	termDone    chan struct{}
}

type containerRun struct {
	spec     *Container
	rt       Runtime
	sb       *Sandbox
	log      *criLog
	mu       sync.Mutex // guards proc, which the probes read
	proc     Process
	restarts int
	retryAt  time.Time
}

// exited is the current process's Exited.
func (c *containerRun) exited() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proc.Exited()
}

func (r *podRun) key() string { return r.pod.Namespace + "/" + r.pod.Name }

func (r *podRun) logf(format string, args ...any) {
	r.d.opts.Logf("dataplane: Pod %s (%s): %s", r.key(), r.pod.Status.PodIP, fmt.Sprintf(format, args...))
}

// sync starts the Pod if it is not running (or retries a failed start
// after its back-off) and restarts its exited containers.
func (r *podRun) sync(ctx context.Context) {
	if r.unsupported {
		return
	}
	if r.netns == nil {
		if time.Now().Before(r.retryAt) {
			return
		}
		if err := r.start(ctx); err != nil {
			r.stop()
			r.failures++
			r.retryAt = time.Now().Add(backoff(r.failures))
			if msg := err.Error(); msg != r.lastErr {
				r.lastErr = msg
				r.logf("not started (retrying): %v", err)
			}
		}
		return
	}
	for _, c := range r.containers {
		select {
		case <-c.proc.Exited():
		default:
			continue
		}
		if c.retryAt.IsZero() {
			c.restarts++
			c.retryAt = time.Now().Add(backoff(c.restarts))
			r.logf("container %s exited (restart %d):\n%s", c.spec.Spec.Name, c.restarts, c.proc.Tail())
			r.d.wake()
		}
		if time.Now().Before(c.retryAt) {
			continue
		}
		c.proc.Stop()
		proc, err := c.rt.Start(c.spec, c.sb)
		if err != nil {
			r.logf("container %s: restart: %v", c.spec.Spec.Name, err)
			c.retryAt = time.Now().Add(backoff(c.restarts))
			continue
		}
		c.mu.Lock()
		c.proc = proc
		c.mu.Unlock()
		c.retryAt = time.Time{}
	}
}

func backoff(n int) time.Duration {
	d := time.Duration(1<<min(n, 4)) * 500 * time.Millisecond
	return min(d, 10*time.Second)
}

// start makes the namespace and starts every container; on an error the
// caller stops what was started.
func (r *podRun) start(ctx context.Context) error {
	p := r.pod
	var rts []Runtime
	for _, c := range p.Spec.Containers {
		rt := r.d.runtime(c.Image)
		if rt == nil {
			r.unsupported = true
			r.d.markUnsupported(p, c.Image, "no runtime of the local data plane runs this image")
			return nil
		}
		rts = append(rts, rt)
	}
	if len(p.Spec.InitContainers) > 0 {
		r.unsupported = true
		r.d.markUnsupported(p, p.Spec.InitContainers[0].Image, "init containers are not supported")
		return nil
	}
	// Everything the containers need from the API server first: a Pod
	// whose Secret is not there yet gets no namespace until it is.
	var specs []*Container
	for i := range p.Spec.Containers {
		c, err := ResolveContainer(ctx, r.d.cs, p, &p.Spec.Containers[i], rts[i].DefaultUser(p.Spec.Containers[i].Image))
		if err != nil {
			return fmt.Errorf("container %s: %w", p.Spec.Containers[i].Name, err)
		}
		specs = append(specs, c)
	}
	ip, err := netip.ParseAddr(p.Status.PodIP)
	if err != nil {
		return err
	}
	r.dir = filepath.Join(r.d.dir, "pods", fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID))
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return err
	}
	if r.netns, err = r.d.bridge.AddNamespace(ip); err != nil {
		return err
	}
	if err := r.setUpNetns(ip); err != nil {
		return err
	}
	pctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	files := map[string]string{}
	for i, c := range specs {
		cdir := filepath.Join(r.dir, c.Spec.Name)
		if err := os.MkdirAll(cdir, 0o755); err != nil {
			return err
		}
		logPath := filepath.Join(r.dir, c.Spec.Name+".log")
		l, err := openCRILog(logPath)
		if err != nil {
			return err
		}
		cr := &containerRun{spec: c, rt: rts[i], log: l, sb: &Sandbox{
			Netns: r.netns, Dir: cdir, Stdout: l.stream("stdout"), Stderr: l.stream("stderr"),
			Logf: r.d.opts.Logf,
		}}
		r.containers = append(r.containers, cr)
		if cr.proc, err = cr.rt.Start(c, cr.sb); err != nil {
			return fmt.Errorf("container %s (%s): %w", c.Spec.Name, rts[i].Name(), err)
		}
		files[c.Spec.Name] = logPath
	}
	r.d.logs.register(ctx, p, files)
	r.probes.Add(1)
	go r.probe(pctx)
	if r.failures > 0 {
		r.logf("started after %d failed attempts", r.failures)
	}
	return nil
}

// setUpNetns removes the default route
// (the Pod reaches the bridge's prefix only) and applies the Pod's net.*
// sysctls, which are per network namespace.
func (r *podRun) setUpNetns(ip netip.Addr) error {
	if err := command("ip", "-n", r.netns.Name, "route", "del", "default"); err != nil {
		return err
	}
	if sc := r.pod.Spec.SecurityContext; sc != nil {
		for _, s := range sc.Sysctls {
			if !strings.HasPrefix(s.Name, "net.") || strings.ContainsAny(s.Name, "/ ") {
				return fmt.Errorf("sysctl %s: only net.* sysctls are supported", s.Name)
			}
			path := "/proc/sys/" + strings.ReplaceAll(s.Name, ".", "/")
			if err := command("ip", append([]string{"netns", "exec", r.netns.Name, "sh", "-c", `printf '%s\n' "$1" >"$2"`, "sysctl"}, s.Value, path)...); err != nil {
				return fmt.Errorf("sysctl %s: %w", s.Name, err)
			}
		}
	}
	return nil
}

// stop stops the containers, deletes the namespace and the Pod's files.
func (r *podRun) stop() {
	r.ready.Store(false)
	if r.cancel != nil {
		r.cancel()
		r.probes.Wait()
		r.cancel = nil
	}
	var wg sync.WaitGroup
	for _, c := range r.containers {
		if c.proc != nil {
			wg.Go(c.proc.Stop)
		}
	}
	wg.Wait()
	for _, c := range r.containers {
		c.log.Close()
	}
	hadNetns := r.netns != nil
	if hadNetns {
		r.d.logs.unregister(context.Background(), r.pod)
		if err := r.netns.Close(); err != nil {
			r.logf("removing its network namespace: %v", err)
		}
		r.netns = nil
		// The host's neighbour entry of the IP (readiness probes) would
		// point at the gone veth.
		_ = command("ip", "neigh", "flush", "to", r.pod.Status.PodIP, "dev", r.d.bridge.Name)
	}
	r.containers = nil
	if r.dir != "" {
		_ = os.RemoveAll(r.dir)
		r.dir = ""
	}
}

// probe runs the containers' readiness probes until ctx ends: every
// 200 ms until the Pod is ready, then every second; a container without
// one is ready while it runs.
func (r *podRun) probe(ctx context.Context) {
	defer r.probes.Done()
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	ip := r.pod.Status.PodIP
	for {
		ok := true
		for _, c := range r.containers {
			select {
			case <-c.exited():
				ok = false
			default:
			}
			if ok && c.spec.Spec.ReadinessProbe != nil {
				ok = probeOnce(ctx, client, ip, c.spec.Spec) == nil
			}
		}
		if r.ready.Swap(ok) != ok {
			r.d.wake()
		}
		wait := 200 * time.Millisecond
		if ok {
			wait = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// probeOnce runs c's readiness probe (httpGet or tcpSocket; others count
// as passing) against the Pod's IP from the host.
func probeOnce(ctx context.Context, client *http.Client, ip string, c *corev1.Container) error {
	p := c.ReadinessProbe
	switch {
	case p.HTTPGet != nil:
		port, err := probePort(c, p.HTTPGet.Port.String(), p.HTTPGet.Port.IntValue())
		if err != nil {
			return err
		}
		if p.HTTPGet.Scheme == corev1.URISchemeHTTPS {
			return errors.New("https probes are not supported")
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(ip, strconv.Itoa(port))+p.HTTPGet.Path, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		return nil
	case p.TCPSocket != nil:
		port, err := probePort(c, p.TCPSocket.Port.String(), p.TCPSocket.Port.IntValue())
		if err != nil {
			return err
		}
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	}
	return nil
}

// probePort resolves a probe's port, a number or a container port name.
func probePort(c *corev1.Container, name string, num int) (int, error) {
	if num > 0 {
		return num, nil
	}
	for _, p := range c.Ports {
		if p.Name == name {
			return int(p.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("probe port %q not found", name)
}
