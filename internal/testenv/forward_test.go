package testenv

import (
	"io"
	"net"
	"net/netip"
	"testing"
)

// TestForward: a connection goes to the first target that accepts.
func TestForward(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "hello")
			c.Close()
		}
	}()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // nothing listens there now
	f, err := Forward(netip.MustParseAddrPort("127.0.0.1:0"), func() []string {
		return []string{deadAddr, l.Addr().String()}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := net.Dial("tcp", f.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "hello" {
		t.Fatalf("through the forwarder: %q, %v", got, err)
	}
}
