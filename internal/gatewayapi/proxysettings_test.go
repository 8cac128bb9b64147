package gatewayapi

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/ir"
	xdstranslate "github.com/portico-dev/portico/internal/xds/translate"
)

// Formats Envoy accepts and Portico too, and formats Portico refuses
// (Envoy refuses most of them; test/envoy checks both lists against
// Envoy).
var (
	acceptedAccessLogFormats = []string{
		"",
		"plain text",
		"100%% sure",
		"%START_TIME(%%n)%", // a literal "%n" (the fuzzer's find: the oracle took it for a newline)
		"%PROTOCOL%",
		"[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%\" %RESPONSE_CODE% %RESPONSE_FLAGS%\n",
		"%START_TIME(%Y-%m-%dT%H:%M:%S.%3f%z)%",
		"%START_TIME(%s)% %START_TIME(%%)%",
		"%REQ(USER-AGENT):10% %RESP(content-type)% %TRAILER(grpc-message):100%",
		"%GRPC_STATUS% %GRPC_STATUS(NUMBER)% %GRPC_STATUS_NUMBER%",
		"%DYNAMIC_METADATA(envoy.filters.http.rbac:shadow_effective_policy_id):64%",
		"%UPSTREAM_HOST%%%%DOWNSTREAM_REMOTE_ADDRESS%",
		"%ROUTE_NAME% %UPSTREAM_CLUSTER% %DURATION% %BYTES_SENT% %CONNECTION_ID% %UNIQUE_ID%",
	}
	refusedAccessLogFormats = []string{
		"%",
		"50%",
		"%FOO%",
		"%protocol%",
		"%PROTOCOL",
		"%PROTOCOL:3%",
		"%PROTOCOL()%",
		"%DURATION(x)%",
		"%REQ%",
		"%REQ()%",
		"%REQ(?)%",
		"%REQ(a?b?c)%",
		"%REQ(a b)%",
		"%REQ(X):abc%",
		"%REQ(X):0%",
		"%REQ(X",
		"%START_TIME(%Y%n)%",
		"%START_TIME(%Y):5%",
		"%START_TIME(%)%",
		"%GRPC_STATUS(X)%",
		"%DYNAMIC_METADATA%",
		"%DYNAMIC_METADATA(a::b)%",
		"%UPSTREAM_HOST%%",
		"two\nlines",
		"tab\there",
		"%FILTER_STATE(x)%",
		"%ENVIRONMENT(HOME)%",
	}
)

func TestValidateAccessLogFormat(t *testing.T) {
	for _, f := range acceptedAccessLogFormats {
		if err := ValidateAccessLogFormat(f); err != nil {
			t.Errorf("%q refused: %v", f, err)
		}
		if err := envoyShaped(f); err != nil {
			t.Errorf("%q: not Envoy-shaped: %v", f, err)
		}
	}
	for _, f := range refusedAccessLogFormats {
		if err := ValidateAccessLogFormat(f); err == nil {
			t.Errorf("%q accepted", f)
		}
	}
	if ops := AccessLogOperators(); len(ops) != len(accessLogOperators) || ops[0] != "BYTES_RECEIVED" {
		t.Errorf("AccessLogOperators() = %v", ops)
	}
}

// envoyCommand is the regular expression with which Envoy's substitution
// format parser finds a command operator at a '%' (RE2, like Go's).
var envoyCommand = regexp.MustCompile(`^%((?:[A-Z]|[0-9]|_)+)(?:\((.*?)\))?(?::([0-9]+))?%`)

