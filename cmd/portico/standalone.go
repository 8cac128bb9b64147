package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/portico-dev/portico/internal/admin"
	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/pipeline"
	"github.com/portico-dev/portico/internal/provider/file"
	"github.com/portico-dev/portico/internal/xds/server"
)

// shutdownTimeout bounds the wait for every component to stop; it exceeds
// the xDS server's own graceful-stop bound.
const shutdownTimeout = server.DefaultShutdownTimeout + 5*time.Second

// standaloneCmd serves xDS from a directory of manifests:
//
//	file provider → pipeline → xDS server, with the admin server reading the
//	pipeline's readiness and the shared metrics, and the debug server (on
//	loopback unless --debug-insecure) its /debug views.
//
// The listeners are bound first, so that the printed addresses are the real
// ones (":0" picks a free port). The xDS gRPC server starts serving only once
// the first translation has been handed to it (Pipeline.ReadyC): until then
// a proxy's connection waits in the listen backlog instead of being served
// an empty configuration. The admin server serves at once; its readiness
// endpoint reports the pipeline's Ready.
//
// xDS is plaintext on loopback by default, withholding TLS private keys
// (see xdsflags.go and the xds/server package doc); --xds-tls-cert and
// --xds-tls-key turn on TLS, --xds-client-ca mutual TLS.
//
// It runs until ctx is cancelled (SIGINT/SIGTERM), then stops every
// component and returns 0, or 1 when a component failed.
func standaloneCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("standalone", "standalone --resources DIR [--xds-address 127.0.0.1:18000] [--xds-tls-cert FILE --xds-tls-key FILE [--xds-client-ca FILE]] [--admin-address :19000] [--debug-address 127.0.0.1:19001] [--controller-name NAME] [--log-level info]", stderr)
	resources := fs.String("resources", "", "`directory` of manifests, watched for changes (required)")
	xf, tf := addXDSFlags(fs), addStandaloneTLSFlags(fs)
	adminAddr := fs.String("admin-address", defaultAdminAddress, "`address` of the admin HTTP server (/healthz, /readyz, /metrics)")
	debugAddr := fs.String("debug-address", defaultDebugAddress, "`address` of the debug HTTP server (/debug/xds, /debug/status), unauthenticated: "+
		"loopback only unless --debug-insecure; empty: none")
	debugInsecure := fs.Bool("debug-insecure", false, "allow a --debug-address that is not on loopback, with no authentication (standalone has no Kubernetes "+
		"to check tokens with): whoever reaches it reads every Gateway's configuration")
	controller := fs.String("controller-name", gatewayapi.DefaultControllerName, "GatewayClass controllerName to serve")
	budgets := addBudgetFlags(fs)
	scopedAt := addScopedRoutesFlag(fs)
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	debounce := fs.Duration("debounce", file.DefaultDebounce, "quiet period after a file change before reloading (editors write in bursts)")
	loadLimits := addLoadFlags(fs)
	gc := addGCFlags(fs)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	if err := gc.check(); err != nil {
		fmt.Fprintf(stderr, "portico standalone: %v\n", err)
		return exitUsage
	}
	if *resources == "" {
		fmt.Fprintln(stderr, "portico standalone: --resources is required")
		fs.Usage()
		return exitUsage
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "portico standalone: --log-level: %v\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	gc.apply(log)

	m := metrics.New()
	xdsServer := server.New(log, m)
	if err := tf.configure(xdsServer, xf, log); err != nil {
		fmt.Fprintf(stderr, "portico standalone: %v\n", err)
		return exitUsage
	}
	maxRoute, maxGateway := budgets.values()
	pipe := pipeline.New(pipeline.Config{
		MaxRouteExpansion:   maxRoute,
		MaxGatewayExpansion: maxGateway,
		ControllerName:      *controller,
		XDS:                 xdsServer,
		XDSOptions:          scopedAt.options(),
		Metrics:             m,
		Log:                 log,
	})
	adminServer := admin.New(log, m, pipe)
	debugServer := admin.NewDebug(admin.DebugOptions{Log: log, Source: admin.PipelineViews(pipe), Insecure: *debugInsecure})
	debugServer.Handle("GET /debug/proxies", admin.ProxiesHandler("standalone", xdsServer))
	provider := file.New(*resources, pipe.Submit, log, *debounce).WithOptions(file.Options{Limits: loadLimits.limits(), Metrics: m})

	xdsLis, err := net.Listen("tcp", xf.listenAddress(xdsServer.Mode() == server.ModeMTLS))
	if err != nil {
		fmt.Fprintf(stderr, "portico standalone: xDS listener: %v\n", err)
		return exitError
	}
	adminLis, err := net.Listen("tcp", *adminAddr)
	if err != nil {
		xdsLis.Close()
		fmt.Fprintf(stderr, "portico standalone: admin listener: %v\n", err)
		return exitError
	}
	var debugLis net.Listener
	if *debugAddr != "" {
		if debugLis, err = net.Listen("tcp", *debugAddr); err != nil {
			xdsLis.Close()
			adminLis.Close()
			fmt.Fprintf(stderr, "portico standalone: debug listener: %v\n", err)
			return exitError
		}
		if !admin.IsLoopback(debugLis.Addr()) && !*debugInsecure {
			xdsLis.Close()
			adminLis.Close()
			debugLis.Close()
			fmt.Fprintf(stderr, "portico standalone: --debug-address %s is not a loopback address, and standalone cannot authenticate "+
				"debug requests: use a loopback address (the default is %s), or add --debug-insecure to serve them to anyone who reaches it\n",
				*debugAddr, defaultDebugAddress)
			return exitUsage
		}
	}
	fmt.Fprintf(stdout, "xDS listening on %s, admin on %s, debug on %s\n", xdsLis.Addr(), adminLis.Addr(), listenerAddr(debugLis))
	log.Info("starting standalone", "resources", *resources, "xds", xdsLis.Addr().String(),
		"admin", adminLis.Addr().String(), "debug", listenerAddr(debugLis), "controllerName", *controller)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	start := func(name string, run func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(ctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				mu.Unlock()
				log.Error("component failed, stopping", "component", name, "error", err)
				cancel()
			}
		}()
	}
	start("pipeline", pipe.Run)
	start("file provider", provider.Run)
	start("admin server", func(ctx context.Context) error { return adminServer.Serve(ctx, adminLis) })
	if debugLis != nil {
		start("debug server", func(ctx context.Context) error { return debugServer.Serve(ctx, debugLis) })
	}
	start("xds server", func(ctx context.Context) error {
		select {
		case <-pipe.ReadyC():
		case <-ctx.Done():
			xdsLis.Close()
			return nil
		}
		log.Info("first translation done, serving xDS", "address", xdsLis.Addr().String())
		return xdsServer.Serve(ctx, xdsLis)
	})

	<-ctx.Done()
	log.Info("shutting down")
	stopped := make(chan struct{})
	go func() {
		wg.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(shutdownTimeout):
		errs = append(errs, fmt.Errorf("components did not stop within %s", shutdownTimeout))
	}
	mu.Lock()
	err = errors.Join(errs...)
	mu.Unlock()
	if err != nil {
		fmt.Fprintf(stderr, "portico standalone: %v\n", err)
		return exitError
	}
	log.Info("stopped")
	return exitOK
}
