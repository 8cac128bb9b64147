package udpechoserver

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"
)

func TestEcho(t *testing.T) {
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pod := Context{Namespace: "ns", Ingress: "gw", Service: "udp-echo", Pod: "udp-echo-1"}
	s := &Server{Context: pod, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, conn) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Serve did not return after its context ended")
		}
	}()

	c, err := net.Dial("udp", conn.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for _, msg := range []string{"gateway-api-conformance-udp-weight\n", "second"} {
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		n, err := c.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]string
		if err := json.Unmarshal(buf[:n], &raw); err != nil {
			t.Fatalf("%v in %q", err, buf[:n])
		}
		want := map[string]string{"request": msg, "namespace": "ns", "ingress": "gw", "service": "udp-echo", "pod": "udp-echo-1"}
		if len(raw) != len(want) {
			t.Errorf("got %v, want %v", raw, want)
		}
		for k, v := range want {
			if raw[k] != v {
				t.Errorf("%s: got %q, want %q", k, raw[k], v)
			}
		}
		var resp EchoResponse
		if err := json.Unmarshal(buf[:n], &resp); err != nil || resp.Request != msg || resp.Context != pod {
			t.Errorf("decoding as EchoResponse: %+v, %v", resp, err)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("UDP_PORT", "")
	t.Setenv("POD_NAME", "p")
	cfg, err := ConfigFromEnv()
	if err != nil || cfg.UDPPort != 8080 || cfg.Context.Pod != "p" {
		t.Errorf("got %+v, %v", cfg, err)
	}
	t.Setenv("UDP_PORT", "99999")
	if _, err := ConfigFromEnv(); err == nil {
		t.Error("an out of range UDP_PORT was accepted")
	}
}
