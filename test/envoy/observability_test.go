package envoy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/infra"
	"github.com/portico-dev/portico/internal/testenv"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// Observability through a real Envoy. The quickstart's bootstrap has the
// metrics listener Portico renders for its proxies (internal/infra
// TestQuickstartBootstrapMatchesStandalone keeps them equal): it serves
// /stats/prometheus on 127.0.0.1:19090 and nothing else of Envoy's admin
// interface. Access logs go to Envoy's standard output, which the
// harness keeps in the Envoy process's output file (Envoy's own log goes
// to --log-path): one JSON line per request with the default fields, a
// custom text format, or nothing. Envoy flushes access logs every 50 ms
// here (--file-flush-interval-msec; its default is 10 s).

const metricsBase = "http://127.0.0.1:19090"

// flushFast makes Envoy write access logs within 50 ms.
var flushFast = []string{envoyArg("--file-flush-interval-msec"), envoyArg("50")}

// do sends method url with Host host on a connection of its own.
func (s *stack) do(method, url, host string) (int, string, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	tr := s.transport(nil)
	tr.DisableKeepAlives = true
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// promCounter is the sum of the samples of counter name whose labels
// contain label, in a Prometheus text exposition.
func promCounter(body, name, label string) (float64, bool) {
	var sum float64
	found := false
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, label) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum, found = sum+v, true
		}
	}
	return sum, found
}

// TestObservabilityMetrics scrapes the metrics listener: per-cluster
// request counts follow the requests sent, and no other path of the admin
// interface is reachable through it, POSTs included.
func TestObservabilityMetrics(t *testing.T) {
	s := startStack(t, nil, quickstartBackends...)
	c := s.client(nil)
	s.routed(c, "http://127.0.0.1:8080/api/warmup", "localhost", "api")

	const name, label = "envoy_cluster_upstream_rq_total", `envoy_cluster_name="default/api/80"`
	scrape := func() (float64, error) {
		code, body, err := s.do(http.MethodGet, metricsBase+"/stats/prometheus", "portico-metrics")
		if err != nil {
			return 0, err
		}
		if code != http.StatusOK || !strings.Contains(body, "# TYPE "+name+" counter") {
			return 0, fmt.Errorf("/stats/prometheus: %d %q", code, truncate(body, 200))
		}
		v, ok := promCounter(body, name, label)
		if !ok {
			return 0, fmt.Errorf("no %s{%s} sample", name, label)
		}
		return v, nil
	}
	var before float64
	s.eventually(10*time.Second, "a scrape with the api cluster's requests", func() (err error) {
		before, err = scrape()
		return err
	})
	const n = 5
	for i := range n {
		if r, err := s.get(c, fmt.Sprintf("http://127.0.0.1:8080/api/metrics-%d", i), "localhost"); err != nil || r.code != http.StatusOK {
			t.Fatalf("request %d: %v %d", i, err, r.code)
		}
	}
	s.eventually(10*time.Second, fmt.Sprintf("%s{%s} to grow by %d", name, label, n), func() error {
		v, err := scrape()
		if err == nil && v-before != n {
			err = fmt.Errorf("grew by %v", v-before)
		}
		return err
	})
	// The query string is the admin handler's.
	if code, body, err := s.do(http.MethodGet, metricsBase+"/stats/prometheus?usedonly", "x"); err != nil || code != http.StatusOK || !strings.Contains(body, name) {
		t.Errorf("/stats/prometheus?usedonly: %v %d", err, code)
	}

	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/config_dump"},
		{http.MethodGet, "/stats"},
		{http.MethodGet, "/stats?format=json"},
		{http.MethodGet, "/clusters"},
		{http.MethodGet, "/server_info"},
		{http.MethodGet, "/ready"},
		{http.MethodGet, "/"},
		{http.MethodGet, "/stats/prometheus/../config_dump"},
		{http.MethodGet, "/STATS/PROMETHEUS"},
		{http.MethodPost, "/quitquitquit"},
		{http.MethodPost, "/healthcheck/fail"},
		{http.MethodPost, "/logging?level=trace"},
		{http.MethodPost, "/runtime_modify?re2.max_program_size.error_level=1"},
		{http.MethodPost, "/drain_listeners"},
	} {
		code, body, err := s.do(tc.method, metricsBase+tc.path, "x")
		if err != nil || code != http.StatusNotFound {
			t.Errorf("%s %s through the metrics listener: %v %d %q, want 404", tc.method, tc.path, err, code, truncate(body, 100))
		}
	}
	// None of them reached the admin interface: Envoy still serves.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if state, err := s.envoy.ServerState(ctx); err != nil || state != "LIVE" {
		t.Errorf("server state %q (%v) after the POSTs, want LIVE", state, err)
	}
	_, body, err := s.envoy.Admin(ctx, "/runtime")
	var rt struct {
		Entries map[string]struct {
			FinalValue string `json:"final_value"`
		} `json:"entries"`
	}
	if err == nil {
		err = json.Unmarshal([]byte(body), &rt)
	}
	if v := rt.Entries["re2.max_program_size.error_level"].FinalValue; err != nil || v != infra.RE2ErrorLevel {
		t.Errorf("runtime re2.max_program_size.error_level = %q (%v), want %s: modified through the metrics listener?", v, err, infra.RE2ErrorLevel)
	}
	s.routed(c, "http://127.0.0.1:8080/api/after", "localhost", "api")
}

