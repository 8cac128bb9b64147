package gatewayapi

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/ir"
)

// Proxy settings: the access log, timeouts and circuit breakers of a
// Gateway's effective ProxyConfig go into its IR (ir.ProxySettings, for
// every listener and cluster); its overload settings go into the
// proxies' bootstrap (package infra). proxySettings validates them all
// first. A value Envoy would refuse, or that would make it misbehave, is
// refused with a message naming the field: the Gateway is Accepted=False
// with reason InvalidParameters, as for a ProxyConfig outside its class's
// bounds (infra_limits.go), and the settings it gets are the defaults, so
// that no configuration Envoy would NACK is ever built from them.
//
// Access-log formats are checked against the grammar of Envoy's
// substitution formatter and a list of the command operators Portico
// supports (AccessLogOperators), a subset of Envoy's: a format is a text
// in which "%%" is a literal "%" and every other "%" starts a command
// operator, %NAME%, %NAME(ARGUMENT)% or %NAME(ARGUMENT):LENGTH%. What the
// check accepts, Envoy accepts (test/envoy checks it against Envoy's
// validation mode); it refuses some formats Envoy would take (unlisted
// operators, ")" in arguments, lengths where an operator has none).

// opSyntax is how a command operator takes an argument and a length.
type opSyntax int

const (
	// opPlain: %NAME%, no argument, no length.
	opPlain opSyntax = iota
	// opHeader: %NAME(header)% or %NAME(header?alternative)%, with an
	// optional length.
	opHeader
	// opTime: %NAME% or %NAME(strftime format)%.
	opTime
	// opGRPCStatus: %NAME% or %NAME(CAMEL_STRING|SNAKE_STRING|NUMBER)%.
	opGRPCStatus
	// opMetadata: %NAME(namespace:key:...)%, with an optional length.
	opMetadata
)

// accessLogOperators are the command operators an access-log format may
// use (Envoy's documentation describes each).
var accessLogOperators = map[string]opSyntax{
	"REQ": opHeader, "RESP": opHeader, "TRAILER": opHeader,
	"START_TIME":       opTime,
	"GRPC_STATUS":      opGRPCStatus,
	"DYNAMIC_METADATA": opMetadata,

	"PROTOCOL": opPlain, "UPSTREAM_PROTOCOL": opPlain,
	"RESPONSE_CODE": opPlain, "RESPONSE_CODE_DETAILS": opPlain, "CONNECTION_TERMINATION_DETAILS": opPlain,
	"RESPONSE_FLAGS": opPlain, "RESPONSE_FLAGS_LONG": opPlain, "GRPC_STATUS_NUMBER": opPlain,
	"BYTES_RECEIVED": opPlain, "BYTES_SENT": opPlain,
	"UPSTREAM_WIRE_BYTES_SENT": opPlain, "UPSTREAM_WIRE_BYTES_RECEIVED": opPlain,
	"UPSTREAM_HEADER_BYTES_SENT": opPlain, "UPSTREAM_HEADER_BYTES_RECEIVED": opPlain,
	"DOWNSTREAM_WIRE_BYTES_SENT": opPlain, "DOWNSTREAM_WIRE_BYTES_RECEIVED": opPlain,
	"DOWNSTREAM_HEADER_BYTES_SENT": opPlain, "DOWNSTREAM_HEADER_BYTES_RECEIVED": opPlain,
	"REQUEST_HEADERS_BYTES": opPlain, "RESPONSE_HEADERS_BYTES": opPlain, "RESPONSE_TRAILERS_BYTES": opPlain,
	"DURATION": opPlain, "REQUEST_DURATION": opPlain, "REQUEST_TX_DURATION": opPlain,
	"RESPONSE_DURATION": opPlain, "RESPONSE_TX_DURATION": opPlain, "DOWNSTREAM_HANDSHAKE_DURATION": opPlain,
	"ROUTE_NAME": opPlain, "VIRTUAL_CLUSTER_NAME": opPlain,
	"UPSTREAM_HOST": opPlain, "UPSTREAM_CLUSTER": opPlain, "UPSTREAM_REQUEST_ATTEMPT_COUNT": opPlain,
	"UPSTREAM_LOCAL_ADDRESS": opPlain, "UPSTREAM_LOCAL_ADDRESS_WITHOUT_PORT": opPlain, "UPSTREAM_LOCAL_PORT": opPlain,
	"UPSTREAM_REMOTE_ADDRESS": opPlain, "UPSTREAM_REMOTE_ADDRESS_WITHOUT_PORT": opPlain, "UPSTREAM_REMOTE_PORT": opPlain,
	"UPSTREAM_TRANSPORT_FAILURE_REASON": opPlain, "UPSTREAM_CONNECTION_ID": opPlain,
	"DOWNSTREAM_LOCAL_ADDRESS": opPlain, "DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT": opPlain, "DOWNSTREAM_LOCAL_PORT": opPlain,
	"DOWNSTREAM_REMOTE_ADDRESS": opPlain, "DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT": opPlain, "DOWNSTREAM_REMOTE_PORT": opPlain,
	"DOWNSTREAM_DIRECT_REMOTE_ADDRESS": opPlain, "DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT": opPlain,
	"DOWNSTREAM_DIRECT_REMOTE_PORT": opPlain, "DOWNSTREAM_TRANSPORT_FAILURE_REASON": opPlain,
	"REQUESTED_SERVER_NAME": opPlain, "DOWNSTREAM_TLS_VERSION": opPlain, "DOWNSTREAM_TLS_CIPHER": opPlain,
	"DOWNSTREAM_TLS_SESSION_ID": opPlain, "DOWNSTREAM_PEER_SUBJECT": opPlain, "DOWNSTREAM_PEER_ISSUER": opPlain,
	"DOWNSTREAM_PEER_URI_SAN": opPlain, "DOWNSTREAM_PEER_DNS_SAN": opPlain, "DOWNSTREAM_PEER_FINGERPRINT_256": opPlain,
	"DOWNSTREAM_PEER_SERIAL": opPlain, "DOWNSTREAM_LOCAL_SUBJECT": opPlain, "DOWNSTREAM_LOCAL_URI_SAN": opPlain,
	"CONNECTION_ID": opPlain, "STREAM_ID": opPlain, "UNIQUE_ID": opPlain, "TRACE_ID": opPlain,
	"HOSTNAME": opPlain, "LOCAL_REPLY_BODY": opPlain,
}

