package dataplane

// Host services: a TCP listener on the bridge's gateway address that
// forwards each connection to one of its targets on loopback, round robin
// — how Pods reach what runs in the test process (the controller
// replicas' xDS servers), as they would reach a Service.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

type forwarder struct {
	l       net.Listener
	targets []string
	next    atomic.Uint64
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closed  bool
}

// forward listens on addr and forwards to targets, which must be on
// loopback: nothing is ever forwarded elsewhere.
func forward(addr netip.AddrPort, targets []string) (*forwarder, error) {
	for _, t := range targets {
		ap, err := netip.ParseAddrPort(t)
		if err != nil || !ap.Addr().IsLoopback() {
			return nil, fmt.Errorf("dataplane: forward target %q is not a loopback host:port", t)
		}
	}
	if len(targets) == 0 {
		return nil, fmt.Errorf("dataplane: forward %s: no targets", addr)
	}
	l, err := net.Listen("tcp", addr.String())
	if err != nil {
		return nil, err
	}
	f := &forwarder{l: l, targets: targets, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func (f *forwarder) serve() {
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

func (f *forwarder) track(c net.Conn, add bool) bool {
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

func (f *forwarder) pipe(in net.Conn) {
	defer f.wg.Done()
	defer in.Close()
	target := f.targets[int(f.next.Add(1)-1)%len(f.targets)]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	out, err := (&net.Dialer{}).DialContext(ctx, "tcp", target)
	cancel()
	if err != nil {
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
func (f *forwarder) Close() error {
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
