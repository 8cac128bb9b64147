package bench

// TCPRoutes through the real Envoy of the end-to-end figures (envoy.go).
//
// The TCP backend is an echo the harness serves itself (tcpEcho), not a
// process in a namespace of its own: it answers each connection's first
// line with tcpEchoReply of it and closes, so that a probe knows a
// connection reached the backend, through the route's cluster, and no
// other. It listens on the bridge's host address (e2eGateway), the only
// address of the harness's network namespace that Envoy's namespace
// reaches (its loopback is its own; an EndpointSlice cannot name a
// loopback address); connections go only to the suite's own namespaces
// (Envoy's address, and from Envoy to the harness). The unit tests serve
// and dial it on loopback.
//
// Service e2eTCPService (no selector; the suite writes its EndpointSlice,
// pointing at the echo) is the backend of the stable TCPRoute on
// e2eTCPStableListener, which keeps its cluster in Envoy, and of the
// probe TCPRoutes on e2eTCPListener (TCPRouteToFirstConnection).
//
// A connection "reaches the backend" when the echo's answer to a token
// unique to that attempt comes back (tcpExchange); with no route, Envoy
// accepts and closes at once, and before Envoy has the listener the
// connection is refused: both are failures.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

const (
	e2eTCPService     = "e2e-tcp"
	e2eTCPSlice       = "e2e-tcp-bench"
	e2eTCPServicePort = 9400
	e2eTCPStableRoute = "e2e-tcp-stable"
	// tcpAttemptTimeout bounds one connection attempt of a probe.
	tcpAttemptTimeout = time.Second
	// tcpMaxLine bounds what the echo and the probes read.
	tcpMaxLine = 512
)

// tcpEchoReply is the echo's answer to line token.
func tcpEchoReply(token string) string { return "portico-bench-tcp-echo " + token + "\n" }

// tcpEcho is the TCP backend of the Envoy loop: each connection gets one
// line read (at most tcpMaxLine bytes, within 10 s), the reply written,
// and is closed.
type tcpEcho struct {
	l     net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// startTCPEcho serves the echo on addr ("host:port"; port 0 picks one).
func startTCPEcho(addr string) (*tcpEcho, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	e := &tcpEcho{l: l, conns: map[net.Conn]struct{}{}}
	e.wg.Add(1)
	go e.serve()
	return e, nil
}

// Addr is the address the echo listens on.
func (e *tcpEcho) Addr() netip.AddrPort { return e.l.Addr().(*net.TCPAddr).AddrPort() }

func (e *tcpEcho) serve() {
	defer e.wg.Done()
	for {
		c, err := e.l.Accept()
		if err != nil {
			return // closed
		}
		if !e.track(c, true) {
			c.Close()
			return
		}
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer e.track(c, false)
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			line, err := bufio.NewReader(io.LimitReader(c, tcpMaxLine)).ReadString('\n')
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, tcpEchoReply(strings.TrimSuffix(line, "\n")))
		}()
	}
}

// track adds or removes c; it refuses to add once the echo is closed.
func (e *tcpEcho) track(c net.Conn, add bool) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !add {
		delete(e.conns, c)
		return true
	}
	if e.conns == nil {
		return false
	}
	e.conns[c] = struct{}{}
	return true
}

// Close stops the echo and its connections and waits for them.
func (e *tcpEcho) Close() error {
	err := e.l.Close()
	e.mu.Lock()
	for c := range e.conns {
		c.Close()
	}
	e.conns = nil
	e.mu.Unlock()
	e.wg.Wait()
	return err
}

// tcpExchange opens one connection to addr, sends token and a newline, and
// returns nil when the echo's reply to it comes back within timeout; an
// error otherwise (refused, closed without a reply, another reply).
func tcpExchange(ctx context.Context, addr, token string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, token+"\n"); err != nil {
		return fmt.Errorf("sending: %w", err)
	}
	line, err := bufio.NewReader(io.LimitReader(c, tcpMaxLine)).ReadString('\n')
	if err != nil {
		return fmt.Errorf("no reply from the backend: %w", err)
	}
	if want := tcpEchoReply(token); line != want {
		return fmt.Errorf("reply %q, want %q", line, want)
	}
	return nil
}

// e2eTCPRoute is a TCPRoute of the loop on listener section, to the TCP
// backend.
func e2eTCPRoute(name, section string) *gwv1.TCPRoute {
	return TCPRoute(RouteNamespace(0), name, e2eTCPLabel, section, e2eTCPService, e2eTCPServicePort)
}

