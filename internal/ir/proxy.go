package ir

import "time"

// ProxySettings are the settings of a Gateway's proxies that apply to all
// of its listeners and clusters: access logs, timeouts and circuit
// breakers, from the Gateway's effective ProxyConfig. A nil
// *ProxySettings, and a nil field in it, mean the data plane's defaults
// (package xds/translate documents them). The Gateway API stage fills it
// only with values it has validated (gatewayapi proxysettings.go).
type ProxySettings struct {
	// AccessLog nil: JSON lines with the default fields.
	AccessLog       *AccessLog
	Timeouts        Timeouts
	CircuitBreakers CircuitBreakers
}

// AccessLogFormat is the encoding of access-log lines.
type AccessLogFormat string

const (
	AccessLogJSON AccessLogFormat = "JSON"
	AccessLogText AccessLogFormat = "Text"
)

// AccessLog is how a proxy logs requests to its standard output.
type AccessLog struct {
	// Disabled: no access log at all; the other fields are ignored.
	Disabled bool
	// Format "" is AccessLogJSON.
	Format AccessLogFormat
	// JSON are the fields of a JSON line, sorted by Name and unique; empty:
	// the default fields. Values are Envoy command operators.
	JSON []AccessLogField
	// Text is the format of a text line (Envoy command operators); empty:
	// the data plane's default text format.
	Text string
}

// AccessLogField is one field of a JSON access-log line.
type AccessLogField struct {
	Name  string
	Value string
}

// Timeouts of downstream and upstream connections and streams; nil is the
// default, 0 disables the timeout (UpstreamConnect is never 0).
type Timeouts struct {
	// RequestHeaders: a client must send its request headers within it.
	RequestHeaders *time.Duration
	// StreamIdle: a stream (request) with no activity is reset.
	StreamIdle *time.Duration
	// ConnectionIdle: a client connection with no stream is closed.
	ConnectionIdle *time.Duration
	// UpstreamConnect bounds connecting to a backend endpoint.
	UpstreamConnect *time.Duration
}

// CircuitBreakers are the thresholds of every cluster (per proxy); nil is
// the default.
type CircuitBreakers struct {
	MaxConnections     *uint32
	MaxPendingRequests *uint32
	MaxRequests        *uint32
	MaxRetries         *uint32
}
