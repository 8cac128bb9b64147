package dataplane

// UDP load balancing: each UDP port of a LoadBalancer Service is a UDP
// socket bound to the load-balancer address and the Service port (where
// the TCP forwarder of the same number, if any, listens over TCP), which
// forwards datagrams per client session, as kube-proxy's conntrack does:
//
//   - A session is one client address:port. Its first datagram picks the
//     next Ready, not terminating Pod of the Service (round robin, as the
//     TCP forwarder picks for connections), at the port the Service's
//     targetPort names for UDP, and the session keeps that Pod. The
//     forwarder reaches the Pod as the TCP forwarder does: from the
//     host, over the bridge, to the Pod's IP (nothing outside the pod
//     range or loopback is ever a target).
//   - Each session has a socket of its own connected to its Pod, so the
//     Pod's answers are told apart by the socket they arrive on; they are
//     sent to the client from the listening socket, hence from the very
//     address and port the client sent to (clients with connected UDP
//     sockets, like the conformance suite's, drop anything else).
//   - Sessions are bounded in time and number: one idle (no datagram
//     either way) for udpIdleTimeout ends, and when udpMaxSessions are
//     open a new client's session replaces the one idle the longest, so
//     a burst of short-lived clients (the conformance suite opens a new
//     socket per probe, 500 in its weighted test) never locks new ones
//     out.
//   - A session whose Pod stops being a target (not Ready, terminating,
//     deleted; its IP reused by another Pod counts as gone, targets are
//     Pods by UID) is closed at the next sync: the client's next datagram
//     opens a new session with a Ready Pod. This differs from TCP, whose
//     connections are kept, because a UDP session has no end the client
//     could wait for.
//   - A datagram that arrives when the Service has no Ready Pod is
//     dropped, as a load balancer without healthy backends does.

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Bounds of a UDP port's sessions: nf_conntrack's default UDP timeout,
// and a number well above what a test opens within it.
const (
	udpIdleTimeout = 30 * time.Second
	udpMaxSessions = 2048
)

// maxDatagram is the largest UDP payload over IPv4.
const maxDatagram = 65507

// udpTarget is one backend of a UDP port: a Pod, by UID, at its target
// port.
type udpTarget struct {
	pod  types.UID
	addr netip.AddrPort
}

func (t udpTarget) String() string { return t.addr.String() }

// udpForwarder serves one UDP port of a load balancer.
type udpForwarder struct {
	conn  *net.UDPConn
	allow func(netip.Addr) bool
	idle  time.Duration
	max   int
	next  atomic.Uint64
	wg    sync.WaitGroup

	mu       sync.Mutex // guards what follows
	targets  []udpTarget
	sessions map[netip.AddrPort]*udpSession
	closed   bool
}

// udpSession is one client's: its socket connected to its Pod.
type udpSession struct {
	client netip.AddrPort
	target udpTarget
	up     *net.UDPConn
	// last is when a datagram last went either way (f.mu).
	last time.Time
}

// listenUDP serves addr, forwarding to targets (loopback or within
// prefix only), with sessions bounded by idle and maxSessions.
func listenUDP(addr netip.AddrPort, targets []udpTarget, prefix netip.Prefix, idle time.Duration, maxSessions int) (*udpForwarder, error) {
	network := "udp6"
	if addr.Addr().Is4() {
		network = "udp4"
	}
	conn, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return nil, err
	}
	// Room for a burst of clients while the loop is busy.
	_ = conn.SetReadBuffer(1 << 20)
	f := &udpForwarder{
		conn:     conn,
		allow:    func(a netip.Addr) bool { return a.IsLoopback() || (prefix.IsValid() && prefix.Contains(a)) },
		idle:     idle,
		max:      maxSessions,
		targets:  targets,
		sessions: map[netip.AddrPort]*udpSession{},
	}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

// Addr is the listening address.
func (f *udpForwarder) Addr() netip.AddrPort { return f.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// serve reads the clients' datagrams and sends each to its session's
// Pod until Close.
func (f *udpForwarder) serve() {
	defer f.wg.Done()
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := f.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		if s := f.session(from); s != nil {
			// An error (the Pod's port refused an earlier datagram, the
			// session closed meanwhile) loses this datagram only, as UDP
			// may.
			_, _ = s.up.Write(buf[:n])
		}
	}
}