// startTCP starts the echo on the bridge's host address and writes the
// TCP backend's Service and EndpointSlice and the stable TCPRoute.
func (l *EnvoyLoop) startTCP(ctx context.Context) error {
	var err error
	if l.tcpEcho, err = startTCPEcho(netip.AddrPortFrom(e2eGateway, 0).String()); err != nil {
		return fmt.Errorf("tcp echo: %w", err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: RouteNamespace(0), Name: e2eTCPService, Labels: map[string]string{benchLabel: e2eTCPLabel}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "tcp", Port: e2eTCPServicePort, Protocol: corev1.ProtocolTCP}}},
	}
	if err := l.c.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: RouteNamespace(0), Name: e2eTCPSlice, Labels: map[string]string{
			discoveryv1.LabelServiceName: e2eTCPService, discoveryv1.LabelManagedBy: "bench.portico.dev"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("tcp"), Port: ptr.To(int32(l.tcpEcho.Addr().Port())), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{e2eGateway.String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
	var cur discoveryv1.EndpointSlice
	switch err := l.c.Get(ctx, client.ObjectKeyFromObject(es), &cur); {
	case apierrors.IsNotFound(err):
		err = l.c.Create(ctx, es)
		if err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		cur.Ports, cur.Endpoints = es.Ports, es.Endpoints // the echo's port is new each run
		if err := l.c.Update(ctx, &cur); err != nil {
			return err
		}
	}
	if err := deleteTCPRoutes(ctx, l.c, e2eTCPLabel); err != nil {
		return fmt.Errorf("deleting leftover TCPRoutes: %w", err)
	}
	if err := l.c.Create(ctx, e2eTCPRoute(e2eTCPStableRoute, e2eTCPStableListener)); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// waitTCPStable waits until a connection through the stable TCPRoute
// reaches the backend.
func (l *EnvoyLoop) waitTCPStable(ctx context.Context) error {
	addr := netip.AddrPortFrom(e2eProxy, e2eTCPStablePort).String()
	var last error
	err := poll(ctx, time.Minute, 20*time.Millisecond, func() (bool, error) {
		last = tcpExchange(ctx, addr, "stable", tcpAttemptTimeout)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the stable TCPRoute through Envoy: %w (last attempt: %v)", err, last)
	}
	return nil
}

// closeTCP stops the echo and deletes the loop's TCP objects.
func (l *EnvoyLoop) closeTCP(ctx context.Context) []error {
	var errs []error
	if l.tcpEcho != nil {
		if err := l.tcpEcho.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, deleteTCPRoutes(ctx, l.c, e2eTCPLabel))
	for _, o := range []client.Object{
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: RouteNamespace(0), Name: e2eTCPSlice}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: RouteNamespace(0), Name: e2eTCPService}},
	} {
		if err := l.c.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errs
}

// TCPErr is why the TCPRoute figures through Envoy cannot be measured
// (nil when they can): the loop's HTTP figures do not depend on them.
func (l *EnvoyLoop) TCPErr() error { return l.tcpErr }

// TCPRouteToFirstConnection creates TCPRoute probe k of stage n on
// e2eTCPListener and returns the time from the create to the first
// connection through Envoy (one attempt every e2ePoll) that reaches the
// TCP backend; it then deletes the route and waits until two connections
// in a row no longer do. It fails at once if a connection reaches the
// backend before the create (a previous probe's route still served).
func (l *EnvoyLoop) TCPRouteToFirstConnection(ctx context.Context, n, k int) (time.Duration, error) {
	if l.tcpErr != nil {
		return 0, l.tcpErr
	}
	name := fmt.Sprintf("e2e-tcp-%d-%d-z", n, k)
	addr := netip.AddrPortFrom(e2eProxy, e2eTCPPort).String()
	if tcpExchange(ctx, addr, name+"-before", tcpAttemptTimeout) == nil {
		return 0, fmt.Errorf("TCPRoute %s: listener %s reaches the backend before the create", name, e2eTCPListener)
	}
	route := e2eTCPRoute(name, e2eTCPListener)
	attempt := 0
	t0 := time.Now()
	if err := l.c.Create(ctx, route); err != nil {
		return 0, err
	}
	var lat time.Duration
	err := poll(ctx, ProbeTimeout, e2ePoll, func() (bool, error) {
		attempt++
		if tcpExchange(ctx, addr, fmt.Sprintf("%s-%d", name, attempt), tcpAttemptTimeout) == nil {
			lat = time.Since(t0)
			return true, nil
		}
		return false, nil
	})
	if derr := l.c.Delete(ctx, route); derr != nil && err == nil {
		err = derr
	}
	if err != nil {
		return 0, fmt.Errorf("TCPRoute %s: %w", name, err)
	}
	failed := 0
	err = poll(ctx, ProbeTimeout, 10*time.Millisecond, func() (bool, error) {
		attempt++
		if tcpExchange(ctx, addr, fmt.Sprintf("%s-%d", name, attempt), tcpAttemptTimeout) != nil {
			failed++
		} else {
			failed = 0
		}
		return failed >= 2, nil
	})
	if err != nil {
		return lat, fmt.Errorf("TCPRoute %s still served after its delete: %w", name, err)
	}
	return lat, nil
}
