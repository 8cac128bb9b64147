package testenv

// Test hosts in network namespaces (ip netns, veth, one Linux bridge), so
// that processes a test starts (Envoy, backends) each get an address of
// their own — a Pod's IP — and reach each other and the host, and nothing
// else: no NAT, no forwarding, no default route out of the bridge. Names
// carry this process's ID so that parallel runs on one machine never
// clash, and everything made is removed on Close, even when a test fails.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// RequireNetns fails the test in CI and skips it elsewhere unless this
// process can make network namespaces (root and iproute2).
func RequireNetns(t testing.TB) {
	t.Helper()
	err := netnsUsable()
	if err == nil {
		return
	}
	if InCI() {
		t.Fatalf("CI=true: network namespaces: %v", err)
	}
	t.Skipf("skipping: network namespaces: %v", err)
}

func netnsUsable() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root")
	}
	for _, b := range []string{"ip", "unshare", "setpriv", "mount"} {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("%s not found: %w", b, err)
		}
	}
	return nil
}

// Bridge is a Linux bridge on the host with an address in prefix (the
// gateway of the namespaces attached to it).
type Bridge struct {
	Name    string
	Gateway netip.Addr
	Prefix  netip.Prefix

	mu     sync.Mutex
	tag    string
	next   int
	spaces map[string]*Netns
}

var bridgeSeq struct {
	sync.Mutex
	n int
}

// NewBridge makes a bridge whose host side has gateway within prefix
// (e.g. 10.244.0.1 in 10.244.0.0/16).
func NewBridge(gateway netip.Addr, prefix netip.Prefix) (*Bridge, error) {
	if !prefix.Contains(gateway) {
		return nil, fmt.Errorf("netns: gateway %s not in %s", gateway, prefix)
	}
	bridgeSeq.Lock()
	bridgeSeq.n++
	n := bridgeSeq.n
	bridgeSeq.Unlock()
	// IFNAMSIZ is 16: "pb" + pid in base 36 (≤ 5) + "-" + n keeps it short.
	tag := strconv.FormatInt(int64(os.Getpid()), 36) + strconv.Itoa(n)
	b := &Bridge{Name: "ptb" + tag, Gateway: gateway, Prefix: prefix, tag: tag, spaces: map[string]*Netns{}}
	if err := run("ip", "link", "add", b.Name, "type", "bridge"); err != nil {
		return nil, err
	}
	cidr := netip.PrefixFrom(gateway, prefix.Bits()).String()
	if err := errors.Join(run("ip", "addr", "add", cidr, "dev", b.Name), run("ip", "link", "set", b.Name, "up")); err != nil {
		_ = run("ip", "link", "del", b.Name)
		return nil, err
	}
	return b, nil
}

// Netns is a network namespace attached to a Bridge, with eth0 holding
// its addresses and a default route through the bridge's gateway.
type Netns struct {
	Name   string
	Addr   netip.Addr
	bridge *Bridge
	veth   string
}

// NewIsolatedNamespace makes a network namespace with only its loopback:
// what runs in it reaches nothing outside, and is reached only through
// DialContext. Its processes can use fixed loopback ports without
// clashing with anything else on the machine.
func NewIsolatedNamespace() (*Netns, error) {
	bridgeSeq.Lock()
	bridgeSeq.n++
	n := &Netns{Name: fmt.Sprintf("portico-%s%d-lo", strconv.FormatInt(int64(os.Getpid()), 36), bridgeSeq.n)}
	bridgeSeq.Unlock()
	for _, s := range [][]string{{"ip", "netns", "add", n.Name}, {"ip", "-n", n.Name, "link", "set", "lo", "up"}} {
		if err := run(s[0], s[1:]...); err != nil {
			n.remove()
			return nil, err
		}
	}
	return n, nil
}

