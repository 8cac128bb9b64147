// Package faultproxy is an HTTPS reverse proxy to put in front of
// kube-apiserver, one per controller replica, that injects faults into
// selected requests: delay, hang, reset, fail or drop them by method and
// path, or cut the replica off the API server altogether (a partition).
//
// kube-apiserver speaks HTTPS, so the proxy terminates TLS with its own
// certificate (see SelfSigned) and forwards over the Transport it is given
// (typically client-go's, with the cluster's CA and an admin client
// certificate). Responses are streamed (watches work). HTTP/2 and HTTP/1.1
// are both served; a reset closes the TCP connection on HTTP/1.1 and resets
// the stream on HTTP/2.
//
// Every request is recorded (method, path, parsed resource, class, when it
// was received, forwarded and finished, the status code and the fault
// applied), so tests can count a replica's writes by class — status writes,
// Lease renewals — and see what was in flight when.
package faultproxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sync"
	"sync/atomic"
	"time"
)

// Action is what a Rule does to the requests it matches.
type Action string

const (
	// Delay sleeps for Rule.Delay, then forwards.
	Delay Action = "delay"
	// Hang holds the request until the fault is removed (then forwards it)
	// or the client gives up.
	Hang Action = "hang"
	// Reset closes the connection (HTTP/1.1; an RST) or resets the stream
	// (HTTP/2) without forwarding: the request never reaches the server.
	Reset Action = "reset"
	// Fail answers Rule.Status (default 503) without forwarding.
	Fail Action = "fail"
	// Drop forwards the request, so it takes effect, then resets instead of
	// answering: the client never learns the outcome.
	Drop Action = "drop"
)

// PartitionMode is how a partition cuts the replica off.
type PartitionMode int

const (
	// Blackhole: nothing gets through and nothing comes back. New requests
	// hang (they are forwarded if the partition heals while the client
	// still waits); open responses, watches included, stop delivering bytes.
	// Connections stay open, as in a real network partition.
	Blackhole PartitionMode = iota + 1
	// Refuse: every open connection is closed and new ones are closed right
	// after they are accepted, as when the server is down.
	Refuse
)

// Rule selects requests and says what to do with them.
type Rule struct {
	// Method and Path are regular expressions matched against the request
	// method and URL path (unanchored: use ^ and $). Empty matches all.
	Method string
	Path   string
	Action Action
	Delay  time.Duration // for Delay
	Status int           // for Fail; default 503
}

// Fault is an active Rule.
type Fault struct {
	p       *Proxy
	rule    Rule
	method  *regexp.Regexp
	path    *regexp.Regexp
	release chan struct{}
	once    sync.Once
	hits    atomic.Int64
}

// Hits is the number of requests the fault applied to.
func (f *Fault) Hits() int64 { return f.hits.Load() }

// Remove deactivates the fault; requests it holds (Hang) are forwarded if
// their clients still wait.
func (f *Fault) Remove() {
	f.once.Do(func() {
		f.p.mu.Lock()
		for i, g := range f.p.faults {
			if g == f {
				f.p.faults = append(f.p.faults[:i:i], f.p.faults[i+1:]...)
				break
			}
		}
		f.p.mu.Unlock()
		close(f.release)
	})
}

func (f *Fault) matches(r *http.Request) bool {
	return (f.method == nil || f.method.MatchString(r.Method)) && (f.path == nil || f.path.MatchString(r.URL.Path))
}

// Config configures a Proxy.
type Config struct {
	// Upstream is the API server's URL (https://host:port).
	Upstream *url.URL
	// Transport carries requests to Upstream, with its TLS configuration.
	Transport http.RoundTripper
	// Certificate is the proxy's serving certificate (valid for 127.0.0.1).
	Certificate tls.Certificate
}

// Proxy is a running fault proxy on 127.0.0.1.
type Proxy struct {
	cfg    Config
	rp     *httputil.ReverseProxy
	ln     *trackingListener
	srv    *http.Server
	served chan struct{}

	mu        sync.Mutex
	faults    []*Fault
	partition PartitionMode
	healed    chan struct{} // closed when the current partition heals
	records   []*Record
}