// envoyShaped tokenizes format as Envoy's parser does, independently of
// ValidateAccessLogFormat, and checks each command operator against the
// syntax rules Envoy applies to it.
func envoyShaped(format string) error {
	for pos := 0; pos < len(format); {
		if format[pos] != '%' {
			pos++
			continue
		}
		if pos+1 < len(format) && format[pos+1] == '%' {
			pos += 2
			continue
		}
		m := envoyCommand.FindStringSubmatchIndex(format[pos:])
		if m == nil {
			return fmt.Errorf("no command at %d", pos)
		}
		sub := func(i int) (string, bool) {
			if m[2*i] < 0 {
				return "", false
			}
			return format[pos+m[2*i] : pos+m[2*i+1]], true
		}
		name, _ := sub(1)
		arg, _ := sub(2)
		_, hasLength := sub(3)
		syntax, ok := accessLogOperators[name]
		if !ok {
			return fmt.Errorf("%s is not a supported operator", name)
		}
		switch {
		case syntax == opPlain && (arg != "" || hasLength):
			return fmt.Errorf("%s takes no argument or length", name)
		case (syntax == opHeader || syntax == opMetadata) && arg == "":
			return fmt.Errorf("%s requires an argument", name)
		case hasLength && syntax != opHeader && syntax != opMetadata:
			return fmt.Errorf("%s takes no length", name)
		case syntax == opHeader && strings.Count(arg, "?") > 1:
			return fmt.Errorf("%s: more than one alternative header", name)
		// "%%" is a literal %: "%%n" is the text "%n", not a newline.
		case syntax == opTime && regexp.MustCompile(`%[-_0^#]*[1-9]*(E|O)?n`).MatchString(strings.ReplaceAll(arg, "%%", "")):
			return fmt.Errorf("%s: a newline in the time format", name)
		}
		pos += m[1]
	}
	return nil
}

// FuzzAccessLogFormat checks that the format validator never panics and
// that what it accepts Envoy's parser tokenizes into supported,
// well-formed operators, in a text and in a JSON field.
func FuzzAccessLogFormat(f *testing.F) {
	for _, s := range acceptedAccessLogFormats {
		f.Add(s)
	}
	for _, s := range refusedAccessLogFormats {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, format string) {
		err := ValidateAccessLogFormat(format)
		if err != nil {
			return
		}
		if err := envoyShaped(format); err != nil {
			t.Fatalf("accepted %q, which Envoy would not parse alike: %v", format, err)
		}
		if strings.ContainsFunc(strings.TrimSuffix(format, "\n"), func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Fatalf("accepted control characters: %q", format)
		}
		// As a text format and as a JSON field, the settings translate.
		specs := []v1alpha1.ProxyAccessLog{{Format: v1alpha1.AccessLogText, Text: format}}
		if format != "" && !strings.HasSuffix(format, "\n") && len(format) <= ir.MaxAccessLogValueBytes {
			specs = append(specs, v1alpha1.ProxyAccessLog{JSON: map[string]string{"f": format}})
		}
		for _, a := range specs {
			s, p := proxySettings(&v1alpha1.ProxyConfigSpec{AccessLog: &a})
			if p != nil && len(format) <= ir.MaxAccessLogTextBytes {
				t.Fatalf("%+v refused: %s", a, p.message)
			}
			if _, err := xdstranslate.Translate(&ir.Gateway{Namespace: "ns", Name: "gw", Proxy: s}); err != nil {
				t.Fatalf("%+v: %v", a, err)
			}
		}
	})
}

