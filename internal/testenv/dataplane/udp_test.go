package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The UDP forwarder on loopback, without Pods: backends are UDP echoes of
// the test that answer "<name>:<payload>".

// loopbackEcho starts a UDP echo on 127.0.0.1 that prefixes its answers
// with name; it is a target of Pod UID name.
func loopbackEcho(t *testing.T, name string) udpTarget {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		buf := make([]byte, maxDatagram)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err == nil {
				_, _ = c.WriteToUDPAddrPort([]byte(name+":"+string(buf[:n])), from)
			}
		}
	}()
	return udpTarget{pod: types.UID(name), addr: c.LocalAddr().(*net.UDPAddr).AddrPort()}
}

// udpClient is a new client socket (a new session for the forwarder).
func udpClient(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ask sends msg from c to addr and returns who answered; the answer must
// come from addr and echo msg.
func ask(c *net.UDPConn, addr netip.AddrPort, msg string, timeout time.Duration) (string, error) {
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	if _, err := c.WriteToUDPAddrPort([]byte(msg), addr); err != nil {
		return "", err
	}
	buf := make([]byte, 2048)
	n, from, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		return "", err
	}
	if from != addr {
		return "", fmt.Errorf("answer from %s, want %s", from, addr)
	}
	who, echoed, ok := strings.Cut(string(buf[:n]), ":")
	if !ok || echoed != msg {
		return "", fmt.Errorf("answer %q to %q", buf[:n], msg)
	}
	return who, nil
}

