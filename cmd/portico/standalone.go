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
	"github.com/portico-dev/portico/internal/xds/translate"
)

// shutdownTimeout bounds the wait for every component to stop; it exceeds
// the xDS server's own graceful-stop bound.
const shutdownTimeout = server.DefaultShutdownTimeout + 5*time.Second

// standaloneCmd serves xDS from a directory of manifests:
//
//	file provider → pipeline → xDS server, with the admin server reading the
//	pipeline (readiness, /debug endpoints) and the shared metrics.
//
// Both listeners are bound first, so that the printed addresses are the real
// ones (":0" picks a free port). The xDS gRPC server starts serving only once
// the first translation has been handed to it (Pipeline.ReadyC): until then
// a proxy's connection waits in the listen backlog instead of being served
// an empty configuration. The admin server serves at once; its readiness
// endpoint reports the pipeline's Ready.
//
// It runs until ctx is cancelled (SIGINT/SIGTERM), then stops every
// component and returns 0, or 1 when a component failed.
func standaloneCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("standalone", "standalone --resources DIR [--xds-address :18000] [--admin-address :19000] [--controller-name NAME] [--log-level info]", stderr)
	resources := fs.String("resources", "", "`directory` of manifests, watched for changes (required)")
	xdsAddr := fs.String("xds-address", ":18000", "`address` of the xDS gRPC server")
	adminAddr := fs.String("admin-address", ":19000", "`address` of the admin HTTP server (health, metrics, debug)")
	controller := fs.String("controller-name", gatewayapi.DefaultControllerName, "GatewayClass controllerName to serve")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	debounce := fs.Duration("debounce", file.DefaultDebounce, "quiet period after a file change before reloading (editors write in bursts)")
	routeSplit := fs.String("route-split", string(translate.RouteSplitNone), routeSplitUsage)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
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
	split, err := translate.ParseRouteSplit(*routeSplit)
	if err != nil {
		fmt.Fprintf(stderr, "portico standalone: --route-split: %v\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	m := metrics.New()
	xdsServer := server.New(log, m)
	pipe := pipeline.New(pipeline.Config{
		ControllerName: *controller,
		XDS:            xdsServer,
		XDSOptions:     translate.Options{RouteSplit: split},
		Metrics:        m,
		Log:            log,
	})
	adminServer := admin.New(log, m, pipe)
	provider := file.New(*resources, pipe.Submit, log, *debounce)

	xdsLis, err := net.Listen("tcp", *xdsAddr)
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
	fmt.Fprintf(stdout, "xDS listening on %s, admin on %s\n", xdsLis.Addr(), adminLis.Addr())
	log.Info("starting standalone", "resources", *resources, "xds", xdsLis.Addr().String(),
		"admin", adminLis.Addr().String(), "controllerName", *controller)

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