// AccessLogOperators are the command operators access-log formats may
// use, sorted.
func AccessLogOperators() []string { return slices.Sorted(maps.Keys(accessLogOperators)) }

// maxOperatorLength is the largest :LENGTH of a command operator.
const maxOperatorLength = 1 << 16

// ValidateAccessLogFormat checks an access-log format (a text line or the
// value of a JSON field): UTF-8 without control characters (it may end
// with one newline), and command operators Portico supports, well formed. The
// error says what is wrong and where (a byte offset).
func ValidateAccessLogFormat(format string) error {
	if !utf8.ValidString(format) {
		return fmt.Errorf("not valid UTF-8")
	}
	for i := 0; i < len(format); {
		c := format[i]
		if c != '%' {
			if c < 0x20 || c == 0x7f {
				if c == '\n' && i == len(format)-1 {
					return nil
				}
				return fmt.Errorf("control character %q at offset %d", c, i)
			}
			i++
			continue
		}
		if i+1 < len(format) && format[i+1] == '%' {
			i += 2 // a literal %
			continue
		}
		n, err := commandOperator(format[i:])
		if err != nil {
			return fmt.Errorf("%w at offset %d", err, i)
		}
		i += n
	}
	return nil
}

// commandOperator checks the command operator s starts with ("%NAME..."),
// and returns its length. The argument ends at the first ')': Envoy's
// parser takes the shortest argument that makes a well-formed operator,
// which is that one when the rest is well formed.
func commandOperator(s string) (int, error) {
	j := 1
	for j < len(s) && (s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9' || s[j] == '_') {
		j++
	}
	name := s[1:j]
	if name == "" {
		return 0, fmt.Errorf("a %% that starts no command operator (write %%%% for a literal %%)")
	}
	syntax, known := accessLogOperators[name]
	if !known {
		return 0, fmt.Errorf("unknown command operator %%%s%%", name)
	}
	var arg string
	hasArg := false
	if j < len(s) && s[j] == '(' {
		end := strings.IndexByte(s[j:], ')')
		if end < 0 {
			return 0, fmt.Errorf("%%%s(: no closing parenthesis", name)
		}
		arg, hasArg = s[j+1:j+end], true
		j += end + 1
	}
	hasLength := false
	if j < len(s) && s[j] == ':' {
		k := j + 1
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		n, err := strconv.Atoi(s[j+1 : k])
		if err != nil || n < 1 || n > maxOperatorLength {
			return 0, fmt.Errorf("%%%s: the length after ':' must be a number from 1 to %d", name, maxOperatorLength)
		}
		hasLength, j = true, k
	}
	if j >= len(s) || s[j] != '%' {
		return 0, fmt.Errorf("%%%s: no closing %%", name)
	}
	if err := checkOperatorArg(name, syntax, arg, hasArg, hasLength); err != nil {
		return 0, err
	}
	return j + 1, nil
}

