package admin

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
)

// DefaultMaxInFlight is the default bound of concurrently served debug
// requests.
const DefaultMaxInFlight = 2

// streamBuffer is the size of the buffer between a streamed document and
// the connection.
const streamBuffer = 32 << 10

// DebugSource provides the debug views. Its methods are called
// concurrently from HTTP handlers; what they return is written once, by
// the handler that asked, and must not share mutable state with the
// caller (a view of an immutable snapshot).
type DebugSource interface {
	// DebugXDS returns the JSON document of the xDS resources served to
	// gateway ("<namespace>/<name>"), written piece by piece by WriteTo,
	// or false if the gateway is unknown.
	DebugXDS(gateway string) (io.WriterTo, bool)
	// DebugStatus returns the JSON document of the computed statuses.
	DebugStatus() io.WriterTo
}

// Middleware wraps the handler of every debug request: authentication and
// authorization (KubernetesAuth). It answers the requests it refuses
// itself.
type Middleware func(http.Handler) http.Handler

// DebugOptions configure a Debug server.
type DebugOptions struct {
	// Log receives the server's logs; nil discards them.
	Log *slog.Logger
	// Source provides /debug/xds and /debug/status; nil serves 404 and an
	// empty list.
	Source DebugSource
	// Auth authenticates and authorizes every request before anything else.
	// Serve requires it on a listener that is not on loopback, unless
	// Insecure.
	Auth Middleware
	// Insecure lets Serve use a non-loopback listener without Auth: anyone
	// who reaches it reads the debug views. Serve logs a warning then.
	Insecure bool
	// TLS, when set, makes Serve serve HTTPS (HTTP/1.1) with it. A server
	// that checks bearer tokens off loopback must have it (SelfSignedTLS).
	TLS *tls.Config
	// MaxInFlight bounds the requests served at once (after Auth); others
	// get 429 with Retry-After. 0 means DefaultMaxInFlight.
	MaxInFlight int
	// Profiling serves net/http/pprof under /debug/pprof/.
	Profiling bool
}

// Debug is the debug HTTP server.
type Debug struct {
	log   *slog.Logger
	opts  DebugOptions
	mux   *http.ServeMux
	slots chan struct{}
}

// NewDebug returns a Debug server. Register extra endpoints with Handle
// before serving.
func NewDebug(opts DebugOptions) *Debug {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	d := &Debug{
		log:   opts.Log.With("component", "debug"),
		opts:  opts,
		mux:   http.NewServeMux(),
		slots: make(chan struct{}, opts.MaxInFlight),
	}
	d.mux.HandleFunc("GET /debug/xds", d.debugXDS)
	d.mux.HandleFunc("GET /debug/status", d.debugStatus)
	if opts.Profiling {
		d.mux.HandleFunc("GET /debug/pprof/", pprof.Index) // also /debug/pprof/heap etc.
		d.mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		d.mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		d.mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		d.mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
		d.mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
		d.log.Info("profiling endpoints enabled", "path", "/debug/pprof/")
	}
	return d
}

// Handle registers an extra endpoint under /debug/, with http.ServeMux
// pattern syntax (e.g. "GET /debug/leader"); it is served behind the same
// authentication, authorization and in-flight bound. It panics if the path
// is not under /debug/ or conflicts with an existing pattern, like
// http.ServeMux.Handle.
func (d *Debug) Handle(pattern string, h http.Handler) {
	path := pattern
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		path = strings.TrimLeft(pattern[i:], " ")
	}
	if !strings.HasPrefix(path, "/debug/") {
		panic(fmt.Sprintf("admin: debug endpoint %q is not under /debug/", pattern))
	}
	d.mux.Handle(pattern, h)
}

// Handler returns the handler of every debug endpoint: Auth, then the
// in-flight bound, then the endpoints.
func (d *Debug) Handler() http.Handler {
	var h http.Handler = d.mux
	h = d.limit(h)
	if d.opts.Auth != nil {
		h = d.opts.Auth(h)
	}
	return h
}