// AddNamespace makes a network namespace with addr (in the bridge's
// prefix) on its eth0 and lo up.
func (b *Bridge) AddNamespace(addr netip.Addr) (*Netns, error) {
	if !b.Prefix.Contains(addr) {
		return nil, fmt.Errorf("netns: %s not in %s", addr, b.Prefix)
	}
	b.mu.Lock()
	b.next++
	n := &Netns{Name: fmt.Sprintf("portico-%s-%d", b.tag, b.next), Addr: addr, bridge: b, veth: fmt.Sprintf("pv%s-%d", b.tag, b.next)}
	b.mu.Unlock()
	if len(n.veth) > 15 {
		return nil, fmt.Errorf("netns: interface name %q too long", n.veth)
	}
	cidr := netip.PrefixFrom(addr, b.Prefix.Bits()).String()
	steps := [][]string{
		{"ip", "netns", "add", n.Name},
		// eth0's MAC follows from its address, set before it is up: a
		// neighbour cache on the bridge that learnt an address reused by
		// a later namespace still holds the right MAC, and none ever
		// learns one that changes afterwards (which cut a namespace off
		// for the 30 s an entry stays reachable).
		{"ip", "link", "add", n.veth, "type", "veth", "peer", "name", "eth0", "address", macFor(addr), "netns", n.Name},
		{"ip", "link", "set", n.veth, "master", b.Name},
		{"ip", "link", "set", n.veth, "up"},
		{"ip", "-n", n.Name, "addr", "add", cidr, "dev", "eth0"},
		{"ip", "-n", n.Name, "link", "set", "eth0", "up"},
		{"ip", "-n", n.Name, "link", "set", "lo", "up"},
		{"ip", "-n", n.Name, "route", "add", "default", "via", b.Gateway.String()},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			n.remove()
			return nil, err
		}
	}
	b.mu.Lock()
	b.spaces[n.Name] = n
	b.mu.Unlock()
	return n, nil
}

// macFor is a locally administered unicast MAC derived from addr.
func macFor(addr netip.Addr) string {
	b := addr.As16()
	return fmt.Sprintf("02:50:%02x:%02x:%02x:%02x", b[12], b[13], b[14], b[15])
}

// AddAddress adds another address (e.g. a load-balancer address) to the
// namespace's eth0.
func (n *Netns) AddAddress(addr netip.Addr) error {
	return run("ip", "-n", n.Name, "addr", "add", netip.PrefixFrom(addr, n.bridge.Prefix.Bits()).String(), "dev", "eth0")
}

// RemoveAddress removes an address AddAddress added.
func (n *Netns) RemoveAddress(addr netip.Addr) error {
	return run("ip", "-n", n.Name, "addr", "del", netip.PrefixFrom(addr, n.bridge.Prefix.Bits()).String(), "dev", "eth0")
}

// Wrap prefixes argv so that it runs inside the namespace.
func (n *Netns) Wrap(argv []string) []string {
	return append([]string{"ip", "netns", "exec", n.Name}, argv...)
}

// DialContext opens a connection from inside the namespace (its own
// loopback included): the socket is made on a thread that has entered
// the namespace, and stays there after the thread has left it.
func (n *Netns) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return InNetns(n, func() (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	})
}

// InNetns runs f on a thread that has entered namespace n and returns what
// it returns: the sockets f makes (to dial, listen or receive datagrams)
// stay in the namespace after the thread has left it.
func InNetns[T any](n *Netns, f func() (T, error)) (T, error) {
	var zero T
	target, err := os.Open("/run/netns/" + n.Name)
	if err != nil {
		return zero, err
	}
	defer target.Close()
	runtime.LockOSThread()
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return zero, err
	}
	defer self.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return zero, fmt.Errorf("setns %s: %w", n.Name, err)
	}
	v, err := f()
	if rerr := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); rerr != nil {
		// The thread stays locked and dies with its goroutine rather
		// than run other goroutines in the wrong namespace.
		if c, ok := any(v).(io.Closer); ok && err == nil {
			c.Close()
		}
		return zero, fmt.Errorf("setns back: %w", rerr)
	}
	runtime.UnlockOSThread()
	return v, err
}

// Close removes the namespace and its veth.
func (n *Netns) Close() error {
	if n.bridge != nil {
		n.bridge.mu.Lock()
		delete(n.bridge.spaces, n.Name)
		n.bridge.mu.Unlock()
	}
	return n.remove()
}

func (n *Netns) remove() error {
	// Deleting the namespace deletes its end of the veth and so the pair.
	err := run("ip", "netns", "del", n.Name)
	// The pair goes with the namespace, but the kernel may take a moment
	// after the namespace's last reference is gone; a veth that vanished
	// meanwhile is no error.
	if n.veth != "" && exists("ip", "link", "show", n.veth) {
		if derr := run("ip", "link", "del", n.veth); derr != nil && exists("ip", "link", "show", n.veth) {
			err = errors.Join(err, derr)
		}
	}
	return err
}

// Close removes every namespace of the bridge and the bridge.
func (b *Bridge) Close() error {
	b.mu.Lock()
	spaces := make([]*Netns, 0, len(b.spaces))
	for _, n := range b.spaces {
		spaces = append(spaces, n)
	}
	b.mu.Unlock()
	var errs []error
	for _, n := range spaces {
		errs = append(errs, n.Close())
	}
	errs = append(errs, run("ip", "link", "del", b.Name))
	return errors.Join(errs...)
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func exists(name string, args ...string) bool {
	return exec.Command(name, args...).Run() == nil
}
