package ir

// Limits of the data plane that the Gateway API stage enforces per object,
// so that the xDS stage never meets IR that Envoy would refuse.
const (
	// MaxHeaderValueBytes is the longest header value Envoy accepts in a
	// header to add (envoy.config.core.v3.HeaderValue.value).
	MaxHeaderValueBytes = 16384
	// MaxHeaderNameBytes is the longest header name Portico accepts.
	MaxHeaderNameBytes = 256
)

// Limits of access-log formats (ProxyConfig accessLog).
const (
	// MaxAccessLogFields is the most fields a JSON access log has.
	MaxAccessLogFields = 64
	// MaxAccessLogValueBytes is the longest value of a JSON access-log
	// field, and MaxAccessLogNameBytes the longest name.
	MaxAccessLogValueBytes = 1024
	MaxAccessLogNameBytes  = 256
	// MaxAccessLogTextBytes is the longest text access-log format.
	MaxAccessLogTextBytes = 4096
)
