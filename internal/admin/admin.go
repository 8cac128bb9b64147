// Package admin serves Portico's administrative HTTP endpoints on two
// listeners, because they are meant for different clients:
//
// The admin server (Server, `--admin-address`, default ":19000") is for
// the kubelet and Prometheus, and serves nothing sensitive:
//
//	GET /healthz                      200 "ok" while the process runs
//	GET /readyz                       200 once the first translation is served, else 503
//	GET /metrics                      Prometheus metrics of metrics.Metrics.Registry
//
// The debug server (Debug, `--debug-address`, default "127.0.0.1:19001")
// is for operators, and shows what Portico computed — every Gateway's
// routes, backends and Pod IPs:
//
//	GET /debug/xds?gateway=ns/name    xDS resources served to a gateway (JSON)
//	GET /debug/status                 computed Gateway API statuses (JSON)
//	GET /debug/pprof/...              net/http/pprof profiles, with DebugOptions.Profiling
//	    (and what the caller adds with Debug.Handle, e.g. /debug/leader)
//
// Choices where the brief left room:
//
//   - Loopback by default. A Debug server refuses to serve on a listener
//     that is not a loopback TCP address unless it authenticates over TLS
//     (DebugOptions.Auth and TLS: the controller's TokenReview +
//     SubjectAccessReview check, KubernetesAuth, with a certificate made at
//     start, SelfSignedTLS — bearer tokens never cross the network in clear
//     text), or DebugOptions.Insecure is set (standalone's explicit
//     --debug-insecure): the rule is enforced here, not only by the flags.
//   - Authentication and authorization come before anything else, so an
//     unauthorized request costs no rendering and takes no in-flight slot.
//     Kubernetes authorization is of the non-resource URL (the request
//     path, e.g. /debug/xds) with the request's verb in lower case (get):
//     a ClusterRole with nonResourceURLs ["/debug/*"] and verbs ["get"]
//     grants all of it.
//   - At most DebugOptions.MaxInFlight (DefaultMaxInFlight, 2) requests
//     are served at once; others get 429 Too Many Requests with
//     Retry-After: 1 at once (they do not queue, so a burst of requests
//     holds neither memory nor goroutines waiting for a slot).
//   - Responses are streamed: the Source writes the document to the
//     response piece by piece (render.WriteGatewayXDS: one route at a
//     time), through a 32 KiB buffer, so a request holds one piece of a
//     Gateway's configuration, not all of it. A failure after the first
//     bytes were sent aborts the response (the client sees a truncated
//     transfer, never a well-formed partial document); before, it is a 500.
//   - The views of the translations are rendered here (PipelineViews,
//     views.go) from the pipeline's latest Result, which the pipeline
//     hands out as data: the translation loop imports no renderer.
//     Secret material and header values are redacted (DebugRedaction,
//     render.StreamOptions); names are kept.
//
// Profiling is off by default: profiles expose the command line and cost
// CPU while they are taken. With it, `go tool pprof
// http://127.0.0.1:19001/debug/pprof/profile?seconds=N` takes a CPU profile
// (30 s by default; the handler extends its write deadline for it), and
// /debug/pprof/ lists heap, allocs, goroutine, block, mutex and threadcreate
// profiles and the execution trace. Block and mutex profiles stay empty
// unless the process sets their sampling rates.
package admin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/portico-dev/portico/internal/metrics"
)

// Timeouts of the HTTP servers started by Serve.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	WriteTimeout      = 30 * time.Second
	// DebugWriteTimeout bounds a debug response: the document of a Gateway
	// with hundreds of thousands of routes takes seconds to stream, and a
	// client that reads slowly holds one of the few in-flight slots for at
	// most this long.
	DebugWriteTimeout = 2 * time.Minute
	IdleTimeout       = 60 * time.Second
	// ShutdownTimeout bounds the graceful shutdown of Serve.
	ShutdownTimeout = 5 * time.Second
)

// Readiness is what the readiness probe reports. Ready is called
// concurrently from HTTP handlers.
type Readiness interface {
	// Ready reports whether the first complete translation is served.
	Ready() bool
}

// Server is the admin HTTP server: probes and metrics.
type Server struct {
	log   *slog.Logger
	ready Readiness
	mux   *http.ServeMux
}

// New returns a Server exposing m's registry and ready. A nil log discards
// logs; a nil m serves no /metrics endpoint; a nil ready is never ready.
func New(log *slog.Logger, m *metrics.Metrics, ready Readiness) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{log: log.With("component", "admin"), ready: ready, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	if m != nil {
		s.mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{
			ErrorLog:      slog.NewLogLogger(s.log.Handler(), slog.LevelError),
			ErrorHandling: promhttp.ContinueOnError,
			Registry:      m.Registry, // exports promhttp's own error counter
		}))
	}
	return s
}

// Handler returns the handler of the admin endpoints.
func (s *Server) Handler() http.Handler { return s.mux }

// Serve serves the admin endpoints on lis until ctx is done, then shuts down
// gracefully within ShutdownTimeout. It returns nil after a shutdown caused
// by ctx, or the error that made the server fail. lis is closed on return.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	return serve(ctx, s.log, "admin server", lis, s.mux, WriteTimeout)
}

func serve(ctx context.Context, log *slog.Logger, name string, lis net.Listener, h http.Handler, writeTimeout time.Duration) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	log.Info(name+" listening", "address", lis.Addr().String())

	select {
	case err := <-served:
		return fmt.Errorf("%s: %w", name, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn(name+" graceful shutdown failed, closing connections", "error", err)
		srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: %w", name, err)
	}
	log.Info(name + " stopped")
	return nil
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	text(w, http.StatusOK, "ok")
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if s.ready == nil || !s.ready.Ready() {
		text(w, http.StatusServiceUnavailable, "not ready: no complete translation served yet")
		return
	}
	text(w, http.StatusOK, "ok")
}

func text(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg)
}