// Start listens on a free port of 127.0.0.1 and serves until Close.
func Start(cfg Config) (*Proxy, error) {
	if cfg.Upstream == nil || cfg.Transport == nil || len(cfg.Certificate.Certificate) == 0 {
		return nil, errors.New("faultproxy: Upstream, Transport and Certificate are required")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, served: make(chan struct{}), healed: make(chan struct{})}
	close(p.healed)
	p.ln = &trackingListener{Listener: l, conns: map[net.Conn]struct{}{}, refuse: func() bool { return p.Partitioned() == Refuse }}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(cfg.Upstream)
			pr.Out.Host = cfg.Upstream.Host
		},
		Transport:     cfg.Transport,
		FlushInterval: -1,
		ErrorLog:      discardLogger(),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if rec, ok := r.Context().Value(recordKey{}).(*Record); ok {
				p.mu.Lock()
				rec.Err = err.Error()
				p.mu.Unlock()
			}
			if r.Context().Err() != nil {
				return
			}
			// The server is unreachable: the client sees a broken
			// connection, as it would without the proxy.
			abort(w)
		},
	}
	p.srv = &http.Server{
		Handler:   p,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cfg.Certificate}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}},
		ErrorLog:  discardLogger(),
	}
	go func() {
		defer close(p.served)
		_ = p.srv.ServeTLS(p.ln, "", "")
	}()
	return p, nil
}

// Addr is host:port of the proxy.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL is https://host:port of the proxy.
func (p *Proxy) URL() string { return "https://" + p.Addr() }

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.Heal()
	p.mu.Lock()
	faults := append([]*Fault(nil), p.faults...)
	p.mu.Unlock()
	for _, f := range faults {
		f.Remove()
	}
	err := p.srv.Close()
	<-p.served
	return err
}

// Add activates a rule. Rules are checked in the order they were added; the
// first that matches applies.
func (p *Proxy) Add(r Rule) (*Fault, error) {
	f := &Fault{p: p, rule: r, release: make(chan struct{})}
	var err error
	if r.Method != "" {
		if f.method, err = regexp.Compile(r.Method); err != nil {
			return nil, fmt.Errorf("faultproxy: method: %w", err)
		}
	}
	if r.Path != "" {
		if f.path, err = regexp.Compile(r.Path); err != nil {
			return nil, fmt.Errorf("faultproxy: path: %w", err)
		}
	}
	switch r.Action {
	case Delay, Hang, Reset, Fail, Drop:
	default:
		return nil, fmt.Errorf("faultproxy: unknown action %q", r.Action)
	}
	p.mu.Lock()
	p.faults = append(p.faults, f)
	p.mu.Unlock()
	return f, nil
}

// Partition cuts the replica off the API server until Heal.
func (p *Proxy) Partition(mode PartitionMode) {
	p.mu.Lock()
	if p.partition == 0 {
		p.healed = make(chan struct{})
	}
	p.partition = mode
	p.mu.Unlock()
	if mode == Refuse {
		p.CloseConnections()
	}
}

// Heal ends a partition.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.partition != 0 {
		p.partition = 0
		close(p.healed)
	}
}

// Partitioned is the current partition mode, 0 if none.
func (p *Proxy) Partitioned() PartitionMode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.partition
}

// CloseConnections closes every client connection (as a crashing server
// would) and returns how many there were.
func (p *Proxy) CloseConnections() int { return p.ln.closeAll() }

