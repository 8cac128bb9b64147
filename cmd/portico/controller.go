package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/portico-dev/portico/internal/controller"
	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/infra"
	"github.com/portico-dev/portico/internal/leader"
	"github.com/portico-dev/portico/internal/pipeline"
	"github.com/portico-dev/portico/internal/status"
)

// Defaults of the admin and debug addresses of controller and standalone:
// probes and metrics on every interface (the kubelet and Prometheus reach
// them), the debug views on loopback only (kubectl port-forward reaches
// them in a Pod).
const (
	defaultAdminAddress = ":19000"
	defaultDebugAddress = "127.0.0.1:19001"
)

// listenerAddr is lis's address, or "off" for none.
func listenerAddr(lis net.Listener) string {
	if lis == nil {
		return "off"
	}
	return lis.Addr().String()
}

// controllerCmd runs Portico against a Kubernetes cluster: every replica
// watches, translates and serves xDS; the holder of the leader Lease writes
// status. It runs until ctx is cancelled (SIGINT/SIGTERM), then releases the
// Lease so a successor takes over at once.
func controllerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("controller", "controller [--kubeconfig FILE] [--namespace NS] [flags]", stderr)
	kubeconfig := fs.String("kubeconfig", "", "`path` of a kubeconfig; empty: in-cluster config")
	namespace := fs.String("namespace", envOr("POD_NAMESPACE", "portico-system"), "`namespace` of the leader-election Lease")
	controllerName := fs.String("controller-name", gatewayapi.DefaultControllerName, "GatewayClass controllerName to serve")
	budgets := addBudgetFlags(fs)
	scopedAt := addScopedRoutesFlag(fs)
	electionID := fs.String("leader-election-id", "portico-leader", "`name` of the leader-election Lease")
	peerSelector := fs.String("peer-selector", "", "label `selector` of the controller's Pods in --namespace: the leader aggregates every replica's proxy sync state "+
		"(GET /debug/proxies on each one's debug server, which must listen off loopback) into the Gateways' portico.dev/ProxiesInSync; empty: its own proxies only")
	identity := fs.String("identity", "", "leader-election identity (default: pod name plus a random suffix)")
	leaseDuration := fs.Duration("lease-duration", defaultLease, "how long a Lease is valid without renewal")
	renewDeadline := fs.Duration("renew-deadline", defaultRenew, "how long the leader retries renewing before it stops writing")
	retryPeriod := fs.Duration("retry-period", defaultRetry, "interval between leader-election attempts")
	xf := addXDSFlags(fs)
	xf.addClientCertValidity(fs)
	adminAddr := fs.String("admin-address", defaultAdminAddress, "`address` of the admin HTTP server (/healthz, /readyz, /metrics)")
	debugAddr := fs.String("debug-address", defaultDebugAddress, "`address` of the debug HTTP server (/debug/xds, /debug/status, /debug/leader, /debug/pprof/); "+
		"empty: none. Off loopback it serves HTTPS (self-signed) and every request needs a bearer token whose user may get the path "+
		"as a non-resource URL (TokenReview and SubjectAccessReview)")
	debugPprof := fs.Bool("debug-pprof", false, "serve Go profiles (net/http/pprof) under /debug/pprof/ on the debug server")
	qps := fs.Float64("kube-api-qps", 50, "client-side QPS limit towards the API server (all but status writes)")
	burst := fs.Int("kube-api-burst", 100, "client-side burst limit towards the API server (all but status writes)")
	statusQPS := fs.Float64("status-qps", controller.DefaultStatusQPS, "client-side QPS limit of status writes")
	statusBurst := fs.Int("status-burst", controller.DefaultStatusBurst, "client-side burst limit of status writes")
	workers := fs.Int("status-workers", status.DefaultWorkers, "concurrent status writes")
	debounce := fs.Duration("debounce", pipeline.DefaultDebounce, "shortest pause between two translations; changes during a translation or its pause are coalesced (a change after it is translated at once)")
	maxDelay := fs.Duration("max-delay", pipeline.DefaultMaxDelay, "longest pause between two translations (the pause follows a slow translation's duration)")
	provision := fs.Bool("provision", true, "provision an Envoy Deployment and Service per Gateway (leader only)")
	agentImage := fs.String("proxy-agent-image", infra.DefaultAgentImage, "`image` of the proxies' shutdown-manager sidecar (portico proxy-agent): this controller's image")
	xdsService := fs.String("xds-service-address", "", "`host:port` Envoy dials for xDS (default portico-xds.<namespace>.svc:18000)")
	xdsTLS := fs.Bool("xds-tls", true, "require mutual TLS on xDS; proxies get only their own Gateway's config. "+
		"false: plaintext, on loopback unless --xds-address, TLS private keys withheld unless --xds-unauthenticated-secrets")
	var sans stringList
	fs.Var(&sans, "xds-extra-san", "extra DNS name or IP of the xDS serving certificate (repeatable)")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	gc := addGCFlags(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "portico controller: --log-level: %v\n", err)
		return exitUsage
	}
	if err := errors.Join(xf.check(), gc.check()); err != nil {
		fmt.Fprintf(stderr, "portico controller: %v\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	// client-go logs (leader election among them) through klog.
	klog.SetSlogLogger(log.With("component", "client-go"))
	gc.apply(log)

	cfg, err := restConfig(*kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "portico controller: %v\n", err)
		return exitError
	}
	if *identity == "" {
		*identity = leader.DefaultIdentity()
	}
	xdsLis, err := net.Listen("tcp", xf.listenAddress(*xdsTLS))
	if err != nil {
		fmt.Fprintf(stderr, "portico controller: xDS listener: %v\n", err)
		return exitError
	}
	adminLis, err := net.Listen("tcp", *adminAddr)
	if err != nil {
		_ = xdsLis.Close()
		fmt.Fprintf(stderr, "portico controller: admin listener: %v\n", err)
		return exitError
	}
	var debugLis net.Listener
	if *debugAddr != "" {
		if debugLis, err = net.Listen("tcp", *debugAddr); err != nil {
			_ = xdsLis.Close()
			_ = adminLis.Close()
			fmt.Fprintf(stderr, "portico controller: debug listener: %v\n", err)
			return exitError
		}
	}
	closeAll := func() {
		_ = xdsLis.Close()
		_ = adminLis.Close()
		if debugLis != nil {
			_ = debugLis.Close()
		}
	}
	maxRoute, maxGateway := budgets.values()
	var proxySync controller.ProxySync
	if *peerSelector != "" {
		if proxySync.Peers, err = podPeers(cfg, *namespace, *peerSelector, *debugAddr); err != nil {
			closeAll()
			fmt.Fprintf(stderr, "portico controller: %v\n", err)
			return exitUsage
		}
	}
	c, err := controller.New(controller.Options{
		RESTConfig:        cfg,
		Namespace:         *namespace,
		ControllerName:    *controllerName,
		LeaderElectionID:  *electionID,
		Identity:          *identity,
		LeaseDuration:     *leaseDuration,
		RenewDeadline:     *renewDeadline,
		RetryPeriod:       *retryPeriod,
		QPS:               float32(*qps),
		Burst:             *burst,
		StatusQPS:         float32(*statusQPS),
		StatusBurst:       *statusBurst,
		StatusWorkers:     *workers,
		Debounce:          *debounce,
		MaxDelay:          *maxDelay,
		XDSListener:       xdsLis,
		AdminListener:     adminLis,
		DebugListener:     debugLis,
		DebugPprof:        *debugPprof,
		Provision:         *provision,
		XDSTLS:            *xdsTLS,
		XDSSecurity:       xf.security(),
		XDSExtraSANs:      sans,
		XDSServiceAddress: *xdsService,
		ProxyAgentImage:   *agentImage,
		MaxRouteExpansion: maxRoute, MaxGatewayExpansion: maxGateway,
		XDSOptions: scopedAt.options(),
		ProxySync:  proxySync,
		Log:        log,
	})
	if err != nil {
		closeAll()
		fmt.Fprintf(stderr, "portico controller: %v\n", err)
		return exitError
	}
	fmt.Fprintf(stdout, "portico controller %s: xDS on %s, admin on %s, debug on %s, Lease %s/%s\n",
		*identity, xdsLis.Addr(), adminLis.Addr(), listenerAddr(debugLis), *namespace, *electionID)
	if err := c.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "portico controller: %v\n", err)
		return exitError
	}
	return exitOK
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config (use --kubeconfig outside a cluster): %w", err)
		}
		return cfg, nil
	}
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