// accessLines are the lines of Envoy's standard output so far.
func (s *stack) accessLines() []string {
	s.t.Helper()
	f, err := os.Open(s.envoy.OutPath)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// waitLines waits until n lines of Envoy's standard output contain mark,
// and returns them.
func (s *stack) waitLines(mark string, n int) []string {
	s.t.Helper()
	var got []string
	s.eventually(10*time.Second, fmt.Sprintf("%d access-log lines with %q", n, mark), func() error {
		got = got[:0]
		for _, l := range s.accessLines() {
			if strings.Contains(l, mark) {
				got = append(got, l)
			}
		}
		if len(got) < n {
			return fmt.Errorf("%d lines", len(got))
		}
		return nil
	})
	return got
}

// TestObservabilityAccessLogJSON: without a ProxyConfig, every request
// makes one JSON line on Envoy's standard output with the default fields.
func TestObservabilityAccessLogJSON(t *testing.T) {
	s := startStackWith(t, flushFast, nil, quickstartBackends...)
	c := s.client(nil)
	s.routed(c, "http://127.0.0.1:8080/api/warmup", "localhost", "api")
	const n = 3
	for i := range n {
		r, err := s.get(c, fmt.Sprintf("http://127.0.0.1:8080/api/json?id=%d", i), "localhost", "User-Agent", "portico-observability")
		if err != nil || r.code != http.StatusOK {
			t.Fatalf("request %d: %v %d", i, err, r.code)
		}
	}
	// A last request, without User-Agent: once its line is written, those
	// before it are too.
	if r, err := s.get(c, "http://127.0.0.1:8080/api/json-barrier", "localhost", "User-Agent", ""); err != nil || r.code != http.StatusOK {
		t.Fatalf("barrier: %v %d", err, r.code)
	}
	var barrier map[string]any
	if err := json.Unmarshal([]byte(s.waitLines("/api/json-barrier", 1)[0]), &barrier); err != nil {
		t.Fatal(err)
	}
	if ua, ok := barrier["user_agent"]; !ok || ua != nil {
		t.Errorf("user_agent of a request without one: %#v (present: %v), want null", ua, ok)
	}
	lines := s.waitLines("/api/json?id=", n)
	if len(lines) != n {
		t.Fatalf("%d lines for %d requests:\n%s", len(lines), n, strings.Join(lines, "\n"))
	}
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		for _, f := range translate.DefaultAccessLogFields {
			if _, ok := m[f.Name]; !ok {
				t.Errorf("line %d has no field %s: %s", i, f.Name, line)
			}
		}
		if len(m) != len(translate.DefaultAccessLogFields) {
			t.Errorf("line %d has %d fields, want %d: %s", i, len(m), len(translate.DefaultAccessLogFields), line)
		}
		for k, want := range map[string]any{
			"method": "GET", "path": fmt.Sprintf("/api/json?id=%d", i), "response_code": float64(200), "protocol": "HTTP/1.1",
			"authority": "localhost", "user_agent": "portico-observability", "upstream_cluster": "default/api/80",
			"upstream_host": "127.0.0.1:9003", "response_flags": "-",
		} {
			if m[k] != want {
				t.Errorf("line %d: %s = %#v, want %#v", i, k, m[k], want)
			}
		}
		if rn, _ := m["route_name"].(string); !strings.HasPrefix(rn, "httproute/default/app/") {
			t.Errorf("line %d: route_name %#v", i, m["route_name"])
		}
		if id, _ := m["request_id"].(string); id == "" {
			t.Errorf("line %d: request_id %#v", i, m["request_id"])
		}
		if b, _ := m["bytes_sent"].(float64); b <= 0 {
			t.Errorf("line %d: bytes_sent %#v", i, m["bytes_sent"])
		}
	}
}

