package faults

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
)

// kube-apiserver restarts (same etcd). Both replicas recover on their own —
// no restart of theirs — and converge: changes made after the restart reach
// the statuses and every replica's xDS, over xDS streams opened before it.
func TestAPIServerRestart(t *testing.T) {
	if harness.clusterDir == "" {
		t.Skip("needs a cluster started by hack/cluster-up.sh (PORTICO_KUBECONFIG points elsewhere)")
	}
	w := newWorld(t)
	w.gateway("gw", nil)
	w.service("web", "10.0.0.1")
	routes := names("r", 5)
	for _, n := range routes {
		w.route(n, "gw", "web")
	}
	rs := w.startReplicas(t, 2)
	waitLeader(t, 30*time.Second, rs...)
	eventually(t, 60*time.Second, "Gateway programmed and routes accepted", func() error {
		return errors.Join(w.gatewayProgrammed("gw", 5), w.routesCorrect(routes...))
	})
	secret := w.clientSecret("gw")
	streams := map[*replica]*adsStream{}
	pids := map[*replica]int{}
	transitions := 0.0
	for _, r := range rs {
		streams[r] = dialADS(t, r.xds, w.ns+"/gw", secret, typeEDS)
		if _, err := streams[r].waitFor(20*time.Second, endpointsAre("10.0.0.1")); err != nil {
			t.Fatalf("replica %s: %v", r.name, err)
		}
		pids[r] = r.pid()
		n, err := r.metric("portico_leader_transitions_total", nil)
		if err != nil {
			t.Fatal(err)
		}
		transitions += n
	}

	down := restartAPIServer(t)
	ready := time.Now()
	figure(t, "apiserver_unavailable", down)

	// Changes after the restart: a new Service and route, new endpoints.
	w.service("web2", "10.0.1.1")
	routes = append(routes, "r5")
	w.route("r5", "gw", "web2")
	w.setEndpoints("web", "10.0.0.2")
	converged := eventually(t, 60*time.Second, "statuses and xDS converged after the restart", func() error {
		if err := errors.Join(w.routesCorrect(routes...), w.gatewayProgrammed("gw", 6)); err != nil {
			return err
		}
		if _, err := leaderOf(rs...); err != nil {
			return err
		}
		return nil
	})
	for _, r := range rs {
		resp, err := streams[r].waitFor(30*time.Second-time.Since(ready), endpointsAre("10.0.0.2", "10.0.1.1"))
		if err != nil {
			t.Fatalf("replica %s: xDS stream opened before the restart: %v", r.name, err)
		}
		converged = max(converged, resp.at.Sub(ready))
	}
	figure(t, "converged_after_apiserver_ready", converged)
	after := 0.0
	for _, r := range rs {
		if !r.running() || r.pid() != pids[r] {
			t.Errorf("replica %s restarted or exited: %v", r.name, r.exitErr())
		}
		n, err := r.metric("portico_leader_transitions_total", nil)
		if err != nil {
			t.Fatal(err)
		}
		after += n
	}
	figure(t, "leader_terms_started", int(after-transitions))
}

// restartAPIServer stops the cluster's kube-apiserver (SIGTERM to its
// process group, as hack/cluster-down.sh does, then SIGKILL after 2 s),
// starts it again with the
// same command line, working directory and log file, records its new pid
// where hack/cluster-down.sh finds it, and waits until it is ready. It
// returns how long the API server was unavailable.
func restartAPIServer(t *testing.T) time.Duration {
	t.Helper()
	dir := harness.clusterDir
	pidFile := filepath.Join(dir, "pids", "kube-apiserver.pid")
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("%s: %v", pidFile, err)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatalf("kube-apiserver (pid %d): %v", pid, err)
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	// Like hack/kwok/lib.sh: trust the pid only if the process names the
	// cluster directory.
	if !strings.Contains(string(raw), dir+"/") || !strings.HasSuffix(args[0], "kube-apiserver") {
		t.Fatalf("pid %d is not this cluster's kube-apiserver: %q", pid, args)
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		t.Fatal(err)
	}

	// SIGTERM first: kube-apiserver stops taking requests and sends GOAWAY
	// on its connections. With clients connected it would then wait 60 s
	// for their watches to end; like a Pod with a short grace period it
	// gets 2 s, then SIGKILL.
	start := time.Now()
	if err := syscall.Kill(-pid, syscall.SIGTERM); err != nil {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	running := func() error {
		if processRunning(pid) {
			return errors.New("still running")
		}
		return nil
	}
	if _, err := poll(2*time.Second, running); err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		eventually(t, 10*time.Second, "kube-apiserver to exit after SIGKILL", running)
	}
	stopped := time.Since(start)

	logf, err := os.OpenFile(filepath.Join(dir, "logs", "kube-apiserver.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(logf, "=== restarted by %s\n", t.Name())
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = cwd
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session, like every cluster component: it outlives this test
	// and hack/cluster-down.sh stops it through the pid file.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		t.Fatalf("restarting kube-apiserver: %v", err)
	}
	go func() { _ = cmd.Wait(); _ = logf.Close() }()
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(restConfig())
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "kube-apiserver /readyz after the restart", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
	down := time.Since(start)
	t.Logf("kube-apiserver restarted: stopped in %s, unavailable for %s (pid %d → %d)",
		stopped.Round(time.Millisecond), down.Round(time.Millisecond), pid, cmd.Process.Pid)
	return down
}

// processRunning reports whether pid exists and is not a zombie.
func processRunning(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	if i := strings.LastIndex(s, ") "); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