func checkOperatorArg(name string, syntax opSyntax, arg string, hasArg, hasLength bool) error {
	if hasLength && syntax != opHeader && syntax != opMetadata {
		return fmt.Errorf("%%%s%% takes no length", name)
	}
	switch syntax {
	case opPlain:
		if hasArg {
			return fmt.Errorf("%%%s%% takes no argument", name)
		}
	case opHeader:
		main, alt, two := strings.Cut(arg, "?")
		if !validLogHeader(main) || (two && !validLogHeader(alt)) {
			return fmt.Errorf("%%%s(%s)%%: the argument must be a header name, or two separated by '?'", name, arg)
		}
	case opTime:
		if hasArg {
			if err := checkTimeFormat(arg); err != nil {
				return fmt.Errorf("%%%s(%s)%%: %w", name, arg, err)
			}
		}
	case opGRPCStatus:
		if hasArg && arg != "CAMEL_STRING" && arg != "SNAKE_STRING" && arg != "NUMBER" {
			return fmt.Errorf("%%%s(%s)%%: the argument must be CAMEL_STRING, SNAKE_STRING or NUMBER", name, arg)
		}
	case opMetadata:
		for _, seg := range strings.Split(arg, ":") {
			if seg == "" || strings.ContainsFunc(seg, func(r rune) bool {
				return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-')
			}) {
				return fmt.Errorf("%%%s(%s)%%: the argument must be a namespace and keys separated by ':' (letters, digits, '_', '.', '-')", name, arg)
			}
		}
	}
	return nil
}

// validLogHeader: a header name (RFC 9110 token), or a pseudo-header.
func validLogHeader(h string) bool {
	h = strings.TrimPrefix(h, ":")
	if h == "" || len(h) > ir.MaxHeaderNameBytes {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// checkTimeFormat checks the strftime format of %START_TIME(...)%:
// printable characters, and conversions of strftime (no %n or %t: one
// line per request) or Envoy's %f, %1f..%9f (fractions of a second) and
// %s (seconds since the epoch).
func checkTimeFormat(f string) error {
	const conversions = "aAbBcCdDeFgGhHIjmMprRSTuUVwWxXyYzZfs"
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("control character %q", c)
		}
		if c != '%' {
			continue
		}
		i++
		if i < len(f) && f[i] == '%' {
			continue // a literal %
		}
		for i < len(f) && strings.IndexByte("-_0^#", f[i]) >= 0 {
			i++
		}
		for i < len(f) && f[i] >= '0' && f[i] <= '9' {
			i++
		}
		if i < len(f) && (f[i] == 'E' || f[i] == 'O') {
			i++
		}
		if i >= len(f) || strings.IndexByte(conversions, f[i]) < 0 {
			return fmt.Errorf("unsupported time conversion at offset %d", i)
		}
	}
	return nil
}

