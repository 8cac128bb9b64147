package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/portico-dev/portico/internal/proxyagent"
	"github.com/portico-dev/portico/internal/proxyspec"
)

// proxyAgentCmd is `portico proxy-agent`, the shutdown-manager sidecar of
// provisioned proxies (see internal/proxyagent): on SIGTERM it drains
// Envoy through its admin interface, and its /shutdown/wait answers
// Envoy's preStop hook when the drain is over.
func proxyAgentCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("proxy-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	admin := fs.String("admin-address", "127.0.0.1:19001", "`host:port` of Envoy's admin interface")
	listen := fs.String("listen", ":"+strconv.Itoa(int(proxyspec.AgentPort)), "`address` of /shutdown/wait (Envoy's preStop hook)")
	timeout := fs.Duration("drain-timeout", proxyspec.DefaultDrainTimeout, "longest drain")
	minDrain := fs.Duration("min-drain-duration", proxyspec.DefaultMinDrainDuration, "shortest drain: how long a draining proxy keeps taking new connections")
	ignore := fs.String("ignore-ports", "19002,"+strconv.Itoa(int(proxyspec.DefaultMetricsPort)), "comma-separated listener `ports` whose connections the drain does not wait for (readiness, metrics)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	var ports []int
	for _, p := range strings.Split(*ignore, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			fmt.Fprintf(stderr, "portico proxy-agent: --ignore-ports: bad port %q\n", p)
			return exitUsage
		}
		ports = append(ports, n)
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(stdout, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
	}
	a, err := proxyagent.New(proxyagent.Options{AdminAddress: *admin, DrainTimeout: *timeout, MinDrain: *minDrain, IgnorePorts: ports, Logf: logf})
	if err != nil {
		fmt.Fprintf(stderr, "portico proxy-agent: %v\n", err)
		return exitUsage
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(stderr, "portico proxy-agent: %v\n", err)
		return exitError
	}
	// SIGTERM starts the drain; a second SIGTERM or SIGINT does not cut
	// it short (the kubelet's SIGKILL at the grace period's end does).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(sigs)
	terminate := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			close(terminate)
		case <-ctx.Done():
		}
	}()
	logf("proxy-agent: serving /shutdown/wait on %s; Envoy admin %s", l.Addr(), *admin)
	if err := a.Run(ctx, l, terminate, time.Second); err != nil {
		fmt.Fprintf(stderr, "portico proxy-agent: %v\n", err)
		return exitError
	}
	return exitOK
}