// session is client's session, opened if it has none (nil when there is
// no target or the forwarder is closed), and marks it active.
func (f *udpForwarder) session(client netip.AddrPort) *udpSession {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	if s := f.sessions[client]; s != nil {
		s.last = time.Now()
		return s
	}
	var allowed []udpTarget
	for _, t := range f.targets {
		if f.allow(t.addr.Addr()) {
			allowed = append(allowed, t)
		}
	}
	if len(allowed) == 0 {
		return nil
	}
	t := allowed[int(f.next.Add(1)-1)%len(allowed)]
	up, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(t.addr))
	if err != nil {
		return nil
	}
	if len(f.sessions) >= f.max {
		f.evictIdlest()
	}
	s := &udpSession{client: client, target: t, up: up, last: time.Now()}
	f.sessions[client] = s
	f.wg.Add(1)
	go f.relay(s)
	return s
}

// evictIdlest closes the session idle the longest (f.mu held).
func (f *udpForwarder) evictIdlest() {
	var oldest *udpSession
	for _, s := range f.sessions {
		if oldest == nil || s.last.Before(oldest.last) {
			oldest = s
		}
	}
	if oldest != nil {
		f.dropLocked(oldest)
	}
}

// dropLocked ends s (f.mu held): its relay returns once its socket is
// closed.
func (f *udpForwarder) dropLocked(s *udpSession) {
	if f.sessions[s.client] == s {
		delete(f.sessions, s.client)
	}
	_ = s.up.Close()
}

// relay sends s's Pod's answers to its client from the listening socket
// until the session is closed or idle.
func (f *udpForwarder) relay(s *udpSession) {
	defer f.wg.Done()
	buf := make([]byte, maxDatagram)
	for {
		f.mu.Lock()
		deadline := s.last.Add(f.idle)
		if !time.Now().Before(deadline) {
			f.dropLocked(s)
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		_ = s.up.SetReadDeadline(deadline)
		n, err := s.up.Read(buf)
		switch {
		case errors.Is(err, net.ErrClosed):
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			continue // idle unless a datagram came from the client meanwhile
		case err != nil:
			// ECONNREFUSED from an earlier datagram: nothing listens
			// (yet) on the Pod's port; the session stays, as conntrack's.
			continue
		}
		f.mu.Lock()
		s.last = time.Now()
		f.mu.Unlock()
		_, _ = f.conn.WriteToUDPAddrPort(buf[:n], s.client)
	}
}

// setTargets replaces the targets of new sessions and closes the
// sessions whose target is no longer one.
func (f *udpForwarder) setTargets(ts []udpTarget) {
	keep := map[udpTarget]bool{}
	for _, t := range ts {
		keep[t] = true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.targets = ts
	for _, s := range f.sessions {
		if !keep[s.target] {
			f.dropLocked(s)
		}
	}
}

// Close stops serving, closes every session and waits.
func (f *udpForwarder) Close() error {
	f.mu.Lock()
	f.closed = true
	for _, s := range f.sessions {
		f.dropLocked(s)
	}
	f.mu.Unlock()
	err := f.conn.Close()
	f.wg.Wait()
	return err
}

// forwardUDP keeps one UDP forwarder per UDP port of svc, each sending
// new sessions to the backends at the port its targetPort names (d.mu
// held, like forward).
func (d *DataPlane) forwardUDP(a *lbAlloc, svc *corev1.Service, backends []*podRun) {
	if a.udp == nil {
		a.udp = map[int32]*udpForwarder{}
	}
	want := map[int32]bool{}
	for _, sp := range svc.Spec.Ports {
		if sp.Protocol != corev1.ProtocolUDP {
			continue
		}
		want[sp.Port] = true
		var targets []udpTarget
		for _, b := range backends {
			if port, ok := targetPort(b.pod, sp); ok {
				targets = append(targets, udpTarget{pod: b.pod.UID, addr: netip.AddrPortFrom(netip.MustParseAddr(b.pod.Status.PodIP), uint16(port))})
			}
		}
		if f := a.udp[sp.Port]; f != nil {
			f.setTargets(targets)
			continue
		}
		f, err := listenUDP(netip.AddrPortFrom(a.ip, uint16(sp.Port)), targets, d.opts.PodCIDR, udpIdleTimeout, udpMaxSessions)
		if err != nil {
			d.opts.Logf("dataplane: load balancer %s: port %d/UDP: %v", a.key, sp.Port, err)
			continue
		}
		a.udp[sp.Port] = f
		d.opts.Logf("dataplane: load balancer %s: %s:%d/UDP → %v", a.key, a.ip, sp.Port, targets)
	}
	for port, f := range a.udp {
		if !want[port] {
			_ = f.Close()
			delete(a.udp, port)
		}
	}
}
