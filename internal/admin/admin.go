// Package admin serves Portico's administrative HTTP endpoints: health and
// readiness probes, Prometheus metrics, and JSON debug views of the computed
// xDS resources and statuses.
//
//	GET /healthz                      200 "ok" while the process runs
//	GET /readyz                       200 once the first translation is served, else 503
//	GET /metrics                      Prometheus metrics of metrics.Metrics.Registry
//	GET /debug/xds?gateway=ns/name    xDS resources served to a gateway (JSON)
//	GET /debug/status                 computed Gateway API statuses (JSON)
//	GET /debug/pprof/...              net/http/pprof profiles, only after EnableProfiling
//
// Profiling is off by default: the admin server usually listens on every
// interface, and the profiles expose the command line and cost CPU while
// they are taken. With EnableProfiling, `go tool pprof
// http://HOST:PORT/debug/pprof/profile?seconds=N` takes a CPU profile
// (30 s by default; the server extends its write deadline for it), and
// /debug/pprof/ lists heap, allocs, goroutine, block, mutex and threadcreate
// profiles and the execution trace. Block and mutex profiles stay empty
// unless the process sets their sampling rates (runtime.SetBlockProfileRate,
// runtime.SetMutexProfileFraction).
package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/portico-dev/portico/internal/metrics"
)

// Timeouts of the HTTP server started by Serve.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 60 * time.Second
	// ShutdownTimeout bounds the graceful shutdown of Serve.
	ShutdownTimeout = 5 * time.Second
)

// Source provides the state the admin endpoints expose. Its methods are
// called concurrently from HTTP handlers.
type Source interface {
	// Ready reports whether the first complete translation is served.
	Ready() bool
	// DebugXDS returns a JSON-encodable view of the xDS resources of
	// gateway ("<namespace>/<name>"), or false if it is unknown.
	DebugXDS(gateway string) (any, bool)
	// DebugStatus returns a JSON-encodable view of the computed statuses.
	DebugStatus() any
}

// Server is the admin HTTP server.
type Server struct {
	log *slog.Logger
	src Source
	mux *http.ServeMux
}

// New returns a Server exposing m's registry and src. A nil log discards
// logs; a nil m serves no /metrics endpoint.
func New(log *slog.Logger, m *metrics.Metrics, src Source) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{log: log.With("component", "admin"), src: src, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	if m != nil {
		s.mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{
			ErrorLog:      slog.NewLogLogger(s.log.Handler(), slog.LevelError),
			ErrorHandling: promhttp.ContinueOnError,
			Registry:      m.Registry, // exports promhttp's own error counter
		}))
	}
	s.mux.HandleFunc("GET /debug/xds", s.debugXDS)
	s.mux.HandleFunc("GET /debug/status", s.debugStatus)
	return s
}

// Handle registers an extra endpoint, with http.ServeMux pattern syntax
// (e.g. "GET /debug/leader"). It panics if pattern conflicts with an
// existing one, like http.ServeMux.Handle. Register before serving.
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// EnableProfiling serves the net/http/pprof handlers under /debug/pprof/
// (index and named profiles, cmdline, profile, symbol, trace). Call it
// before serving, at most once. Without it those paths answer 404.
func (s *Server) EnableProfiling() {
	s.mux.HandleFunc("GET /debug/pprof/", pprof.Index) // also /debug/pprof/heap etc.
	s.mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	s.mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	s.mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	s.mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	s.mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	s.log.Info("profiling endpoints enabled", "path", "/debug/pprof/")
}

// Handler returns the handler of all admin endpoints.
func (s *Server) Handler() http.Handler { return s.mux }

// Serve serves the admin endpoints on lis until ctx is done, then shuts down
// gracefully within ShutdownTimeout. It returns nil after a shutdown caused
// by ctx, or the error that made the server fail. lis is closed on return.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	srv := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	s.log.Info("admin server listening", "address", lis.Addr().String())

	select {
	case err := <-served:
		return fmt.Errorf("admin server: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		s.log.Warn("admin server graceful shutdown failed, closing connections", "error", err)
		srv.Close()
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("admin server: %w", err)
	}
	s.log.Info("admin server stopped")
	return nil
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	text(w, http.StatusOK, "ok")
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if s.src == nil || !s.src.Ready() {
		text(w, http.StatusServiceUnavailable, "not ready: no complete translation served yet")
		return
	}
	text(w, http.StatusOK, "ok")
}

func (s *Server) debugXDS(w http.ResponseWriter, r *http.Request) {
	gw := r.URL.Query().Get("gateway")
	if gw == "" {
		text(w, http.StatusBadRequest, "missing query parameter gateway=<namespace>/<name>")
		return
	}
	if s.src == nil {
		text(w, http.StatusNotFound, fmt.Sprintf("gateway %q not found", gw))
		return
	}
	v, ok := s.src.DebugXDS(gw)
	if !ok {
		text(w, http.StatusNotFound, fmt.Sprintf("gateway %q not found", gw))
		return
	}
	s.writeJSON(w, v)
}

func (s *Server) debugStatus(w http.ResponseWriter, _ *http.Request) {
	var v any
	if s.src != nil {
		v = s.src.DebugStatus()
	}
	s.writeJSON(w, v)
}

// writeJSON writes v as indented JSON, or a 500 if it cannot be encoded.
func (s *Server) writeJSON(w http.ResponseWriter, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		s.log.Error("admin: encoding JSON response", "error", err)
		text(w, http.StatusInternalServerError, "cannot encode response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

func text(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = io.WriteString(w, msg)
}