func TestProxySettings(t *testing.T) {
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	i32 := func(v int32) *int32 { return &v }
	for _, tc := range []struct {
		name string
		spec v1alpha1.ProxyConfigSpec
		want *ir.ProxySettings
		// problem is a substring of the message; "" for none.
		problem string
	}{
		{name: "none", spec: v1alpha1.ProxyConfigSpec{Image: "x"}},
		{name: "disabled log", spec: v1alpha1.ProxyConfigSpec{AccessLog: &v1alpha1.ProxyAccessLog{Disabled: true, Text: "%BAD%"}},
			want: &ir.ProxySettings{AccessLog: &ir.AccessLog{Disabled: true}}},
		{name: "json", spec: v1alpha1.ProxyConfigSpec{AccessLog: &v1alpha1.ProxyAccessLog{JSON: map[string]string{"z": "%PROTOCOL%", "a": "%RESPONSE_CODE%"}}},
			want: &ir.ProxySettings{AccessLog: &ir.AccessLog{Format: ir.AccessLogJSON,
				JSON: []ir.AccessLogField{{Name: "a", Value: "%RESPONSE_CODE%"}, {Name: "z", Value: "%PROTOCOL%"}}}}},
		{name: "text", spec: v1alpha1.ProxyConfigSpec{AccessLog: &v1alpha1.ProxyAccessLog{Format: v1alpha1.AccessLogText, Text: "%PROTOCOL%"}},
			want: &ir.ProxySettings{AccessLog: &ir.AccessLog{Format: ir.AccessLogText, Text: "%PROTOCOL%"}}},
		{name: "bad text", spec: v1alpha1.ProxyConfigSpec{AccessLog: &v1alpha1.ProxyAccessLog{Format: v1alpha1.AccessLogText, Text: "%NOPE%"}},
			problem: "spec.accessLog.text: unknown command operator %NOPE% at offset 0"},
		{name: "bad json", spec: v1alpha1.ProxyConfigSpec{AccessLog: &v1alpha1.ProxyAccessLog{JSON: map[string]string{"ok": "%PROTOCOL%", "code": "%RESPONSE_CODE"}}},
			problem: `spec.accessLog.json["code"]: %RESPONSE_CODE: no closing %`},
		{name: "empty json value", spec: v1alpha1.ProxyConfigSpec{AccessLog: &v1alpha1.ProxyAccessLog{JSON: map[string]string{"a": ""}}},
			problem: `spec.accessLog.json["a"]: the value is empty`},
		{name: "empty json name", spec: v1alpha1.ProxyConfigSpec{AccessLog: &v1alpha1.ProxyAccessLog{JSON: map[string]string{"": "x"}}},
			problem: "spec.accessLog.json: a field name is empty"},
		{name: "long json value", spec: v1alpha1.ProxyConfigSpec{AccessLog: &v1alpha1.ProxyAccessLog{JSON: map[string]string{"a": strings.Repeat("x", 1025)}}},
			problem: "longer than 1024 bytes"},
		{name: "text in json", spec: v1alpha1.ProxyConfigSpec{AccessLog: &v1alpha1.ProxyAccessLog{Text: "%PROTOCOL%"}},
			problem: "spec.accessLog.text: a text format needs format Text"},
		{name: "json in text", spec: v1alpha1.ProxyConfigSpec{AccessLog: &v1alpha1.ProxyAccessLog{Format: v1alpha1.AccessLogText, JSON: map[string]string{"a": "b"}}},
			problem: "spec.accessLog.json: JSON fields need format JSON"},
		{name: "format", spec: v1alpha1.ProxyConfigSpec{AccessLog: &v1alpha1.ProxyAccessLog{Format: "XML"}},
			problem: `spec.accessLog.format: "XML" is neither JSON nor Text`},
		{name: "timeouts", spec: v1alpha1.ProxyConfigSpec{Timeouts: &v1alpha1.ProxyTimeouts{RequestHeaders: dur(0), UpstreamConnect: dur(time.Second)}},
			want: &ir.ProxySettings{Timeouts: ir.Timeouts{RequestHeaders: ptr(time.Duration(0)), UpstreamConnect: ptr(time.Second)}}},
		{name: "negative timeout", spec: v1alpha1.ProxyConfigSpec{Timeouts: &v1alpha1.ProxyTimeouts{StreamIdle: dur(-time.Second)}},
			problem: "spec.timeouts.streamIdle: -1s is negative"},
		{name: "no connect timeout", spec: v1alpha1.ProxyConfigSpec{Timeouts: &v1alpha1.ProxyTimeouts{UpstreamConnect: dur(0)}},
			problem: "spec.timeouts.upstreamConnect: must be positive"},
		{name: "circuit breakers", spec: v1alpha1.ProxyConfigSpec{CircuitBreakers: &v1alpha1.ProxyCircuitBreakers{MaxConnections: i32(5), MaxRetries: i32(0)}},
			want: &ir.ProxySettings{CircuitBreakers: ir.CircuitBreakers{MaxConnections: ptr(uint32(5)), MaxRetries: ptr(uint32(0))}}},
		{name: "zero connections", spec: v1alpha1.ProxyConfigSpec{CircuitBreakers: &v1alpha1.ProxyCircuitBreakers{MaxRequests: i32(0)}},
			problem: "spec.circuitBreakers.maxRequests: 0 is less than 1"},
		{name: "heap percent", spec: v1alpha1.ProxyConfigSpec{Overload: &v1alpha1.ProxyOverload{MaxHeapPercent: i32(5)}},
			problem: "spec.overload.maxHeapPercent: 5 is not between 10 and 100"},
		{name: "connections", spec: v1alpha1.ProxyConfigSpec{Overload: &v1alpha1.ProxyOverload{MaxDownstreamConnections: ptr(int64(0))}},
			problem: "spec.overload.maxDownstreamConnections: 0 is less than 1"},
		{name: "overload ok", spec: v1alpha1.ProxyConfigSpec{Overload: &v1alpha1.ProxyOverload{MaxHeapPercent: i32(80)}}},
	} {
		got, p := proxySettings(&tc.spec)
		switch {
		case tc.problem != "":
			if p == nil || !strings.Contains(p.message, tc.problem) || p.reason != string(gwv1.GatewayReasonInvalidParameters) {
				t.Errorf("%s: problem %+v, want InvalidParameters with %q", tc.name, p, tc.problem)
			}
			if got != nil {
				t.Errorf("%s: settings %+v with a problem, want the defaults", tc.name, got)
			}
		case p != nil:
			t.Errorf("%s: problem %s", tc.name, p.message)
		case fmt.Sprintf("%+v", settingsString(got)) != fmt.Sprintf("%+v", settingsString(tc.want)):
			t.Errorf("%s: settings %+v, want %+v", tc.name, settingsString(got), settingsString(tc.want))
		}
	}
}

