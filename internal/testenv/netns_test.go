package testenv

import (
	"context"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
)

// TestBridgeNamespaces: namespaces on a bridge reach each other and the
// host, and Close removes every namespace, veth and the bridge.
func TestBridgeNamespaces(t *testing.T) {
	RequireNetns(t)
	b, err := NewBridge(netip.MustParseAddr("10.251.0.1"), netip.MustParsePrefix("10.251.0.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := b.AddNamespace(netip.MustParseAddr("10.251.0.2"))
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	if _, err := b.AddNamespace(netip.MustParseAddr("10.251.0.3")); err != nil {
		b.Close()
		t.Fatal(err)
	}
	// A listener inside a, reached from the host by a's address.
	l, err := net.Listen("tcp", "127.0.0.1:0") // on the host, reached from a through the bridge below
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	c, err := a.DialContext(context.Background(), "tcp", "10.251.0.1:1")
	if err == nil {
		c.Close()
	} else if !strings.Contains(err.Error(), "refused") {
		t.Errorf("dialing the host's bridge address from the namespace: %v, want connection refused", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	out, _ := exec.Command("ip", "-br", "link").CombinedOutput()
	if strings.Contains(string(out), b.Name) || strings.Contains(string(out), "pv"+b.tag) {
		t.Errorf("links left after Close:\n%s", out)
	}
	ns, _ := exec.Command("ip", "netns", "list").CombinedOutput()
	if strings.Contains(string(ns), "portico-"+b.tag+"-") {
		t.Errorf("namespaces left after Close:\n%s", ns)
	}
}
