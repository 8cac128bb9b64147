package translate

import (
	"reflect"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/ir"
)

// Defaults of the settings a Gateway's ProxyConfig leaves unset
// (ir.ProxySettings).
const (
	// DefaultRequestHeadersTimeout: a client must send its request
	// headers within it (slow-loris protection; Envoy's own default is
	// none).
	DefaultRequestHeadersTimeout = 10 * time.Second
	// DefaultStreamIdleTimeout resets a request with no activity (Envoy's
	// default).
	DefaultStreamIdleTimeout = 5 * time.Minute
	// DefaultConnectionIdleTimeout closes client connections with no
	// active stream (Envoy's default).
	DefaultConnectionIdleTimeout = time.Hour
	// DefaultUpstreamConnectTimeout bounds the TCP (and TLS) connect to an
	// endpoint.
	DefaultUpstreamConnectTimeout = 5 * time.Second
	// Circuit-breaker thresholds of every cluster, per proxy: Envoy's
	// defaults, written out so that the configuration says what applies.
	DefaultMaxConnections     = 1024
	DefaultMaxPendingRequests = 1024
	DefaultMaxRequests        = 1024
	DefaultMaxRetries         = 3
)

// settings are the parts of every listener and cluster that come from
// ir.ProxySettings, built once per translation and shared (never
// modified): the messages are packed or encoded when used.
type settings struct {
	accessLogs                 []*accesslogv3.AccessLog
	requestHeaders, streamIdle *durationpb.Duration
	connectionIdle             *durationpb.Duration
	connectTimeout             *durationpb.Duration
	circuitBreakers            *clusterv3.CircuitBreakers
}

// newSettings resolves s (nil: all defaults).
func newSettings(s *ir.ProxySettings) (*settings, error) {
	if s == nil {
		s = &ir.ProxySettings{}
	}
	out := &settings{}
	var err error
	if out.accessLogs, err = accessLogs(s.AccessLog); err != nil {
		return nil, err
	}
	t := s.Timeouts
	out.requestHeaders = durationOr(t.RequestHeaders, DefaultRequestHeadersTimeout)
	out.streamIdle = durationOr(t.StreamIdle, DefaultStreamIdleTimeout)
	out.connectionIdle = durationOr(t.ConnectionIdle, DefaultConnectionIdleTimeout)
	connect := DefaultUpstreamConnectTimeout
	if t.UpstreamConnect != nil && *t.UpstreamConnect > 0 {
		connect = *t.UpstreamConnect
	}
	out.connectTimeout = durationpb.New(connect)
	cb := s.CircuitBreakers
	out.circuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
		Priority:           corev3.RoutingPriority_DEFAULT,
		MaxConnections:     wrapperspb.UInt32(uint32Or(cb.MaxConnections, DefaultMaxConnections)),
		MaxPendingRequests: wrapperspb.UInt32(uint32Or(cb.MaxPendingRequests, DefaultMaxPendingRequests)),
		MaxRequests:        wrapperspb.UInt32(uint32Or(cb.MaxRequests, DefaultMaxRequests)),
		MaxRetries:         wrapperspb.UInt32(uint32Or(cb.MaxRetries, DefaultMaxRetries)),
	}}}
	return out, nil
}

// durationOr is d (0 disables the timeout), or def when d is nil; a
// negative d, which the Gateway API stage refuses, is the default too.
func durationOr(d *time.Duration, def time.Duration) *durationpb.Duration {
	if d != nil && *d >= 0 {
		return durationpb.New(*d)
	}
	return durationpb.New(def)
}

func uint32Or(v *uint32, def uint32) uint32 {
	if v != nil {
		return *v
	}
	return def
}

// sameSettings reports whether two Gateways' settings translate alike; a
// Translator's memory of a Gateway is valid only for the settings it was
// built with.
func sameSettings(a, b *ir.ProxySettings) bool {
	return a == b || reflect.DeepEqual(a, b)
}
