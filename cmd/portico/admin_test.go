package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// flagDefaults parses the flag usage `portico <cmd> -h` prints: flag name
// → default ("" when the usage shows none).
func flagDefaults(t *testing.T, cmd string) map[string]string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run([]string{cmd, "-h"}, &out, &errb); code != exitOK {
		t.Fatalf("%s -h: exit %d\n%s", cmd, code, errb.String())
	}
	flags := map[string]string{}
	name := ""
	def := regexp.MustCompile(`\(default "?([^")]*)"?\)`)
	for _, line := range strings.Split(errb.String()+out.String(), "\n") {
		if strings.HasPrefix(line, "  -") {
			name = strings.Fields(strings.TrimPrefix(line, "  -"))[0]
			flags[name] = ""
		}
		if m := def.FindStringSubmatch(line); m != nil && name != "" {
			flags[name] = m[1]
		}
	}
	return flags
}

// The admin address keeps its default (every interface, probes and
// metrics); the debug server is on loopback by default in both modes.
func TestAdminAndDebugFlagDefaults(t *testing.T) {
	for _, cmd := range []string{"controller", "standalone"} {
		f := flagDefaults(t, cmd)
		if got, ok := f["admin-address"]; !ok || got != ":19000" {
			t.Errorf("%s --admin-address default %q (present %v), want :19000", cmd, got, ok)
		}
		if got, ok := f["debug-address"]; !ok || got != "127.0.0.1:19001" {
			t.Errorf("%s --debug-address default %q (present %v), want 127.0.0.1:19001", cmd, got, ok)
		}
	}
	if got, ok := flagDefaults(t, "standalone")["debug-insecure"]; !ok || got != "" {
		t.Errorf("standalone --debug-insecure: present %v, default %q; want a flag off by default", ok, got)
	}
	if _, ok := flagDefaults(t, "controller")["debug-insecure"]; ok {
		t.Error("controller has --debug-insecure: off loopback it always authenticates")
	}
	if got, ok := flagDefaults(t, "controller")["debug-pprof"]; !ok || got != "" {
		t.Errorf("controller --debug-pprof: present %v, default %q; want off", ok, got)
	}
}

const headerRouteYAML = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: auth, namespace: default}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches:
    - headers: [{name: X-Api-Key, value: matched-key-42}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set: [{name: Authorization, value: "Bearer upstream-token-42"}]
    backendRefs: [{name: web, port: 80}]
`

// Standalone serves probes and metrics on the admin address and /debug on
// the debug address only, with header values redacted.
func TestStandaloneDebugOnItsOwnListener(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "gateway.yaml", gatewayYAML)
	writeFile(t, dir, "web.yaml", backendYAML("web", "10.0.0.1"))
	writeFile(t, dir, "auth.yaml", headerRouteYAML)
	s := startStandalone(t, dir)
	if s.debug == s.admin || !strings.HasPrefix(s.debug, "127.0.0.1:") {
		t.Fatalf("debug on %s, admin on %s", s.debug, s.admin)
	}
	eventually(t, "/readyz 200", func() bool { code, _ := s.get("/readyz"); return code == http.StatusOK })
	for _, p := range []string{"/debug/xds?gateway=default/gw", "/debug/status", "/debug/pprof/"} {
		if code, _ := getFrom(t, s.admin, p); code != http.StatusNotFound {
			t.Errorf("admin address: GET %s = %d, want 404", p, code)
		}
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, _ := getFrom(t, s.debug, p); code != http.StatusNotFound {
			t.Errorf("debug address: GET %s = %d, want 404", p, code)
		}
	}
	if code, _ := getFrom(t, s.admin, "/metrics"); code != http.StatusOK {
		t.Errorf("admin /metrics = %d", code)
	}
	code, body := getFrom(t, s.debug, "/debug/xds?gateway=default/gw")
	if code != http.StatusOK || !strings.Contains(body, `"authorization"`) || !strings.Contains(body, `"x-api-key"`) {
		t.Fatalf("debug /debug/xds = %d:\n%.2000s", code, body)
	}
	for _, secret := range []string{"upstream-token-42", "Bearer", "matched-key-42"} {
		if strings.Contains(body, secret) {
			t.Errorf("/debug/xds shows %q", secret)
		}
	}
}

// runUntilListening runs standalone with args until it prints its
// listening line or exits; it returns the exit code (-1 while running),
// stdout and stderr, and a stop function.
func runUntilListening(t *testing.T, args ...string) (int, *syncBuffer, *syncBuffer, func() int) {
	t.Helper()
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() { exited <- runContext(ctx, append([]string{"standalone"}, args...), stdout, stderr) }()
	stop := func() int {
		cancel()
		select {
		case code := <-exited:
			return code
		case <-time.After(deadline):
			t.Fatal("standalone did not stop")
			return -1
		}
	}
	end := time.Now().Add(deadline)
	for time.Now().Before(end) {
		select {
		case code := <-exited:
			cancel()
			return code, stdout, stderr, func() int { return code }
		default:
		}
		if listeningRE.MatchString(stdout.String()) {
			return -1, stdout, stderr, stop
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	t.Fatalf("standalone neither listened nor exited; stderr:\n%s", stderr)
	return 0, nil, nil, nil
}

// Standalone refuses a debug address off loopback (it cannot
// authenticate), unless --debug-insecure says so, and then warns.
func TestStandaloneDebugOffLoopback(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "gateway.yaml", gatewayYAML)
	base := []string{"--resources", dir, "--xds-address", "127.0.0.1:0", "--admin-address", "127.0.0.1:0"}

	code, _, stderr, _ := runUntilListening(t, append(base, "--debug-address", ":0")...)
	if code != exitUsage || !strings.Contains(stderr.String(), "not a loopback address") || !strings.Contains(stderr.String(), "--debug-insecure") {
		t.Fatalf("--debug-address :0: exit %d, stderr:\n%s\nwant exit %d naming --debug-insecure", code, stderr, exitUsage)
	}

	code, stdout, stderr, stop := runUntilListening(t, append(base, "--debug-address", ":0", "--debug-insecure")...)
	if code != -1 {
		t.Fatalf("--debug-insecure: exit %d\n%s", code, stderr)
	}
	debugAddr := listeningRE.FindStringSubmatch(stdout.String())[3]
	_, port, err := net.SplitHostPort(debugAddr)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	eventually(t, "the warning", func() bool {
		return strings.Contains(stderr.String(), "level=WARN") && strings.Contains(stderr.String(), "without authentication")
	})
	if c, _ := getFrom(t, "127.0.0.1:"+port, "/debug/status"); c != http.StatusOK {
		t.Errorf("insecure debug /debug/status = %d", c)
	}
	if c := stop(); c != exitOK {
		t.Errorf("exit %d\n%s", c, stderr)
	}

	// Empty disables it.
	code, stdout, stderr, stop = runUntilListening(t, append(base, "--debug-address", "")...)
	if code != -1 || listeningRE.FindStringSubmatch(stdout.String())[3] != "off" {
		t.Errorf("--debug-address '': exit %d, stdout %q\n%s", code, stdout, stderr)
	}
	if code == -1 {
		stop()
	}
}