func startUDPForwarder(t *testing.T, targets []udpTarget, idle time.Duration, maxSessions int) *udpForwarder {
	t.Helper()
	f, err := listenUDP(netip.MustParseAddrPort("127.0.0.1:0"), targets, netip.Prefix{}, idle, maxSessions)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// sessionsOf are the open sessions' Pods, by client.
func sessionsOf(f *udpForwarder) map[netip.AddrPort]types.UID {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[netip.AddrPort]types.UID{}
	for c, s := range f.sessions {
		out[c] = s.target.pod
	}
	return out
}

func clientAddr(c *net.UDPConn) netip.AddrPort { return c.LocalAddr().(*net.UDPAddr).AddrPort() }

// Answers come from the forwarder's address; a client keeps its backend
// for its session; new clients go to each backend in turn; a backend that
// is no longer a target gets no new session and loses its sessions (their
// clients' next datagrams open sessions with the others); without
// targets nothing is answered.
func TestUDPForwarderSessions(t *testing.T) {
	a, b := loopbackEcho(t, "a"), loopbackEcho(t, "b")
	f := startUDPForwarder(t, []udpTarget{a, b}, time.Minute, 64)
	addr := f.Addr()

	first := udpClient(t)
	who, err := ask(first, addr, "hello", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		again, err := ask(first, addr, fmt.Sprintf("again %d", i), 2*time.Second)
		if err != nil || again != who {
			t.Fatalf("datagram %d of the session: answered by %q (%v), want %q", i, again, err, who)
		}
	}

	seen := map[string]int{}
	var onA []*net.UDPConn
	for i := range 10 {
		c := udpClient(t)
		w, err := ask(c, addr, fmt.Sprintf("client %d", i), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		seen[w]++
		if w == "a" {
			onA = append(onA, c)
		}
	}
	if seen["a"] != 5 || seen["b"] != 5 {
		t.Errorf("10 new clients answered by %v, want 5 each (round robin)", seen)
	}
	if n := len(sessionsOf(f)); n != 11 {
		t.Errorf("%d sessions open, want 11", n)
	}

	f.setTargets([]udpTarget{b})
	for c, pod := range sessionsOf(f) {
		if pod == a.pod {
			t.Errorf("the session of %s is still with a, which is no longer a target", c)
		}
	}
	for i, c := range onA {
		if w, err := ask(c, addr, "after", 2*time.Second); err != nil || w != "b" {
			t.Errorf("client %d, whose session was with a: answered by %q (%v), want b", i, w, err)
		}
	}
	for i := range 4 {
		if w, err := ask(udpClient(t), addr, "new", 2*time.Second); err != nil || w != "b" {
			t.Errorf("new client %d: answered by %q (%v), want b", i, w, err)
		}
	}
	// The same Pod at the same address is the same target; another Pod
	// (a new UID) at b's address is not, and ends b's sessions.
	f.setTargets([]udpTarget{b})
	if n := len(sessionsOf(f)); n == 0 {
		t.Error("unchanged targets closed the sessions")
	}
	f.setTargets([]udpTarget{{pod: "b2", addr: b.addr}})
	if n := len(sessionsOf(f)); n != 0 {
		t.Errorf("%d sessions left after their Pod was replaced", n)
	}

	f.setTargets(nil)
	if w, err := ask(udpClient(t), addr, "nobody", 200*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("without targets: answered by %q (%v), want no answer", w, err)
	}
	if n := len(sessionsOf(f)); n != 0 {
		t.Errorf("%d sessions opened without targets", n)
	}
}

// Sessions are bounded: an idle one ends after the idle time (its client's
// next datagram opens another); beyond the maximum, a new client's
// session replaces the one idle the longest.
func TestUDPForwarderBounds(t *testing.T) {
	a := loopbackEcho(t, "a")

	t.Run("idle", func(t *testing.T) {
		f := startUDPForwarder(t, []udpTarget{a}, 300*time.Millisecond, 64)
		c := udpClient(t)
		if _, err := ask(c, f.Addr(), "one", 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if len(sessionsOf(f)) != 1 {
			t.Fatal("no session after a round trip")
		}
		eventually(t, 10*time.Second, "the idle session to end", func() error {
			if n := len(sessionsOf(f)); n != 0 {
				return fmt.Errorf("%d sessions", n)
			}
			return nil
		})
		if _, err := ask(c, f.Addr(), "two", 2*time.Second); err != nil {
			t.Errorf("after the session ended: %v", err)
		}
	})

	t.Run("at most", func(t *testing.T) {
		f := startUDPForwarder(t, []udpTarget{a}, time.Minute, 2)
		c1, c2, c3 := udpClient(t), udpClient(t), udpClient(t)
		for i, c := range []*net.UDPConn{c1, c2, c3} {
			if _, err := ask(c, f.Addr(), "hi", 2*time.Second); err != nil {
				t.Fatalf("client %d: %v", i+1, err)
			}
		}
		s := sessionsOf(f)
		_, has1 := s[clientAddr(c1)]
		_, has2 := s[clientAddr(c2)]
		_, has3 := s[clientAddr(c3)]
		if len(s) != 2 || has1 || !has2 || !has3 {
			t.Errorf("sessions of clients 1, 2, 3: %v %v %v (%d), want client 1's replaced", has1, has2, has3, len(s))
		}
		// Client 2 is active again; client 1 comes back and replaces
		// client 3, now the idlest.
		if _, err := ask(c2, f.Addr(), "hi", 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := ask(c1, f.Addr(), "back", 2*time.Second); err != nil {
			t.Fatalf("client 1 after its session was replaced: %v", err)
		}
		s = sessionsOf(f)
		_, has1 = s[clientAddr(c1)]
		_, has2 = s[clientAddr(c2)]
		_, has3 = s[clientAddr(c3)]
		if len(s) != 2 || !has1 || !has2 || has3 {
			t.Errorf("sessions of clients 1, 2, 3: %v %v %v (%d), want client 3's replaced", has1, has2, has3, len(s))
		}
	})
}

// Close ends every session and stops answering.
func TestUDPForwarderClose(t *testing.T) {
	a := loopbackEcho(t, "a")
	f, err := listenUDP(netip.MustParseAddrPort("127.0.0.1:0"), []udpTarget{a}, netip.Prefix{}, time.Minute, 64)
	if err != nil {
		t.Fatal(err)
	}
	c := udpClient(t)
	if _, err := ask(c, f.Addr(), "hi", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(sessionsOf(f)); n != 0 {
		t.Errorf("%d sessions after Close", n)
	}
	if w, err := ask(c, f.Addr(), "closed", 200*time.Millisecond); err == nil {
		t.Errorf("answered by %q after Close", w)
	}
}