// waitOpen blocks while a Blackhole partition lasts; it fails when ctx ends
// first.
func (p *Proxy) waitOpen(ctx context.Context) error {
	for {
		p.mu.Lock()
		mode, ch := p.partition, p.healed
		p.mu.Unlock()
		if mode != Blackhole {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

type recordKey struct{}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := newRecord(r)
	p.mu.Lock()
	p.records = append(p.records, rec)
	p.mu.Unlock()
	cw := &recordingWriter{w: w, p: p, rec: rec, ctx: r.Context()}
	defer func() {
		p.mu.Lock()
		rec.End = time.Now()
		p.mu.Unlock()
	}()
	r = r.WithContext(context.WithValue(r.Context(), recordKey{}, rec))
	ctx := r.Context()
	// Read the body first: on HTTP/1.1 the server notices a client that
	// gives up (and cancels ctx) only once the body has been consumed.
	if r.Body != nil && r.Body != http.NoBody {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			p.note(rec, "bad-body")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}

	if p.Partitioned() == Refuse {
		p.note(rec, "partition")
		abort(w)
	}
	if err := p.waitOpen(ctx); err != nil {
		p.note(rec, "partition")
		return
	}
	f := p.match(r)
	if f == nil {
		p.forward(cw, r, rec)
		return
	}
	f.hits.Add(1)
	p.note(rec, string(f.rule.Action))
	switch f.rule.Action {
	case Delay:
		select {
		case <-time.After(f.rule.Delay):
		case <-ctx.Done():
			return
		}
	case Hang:
		select {
		case <-f.release:
		case <-ctx.Done():
			return
		}
		if err := p.waitOpen(ctx); err != nil {
			return
		}
	case Reset:
		abort(w)
	case Fail:
		code := f.rule.Status
		if code == 0 {
			code = http.StatusServiceUnavailable
		}
		cw.Header().Set("Content-Type", "application/json")
		cw.WriteHeader(code)
		_, _ = fmt.Fprintf(cw, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"faultproxy: injected failure","reason":"ServiceUnavailable","code":%d}`, code)
		return
	case Drop:
		p.forward(&discardWriter{header: http.Header{}}, r, rec)
		abort(w)
	}
	p.forward(cw, r, rec)
}

func (p *Proxy) match(r *http.Request) *Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range p.faults {
		if f.matches(r) {
			return f
		}
	}
	return nil
}

func (p *Proxy) note(rec *Record, fault string) {
	p.mu.Lock()
	rec.Fault = fault
	p.mu.Unlock()
}

func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, rec *Record) {
	if r.Context().Err() != nil {
		return // the client gave up
	}
	p.mu.Lock()
	rec.Forwarded = time.Now()
	p.mu.Unlock()
	p.rp.ServeHTTP(w, r)
}

// abort breaks the request off: on HTTP/1.1 the connection is reset, on
// HTTP/2 the stream. It does not return.
func abort(w http.ResponseWriter) {
	if hj, ok := unwrap(w).(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			if tc, ok := conn.(*tls.Conn); ok {
				if tcp, ok := tc.NetConn().(*trackedConn); ok {
					if c, ok := tcp.Conn.(*net.TCPConn); ok {
						_ = c.SetLinger(0)
					}
				}
			}
			_ = conn.Close()
		}
	}
	panic(http.ErrAbortHandler)
}

func unwrap(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}

// recordingWriter records the status code and holds back bytes during a
// Blackhole partition.
type recordingWriter struct {
	w   http.ResponseWriter
	p   *Proxy
	rec *Record
	ctx context.Context
}

func (c *recordingWriter) Header() http.Header { return c.w.Header() }

func (c *recordingWriter) WriteHeader(code int) {
	if c.p.waitOpen(c.ctx) != nil {
		return
	}
	c.p.mu.Lock()
	if c.rec.Code == 0 {
		c.rec.Code = code
	}
	c.p.mu.Unlock()
	c.w.WriteHeader(code)
}

func (c *recordingWriter) Write(b []byte) (int, error) {
	if err := c.p.waitOpen(c.ctx); err != nil {
		return 0, err
	}
	c.p.mu.Lock()
	if c.rec.Code == 0 {
		c.rec.Code = http.StatusOK
	}
	c.p.mu.Unlock()
	return c.w.Write(b)
}

func (c *recordingWriter) FlushError() error {
	if err := c.p.waitOpen(c.ctx); err != nil {
		return err
	}
	return http.NewResponseController(c.w).Flush()
}

func (c *recordingWriter) Unwrap() http.ResponseWriter { return c.w }

// discardWriter swallows a response (Drop).
type discardWriter struct {
	header http.Header
}

func (d *discardWriter) Header() http.Header         { return d.header }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) FlushError() error           { return nil }

// trackingListener remembers open connections so they can be closed, and
// closes new ones at once while refuse says so.
type trackingListener struct {
	net.Listener
	refuse func() bool
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

type trackedConn struct {
	net.Conn
	l    *trackingListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

func (l *trackingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.refuse() {
			if tcp, ok := c.(*net.TCPConn); ok {
				_ = tcp.SetLinger(0)
			}
			_ = c.Close()
			continue
		}
		tc := &trackedConn{Conn: c, l: l}
		l.mu.Lock()
		l.conns[tc] = struct{}{}
		l.mu.Unlock()
		return tc, nil
	}
}

func (l *trackingListener) closeAll() int {
	l.mu.Lock()
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		if tc, ok := c.(*trackedConn); ok {
			if tcp, ok := tc.Conn.(*net.TCPConn); ok {
				_ = tcp.SetLinger(0)
			}
		}
		_ = c.Close()
	}
	return len(conns)
}