// Serve serves the debug endpoints on lis until ctx is done (see
// Server.Serve), over TLS if DebugOptions.TLS is set. A listener that is
// not on loopback is refused — lis is closed and an error returned —
// unless Auth and TLS, or Insecure, are set.
func (d *Debug) Serve(ctx context.Context, lis net.Listener) error {
	if !IsLoopback(lis.Addr()) {
		switch {
		case d.opts.Auth != nil && d.opts.TLS == nil:
			_ = lis.Close()
			return fmt.Errorf("debug server: %s is not a loopback address: authentication without TLS would send bearer tokens in clear text", lis.Addr())
		case d.opts.Auth != nil:
			d.log.Info("debug endpoints require authentication and authorization (HTTPS)", "address", lis.Addr().String())
		case d.opts.Insecure:
			d.log.Warn("debug endpoints are served without authentication on a non-loopback address: "+
				"anyone who reaches it reads every Gateway's configuration", "address", lis.Addr().String())
		default:
			_ = lis.Close()
			return fmt.Errorf("debug server: %s is not a loopback address and no authentication is configured", lis.Addr())
		}
	}
	if d.opts.TLS != nil {
		lis = tls.NewListener(lis, d.opts.TLS)
	}
	return serve(ctx, d.log, "debug server", lis, d.Handler(), DebugWriteTimeout)
}

// IsLoopback reports whether addr is a TCP address on a loopback interface
// (127.0.0.0/8, ::1). The unspecified address (":19001") is not.
func IsLoopback(addr net.Addr) bool {
	a, ok := addr.(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}

// limit serves at most MaxInFlight requests at once and refuses the others
// at once with 429: nothing waits for a slot.
func (d *Debug) limit(next http.Handler) http.Handler {
	msg := fmt.Sprintf("too many debug requests in flight (at most %d); retry later", cap(d.slots))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case d.slots <- struct{}{}:
		default:
			d.log.Debug("debug request refused: too many in flight", "path", r.URL.Path, "remote", r.RemoteAddr)
			w.Header().Set("Retry-After", "1")
			text(w, http.StatusTooManyRequests, msg)
			return
		}
		defer func() { <-d.slots }()
		next.ServeHTTP(w, r)
	})
}

func (d *Debug) debugXDS(w http.ResponseWriter, r *http.Request) {
	gw := r.URL.Query().Get("gateway")
	if gw == "" {
		text(w, http.StatusBadRequest, "missing query parameter gateway=<namespace>/<name>")
		return
	}
	var v io.WriterTo
	ok := false
	if d.opts.Source != nil {
		v, ok = d.opts.Source.DebugXDS(gw)
	}
	if !ok {
		text(w, http.StatusNotFound, fmt.Sprintf("gateway %q not found", gw))
		return
	}
	d.stream(w, r, v)
}

func (d *Debug) debugStatus(w http.ResponseWriter, r *http.Request) {
	if d.opts.Source == nil {
		d.stream(w, r, emptyList{})
		return
	}
	d.stream(w, r, d.opts.Source.DebugStatus())
}

type emptyList struct{}

func (emptyList) WriteTo(w io.Writer) (int64, error) {
	n, err := io.WriteString(w, "[]\n")
	return int64(n), err
}

// stream writes v's document as the response. An error before the first
// byte left is a 500; after, the response is aborted, so the client sees
// a broken transfer rather than a document that looks whole.
func (d *Debug) stream(w http.ResponseWriter, r *http.Request, v io.WriterTo) {
	sw := &startWriter{w: w}
	bw := bufio.NewWriterSize(sw, streamBuffer)
	_, err := v.WriteTo(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		return
	}
	if !sw.started {
		d.log.Error("rendering debug response", "path", r.URL.Path, "error", err)
		text(w, http.StatusInternalServerError, "cannot render response: "+err.Error())
		return
	}
	if r.Context().Err() == nil && !errors.Is(err, sw.err) {
		d.log.Error("debug response failed after it started; aborting it", "path", r.URL.Path, "error", err)
	}
	panic(http.ErrAbortHandler)
}

// startWriter sends the response header before the first bytes.
type startWriter struct {
	w       http.ResponseWriter
	started bool
	err     error // the first error writing to w (the client went away…)
}

func (s *startWriter) Write(p []byte) (int, error) {
	if !s.started {
		s.started = true
		h := s.w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		s.w.WriteHeader(http.StatusOK)
	}
	n, err := s.w.Write(p)
	if err != nil && s.err == nil {
		s.err = err
	}
	return n, err
}