// proxyConfigFiles makes the quickstart's GatewayClass reference a
// ProxyConfig with spec (YAML, indented by two spaces).
func proxyConfigFiles(spec string) map[string]string {
	return map[string]string{
		"gatewayclass.yaml": `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: portico
spec:
  controllerName: portico.dev/gateway-controller
  parametersRef:
    group: portico.dev
    kind: ProxyConfig
    name: proxies
    namespace: portico-system
`,
		"proxyconfig.yaml": `apiVersion: portico.dev/v1alpha1
kind: ProxyConfig
metadata:
  name: proxies
  namespace: portico-system
spec:
` + spec,
	}
}

// waitListenerConfig waits until the configuration of Envoy's dynamic
// listeners contains (or, with absent, no longer contains) s.
func (s *stack) waitListenerConfig(text string, absent bool) {
	s.t.Helper()
	err := s.envoy.WaitFor(15*time.Second, fmt.Sprintf("listeners with %q (absent %v)", text, absent), func(ctx context.Context) (bool, error) {
		code, body, err := s.envoy.Admin(ctx, "/config_dump?resource=dynamic_listeners")
		if err != nil || code != http.StatusOK {
			return false, fmt.Errorf("config_dump: %v %d", err, code)
		}
		if strings.Contains(body, "warming_state") {
			return false, nil // a listener is not active yet
		}
		return strings.Contains(body, text) != absent, nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

// TestObservabilityAccessLogTextAndOff: a text format from the class's
// ProxyConfig, then access logs turned off, then back to the default JSON
// lines; a request sent while they are off leaves no line, which the line
// of the request after it proves (standard output is one stream).
func TestObservabilityAccessLogTextAndOff(t *testing.T) {
	const text = "portico-text %REQ(:METHOD)% %REQ(:PATH)% %RESPONSE_CODE% %UPSTREAM_CLUSTER% 100%%"
	files := proxyConfigFiles("  accessLog:\n    format: Text\n    text: '" + text + "'\n")
	s := startStackWith(t, flushFast, files, quickstartBackends...)
	c := s.client(nil)
	s.routed(c, "http://127.0.0.1:8080/api/warmup", "localhost", "api")
	if code, _, err := s.do(http.MethodGet, "http://127.0.0.1:8080/api/text?id=1", "localhost"); err != nil || code != http.StatusOK {
		t.Fatalf("text request: %v %d", err, code)
	}
	lines := s.waitLines("/api/text?id=1", 1)
	if want := "portico-text GET /api/text?id=1 200 default/api/80 100%"; len(lines) != 1 || lines[0] != want {
		t.Fatalf("text lines %q, want [%q]", lines, want)
	}

	s.write("proxyconfig.yaml", proxyConfigFiles("  accessLog:\n    disabled: true\n")["proxyconfig.yaml"])
	s.waitListenerConfig("envoy.access_loggers.stdout", true)
	// New connections go to the new listeners.
	if code, _, err := s.do(http.MethodGet, "http://127.0.0.1:8080/api/off?id=1", "localhost"); err != nil || code != http.StatusOK {
		t.Fatalf("request with logs off: %v %d", err, code)
	}

	s.write("proxyconfig.yaml", proxyConfigFiles("  replicas: 1\n")["proxyconfig.yaml"])
	s.waitListenerConfig("envoy.access_loggers.stdout", false)
	if code, _, err := s.do(http.MethodGet, "http://127.0.0.1:8080/api/on?id=2", "localhost"); err != nil || code != http.StatusOK {
		t.Fatalf("request with logs back on: %v %d", err, code)
	}
	on := s.waitLines("/api/on?id=2", 1)
	var m map[string]any
	if err := json.Unmarshal([]byte(on[0]), &m); err != nil || m["path"] != "/api/on?id=2" {
		t.Errorf("line with the default format %q: %v", on[0], err)
	}
	for _, l := range s.accessLines() {
		if strings.Contains(l, "/api/off") {
			t.Errorf("a request sent with access logs off was logged: %q", l)
		}
	}
}

// envoyAccepts runs `envoy --mode validate` on a bootstrap with one
// listener whose connection manager logs with the text format, or with
// one JSON field of that format.
func envoyAccepts(t *testing.T, bin, dir, format string, asJSON bool) error {
	t.Helper()
	q, _ := json.Marshal(format)
	logFormat := fmt.Sprintf(`"text_format_source": {"inline_string": %s}`, q)
	if asJSON {
		logFormat = fmt.Sprintf(`"json_format": {"f": %s}`, q)
	}
	boot := fmt.Sprintf(`{"static_resources": {"listeners": [{"name": "l",
  "address": {"socket_address": {"address": "127.0.0.1", "port_value": 10000}},
  "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": {
    "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
    "stat_prefix": "l", "route_config": {"name": "r"},
    "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
    "access_log": [{"name": "envoy.access_loggers.stdout", "typed_config": {
      "@type": "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog",
      "log_format": {%s}}}]}}]}]}]}}`, logFormat)
	path := filepath.Join(dir, "bootstrap.json")
	if err := os.WriteFile(path, []byte(boot), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--mode", "validate", "--config-path", path, "--log-level", "critical", "--disable-hot-restart").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// TestObservabilityAccessLogFormatsEnvoyAccepts checks the access-log
// format validator against Envoy's own parser (validation mode): every
// operator Portico supports, and formats Portico accepts, are accepted by
// Envoy, as a text format and as a JSON field. Formats Portico refuses
// are mostly refused by Envoy too; those it would take are logged.
func TestObservabilityAccessLogFormatsEnvoyAccepts(t *testing.T) {
	bin := testenv.RequireEnvoy(t)
	dir := t.TempDir()
	accepted := []string{
		"plain text", "100%% sure", "%%%%",
		"[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%\" %RESPONSE_CODE% %RESPONSE_FLAGS%",
		"%START_TIME(%Y-%m-%dT%H:%M:%S.%3f%z)%", "%START_TIME(%s)%", "%START_TIME(%%)%", "%START_TIME(%-d %e %9f %Ey)%",
		"%REQ(USER-AGENT):10% %RESP(content-type)% %TRAILER(grpc-message):100%",
		"%GRPC_STATUS(NUMBER)% %GRPC_STATUS(SNAKE_STRING)% %GRPC_STATUS(CAMEL_STRING)%",
		"%DYNAMIC_METADATA(envoy.filters.http.rbac:shadow_effective_policy_id):64%", "%DYNAMIC_METADATA(a)%",
		"%UPSTREAM_HOST%%%%DOWNSTREAM_REMOTE_ADDRESS%", "%REQ(:PATH):65536%", "%REQ(x-a?x-b)%",
	}
	for _, op := range gatewayapi.AccessLogOperators() {
		switch op {
		case "REQ", "RESP", "TRAILER":
			accepted = append(accepted, "%"+op+"(x-test)%")
		case "DYNAMIC_METADATA":
		default:
			accepted = append(accepted, "%"+op+"%")
		}
	}
	for _, f := range accepted {
		if err := gatewayapi.ValidateAccessLogFormat(f); err != nil {
			t.Errorf("Portico refuses %q: %v", f, err)
			continue
		}
		for _, asJSON := range []bool{false, true} {
			if err := envoyAccepts(t, bin, dir, f, asJSON); err != nil {
				t.Errorf("Envoy refuses %q (JSON field: %v), which Portico accepts: %v", f, asJSON, err)
			}
		}
	}
	for _, f := range []string{
		"%", "50%", "%FOO%", "%protocol%", "%PROTOCOL", "%PROTOCOL:3%", "%DURATION(x)%", "%REQ%", "%REQ()%",
		"%REQ(a?b?c)%", "%REQ(X):abc%", "%START_TIME(%Y%n)%", "%UPSTREAM_HOST%%", "%GRPC_STATUS(X)%",
		"%REQ(?)%", "%PROTOCOL()%", "%REQ(a b)%", "%FILTER_STATE(x)%",
	} {
		if err := gatewayapi.ValidateAccessLogFormat(f); err == nil {
			t.Errorf("Portico accepts %q", f)
		}
		if err := envoyAccepts(t, bin, dir, f, false); err == nil {
			t.Logf("%q: refused by Portico, accepted by Envoy", f)
		}
	}
}