// proxySettings validates the access log, timeouts, circuit breakers and
// overload of an effective ProxyConfig spec (nil: none) and returns the
// settings of the Gateway's IR (nil: all defaults). On a problem the
// settings are the defaults.
func proxySettings(pc *v1alpha1.ProxyConfigSpec) (*ir.ProxySettings, *problem) {
	if pc == nil {
		return nil, nil
	}
	refuse := func(field, format string, args ...any) (*ir.ProxySettings, *problem) {
		return nil, &problem{string(gwv1.GatewayReasonInvalidParameters),
			fmt.Sprintf("ProxyConfig spec.%s: %s", field, fmt.Sprintf(format, args...))}
	}
	s := &ir.ProxySettings{}
	if a := pc.AccessLog; a != nil {
		al, field, err := accessLogSettings(a)
		if err != nil {
			return refuse(field, "%v", err)
		}
		s.AccessLog = al
	}
	if t := pc.Timeouts; t != nil {
		for _, d := range []struct {
			field    string
			in       *metav1.Duration
			out      **time.Duration
			positive bool
		}{
			{"timeouts.requestHeaders", t.RequestHeaders, &s.Timeouts.RequestHeaders, false},
			{"timeouts.streamIdle", t.StreamIdle, &s.Timeouts.StreamIdle, false},
			{"timeouts.connectionIdle", t.ConnectionIdle, &s.Timeouts.ConnectionIdle, false},
			{"timeouts.upstreamConnect", t.UpstreamConnect, &s.Timeouts.UpstreamConnect, true},
		} {
			if d.in == nil {
				continue
			}
			v := d.in.Duration
			switch {
			case v < 0:
				return refuse(d.field, "%s is negative", v)
			case v == 0 && d.positive:
				return refuse(d.field, "must be positive: connecting to a backend cannot be unbounded")
			}
			*d.out = &v
		}
	}
	if cb := pc.CircuitBreakers; cb != nil {
		for _, c := range []struct {
			field string
			in    *int32
			out   **uint32
			min   int32
		}{
			{"circuitBreakers.maxConnections", cb.MaxConnections, &s.CircuitBreakers.MaxConnections, 1},
			{"circuitBreakers.maxPendingRequests", cb.MaxPendingRequests, &s.CircuitBreakers.MaxPendingRequests, 1},
			{"circuitBreakers.maxRequests", cb.MaxRequests, &s.CircuitBreakers.MaxRequests, 1},
			{"circuitBreakers.maxRetries", cb.MaxRetries, &s.CircuitBreakers.MaxRetries, 0},
		} {
			if c.in == nil {
				continue
			}
			if *c.in < c.min {
				return refuse(c.field, "%d is less than %d", *c.in, c.min)
			}
			v := uint32(*c.in)
			*c.out = &v
		}
	}
	if o := pc.Overload; o != nil {
		if p := o.MaxHeapPercent; p != nil && (*p < 10 || *p > 100) {
			return refuse("overload.maxHeapPercent", "%d is not between 10 and 100", *p)
		}
		if n := o.MaxDownstreamConnections; n != nil && *n < 1 {
			return refuse("overload.maxDownstreamConnections", "%d is less than 1", *n)
		}
	}
	if *s == (ir.ProxySettings{}) {
		return nil, nil
	}
	return s, nil
}

// accessLogSettings validates an access-log configuration; on error,
// field names the offending field.
func accessLogSettings(a *v1alpha1.ProxyAccessLog) (*ir.AccessLog, string, error) {
	if a.Disabled {
		return &ir.AccessLog{Disabled: true}, "", nil
	}
	out := &ir.AccessLog{}
	switch a.Format {
	case "", v1alpha1.AccessLogJSON:
		out.Format = ir.AccessLogJSON
		if a.Text != "" {
			return nil, "accessLog.text", fmt.Errorf("a text format needs format Text")
		}
		if len(a.JSON) > ir.MaxAccessLogFields {
			return nil, "accessLog.json", fmt.Errorf("%d fields, more than %d", len(a.JSON), ir.MaxAccessLogFields)
		}
		for _, name := range slices.Sorted(maps.Keys(a.JSON)) {
			field := fmt.Sprintf("accessLog.json[%q]", name)
			value := a.JSON[name]
			switch {
			case name == "":
				return nil, "accessLog.json", fmt.Errorf("a field name is empty")
			case len(name) > ir.MaxAccessLogNameBytes:
				return nil, "accessLog.json", fmt.Errorf("a field name is longer than %d bytes", ir.MaxAccessLogNameBytes)
			case value == "":
				return nil, field, fmt.Errorf("the value is empty")
			case len(value) > ir.MaxAccessLogValueBytes:
				return nil, field, fmt.Errorf("the value is longer than %d bytes", ir.MaxAccessLogValueBytes)
			case strings.HasSuffix(value, "\n"):
				return nil, field, fmt.Errorf("the value ends with a newline")
			}
			if err := ValidateAccessLogFormat(value); err != nil {
				return nil, field, err
			}
			out.JSON = append(out.JSON, ir.AccessLogField{Name: name, Value: value})
		}
	case v1alpha1.AccessLogText:
		out.Format = ir.AccessLogText
		if len(a.JSON) > 0 {
			return nil, "accessLog.json", fmt.Errorf("JSON fields need format JSON")
		}
		if len(a.Text) > ir.MaxAccessLogTextBytes {
			return nil, "accessLog.text", fmt.Errorf("longer than %d bytes", ir.MaxAccessLogTextBytes)
		}
		if err := ValidateAccessLogFormat(a.Text); err != nil {
			return nil, "accessLog.text", err
		}
		out.Text = a.Text
	default:
		return nil, "accessLog.format", fmt.Errorf("%q is neither JSON nor Text", a.Format)
	}
	return out, "", nil
}