// settingsString prints the pointers of settings as their values.
func settingsString(s *ir.ProxySettings) string {
	if s == nil {
		return "nil"
	}
	p := func(v any) string {
		switch x := v.(type) {
		case *time.Duration:
			if x != nil {
				return x.String()
			}
		case *uint32:
			if x != nil {
				return fmt.Sprint(*x)
			}
		}
		return "-"
	}
	t, c := s.Timeouts, s.CircuitBreakers
	return fmt.Sprintf("log=%+v timeouts=%s/%s/%s/%s cb=%s/%s/%s/%s", s.AccessLog,
		p(t.RequestHeaders), p(t.StreamIdle), p(t.ConnectionIdle), p(t.UpstreamConnect),
		p(c.MaxConnections), p(c.MaxPendingRequests), p(c.MaxRequests), p(c.MaxRetries))
}

// A Gateway whose class's ProxyConfig has invalid settings is
// Accepted=False with InvalidParameters naming the field and has no IR;
// valid settings reach its IR and the xDS stage. (How a Gateway's own
// ProxyConfig merges over its class's is boundedProxy's.)
func TestProxySettingsOfGateways(t *testing.T) {
	for _, tc := range []struct {
		name    string
		class   v1alpha1.ProxyConfigSpec
		problem string
	}{
		{name: "invalid", class: v1alpha1.ProxyConfigSpec{AccessLog: &v1alpha1.ProxyAccessLog{Format: v1alpha1.AccessLogText, Text: "%BYTES%"}},
			problem: "ProxyConfig spec.accessLog.text: unknown command operator %BYTES% at offset 0"},
		{name: "valid", class: v1alpha1.ProxyConfigSpec{AccessLog: &v1alpha1.ProxyAccessLog{Format: v1alpha1.AccessLogText, Text: "%BYTES_SENT%"}}},
	} {
		out := Translate(boundsSnapshot(&tc.class, v1alpha1.ProxyConfigSpec{}), Options{ControllerName: DefaultControllerName})
		var st *gwv1.GatewayStatus
		for _, s := range out.Statuses {
			if s.Gateway != nil && s.Name == "edge" {
				st = s.Gateway
			}
		}
		if st == nil {
			t.Fatalf("%s: no Gateway status", tc.name)
		}
		acc := apimeta.FindStatusCondition(st.Conditions, string(gwv1.GatewayConditionAccepted))
		if tc.problem != "" {
			if acc == nil || acc.Status != metav1.ConditionFalse || acc.Reason != string(gwv1.GatewayReasonInvalidParameters) || !strings.Contains(acc.Message, tc.problem) {
				t.Errorf("%s: Accepted %+v, want False/InvalidParameters with %q", tc.name, acc, tc.problem)
			}
			if len(out.Gateways) != 0 {
				t.Errorf("%s: an IR for a Gateway not accepted", tc.name)
			}
			continue
		}
		if acc == nil || acc.Status != metav1.ConditionTrue || len(out.Gateways) != 1 {
			t.Fatalf("%s: Accepted %+v, %d IRs", tc.name, acc, len(out.Gateways))
		}
		gw := out.Gateways[0]
		if gw.Proxy == nil || gw.Proxy.AccessLog == nil || gw.Proxy.AccessLog.Text != "%BYTES_SENT%" {
			t.Errorf("%s: IR settings %+v", tc.name, gw.Proxy)
		}
		if _, err := xdstranslate.Translate(gw); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
