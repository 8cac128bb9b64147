package testenv

// Host services for processes in network namespaces: a TCP listener on a
// bridge's host address that forwards each connection to a target on
// loopback — how Pods reach what runs in the test process (controller
// replicas' xDS servers), as they would reach a Service.

import (
	"context"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Forwarder forwards the connections of one listener.
type Forwarder struct {
	l       net.Listener
	targets func() []string
	allow   func(netip.Addr) bool
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closed  bool
}

// Forward listens on addr and forwards each connection to the first of
// targets() (asked anew per connection) that accepts it. Targets must be
// loopback host:port: nothing is ever forwarded elsewhere.
func Forward(addr netip.AddrPort, targets func() []string) (*Forwarder, error) {
	return ForwardWithin(addr, targets, netip.Prefix{})
}

// ForwardWithin is Forward to targets on loopback or within prefix (a
// test's own bridge: the local data plane's load balancers forward to Pod
// IPs); nothing is forwarded anywhere else.
func ForwardWithin(addr netip.AddrPort, targets func() []string, prefix netip.Prefix) (*Forwarder, error) {
	l, err := net.Listen("tcp", addr.String())
	if err != nil {
		return nil, err
	}
	allow := func(a netip.Addr) bool { return a.IsLoopback() || (prefix.IsValid() && prefix.Contains(a)) }
	f := &Forwarder{l: l, targets: targets, allow: allow, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

// Addr is the listener's address.
func (f *Forwarder) Addr() net.Addr { return f.l.Addr() }

func (f *Forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.l.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go f.pipe(c)
	}
}

func (f *Forwarder) track(c net.Conn, add bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if add {
		if f.closed {
			return false
		}
		f.conns[c] = struct{}{}
	} else {
		delete(f.conns, c)
	}
	return true
}

func (f *Forwarder) pipe(in net.Conn) {
	defer f.wg.Done()
	defer in.Close()
	var out net.Conn
	for _, t := range f.targets() {
		ap, err := netip.ParseAddrPort(t)
		if err != nil || !f.allow(ap.Addr()) {
			continue // not loopback or the allowed prefix: never forwarded
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		out, err = (&net.Dialer{}).DialContext(ctx, "tcp", t)
		cancel()
		if err == nil {
			break
		}
	}
	if out == nil {
		return
	}
	defer out.Close()
	if !f.track(in, true) {
		return
	}
	defer f.track(in, false)
	if !f.track(out, true) {
		return
	}
	defer f.track(out, false)
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(out, in)
	go cp(in, out)
	<-done
	<-done
}

// Close stops listening, closes every forwarded connection and waits.
func (f *Forwarder) Close() error {
	err := f.l.Close()
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	return err
}
