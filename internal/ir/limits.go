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
