package translate

import (
	"fmt"
	"strings"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/portico-dev/portico/internal/ir"
)

// stdoutAccessLogger is the name of Envoy's standard-output access logger.
const stdoutAccessLogger = "envoy.access_loggers.stdout"

// DefaultAccessLogFields are the fields of the JSON access-log line of a
// Gateway whose ProxyConfig names none, sorted by name: one line per
// request on the proxy's standard output. Values are Envoy command
// operators; durations (milliseconds), byte counts and the status code
// are JSON numbers, and a value a request does not have (a header it did
// not send, no upstream) is null.
var DefaultAccessLogFields = []ir.AccessLogField{
	{Name: "authority", Value: "%REQ(:AUTHORITY)%"},
	{Name: "bytes_received", Value: "%BYTES_RECEIVED%"},
	{Name: "bytes_sent", Value: "%BYTES_SENT%"},
	{Name: "duration", Value: "%DURATION%"},
	{Name: "method", Value: "%REQ(:METHOD)%"},
	// The path the client sent, before any rewrite.
	{Name: "path", Value: "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%"},
	{Name: "protocol", Value: "%PROTOCOL%"},
	{Name: "request_id", Value: "%REQ(X-REQUEST-ID)%"},
	{Name: "response_code", Value: "%RESPONSE_CODE%"},
	{Name: "response_flags", Value: "%RESPONSE_FLAGS%"},
	{Name: "route_name", Value: "%ROUTE_NAME%"},
	{Name: "start_time", Value: "%START_TIME%"},
	{Name: "upstream_cluster", Value: "%UPSTREAM_CLUSTER%"},
	{Name: "upstream_host", Value: "%UPSTREAM_HOST%"},
	{Name: "upstream_service_time", Value: "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%"},
	{Name: "user_agent", Value: "%REQ(USER-AGENT)%"},
	{Name: "x_forwarded_for", Value: "%REQ(X-FORWARDED-FOR)%"},
}

// accessLogs are the access loggers of every HTTP connection manager of
// the Gateway: one writing to standard output in the format of s, or none
// when s disables them. The formats are used as the Gateway API stage
// validated them.
func accessLogs(s *ir.AccessLog) ([]*accesslogv3.AccessLog, error) {
	if s != nil && s.Disabled {
		return nil, nil
	}
	out := &streamv3.StdoutAccessLog{}
	switch {
	case s != nil && s.Format == ir.AccessLogText:
		if s.Text != "" {
			text := s.Text
			if !strings.HasSuffix(text, "\n") {
				text += "\n" // one line per request
			}
			out.AccessLogFormat = &streamv3.StdoutAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
				Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{
					Specifier: &corev3.DataSource_InlineString{InlineString: text},
				}},
			}}
		}
		// No format: Envoy's default text format.
	case s == nil || s.Format == "" || s.Format == ir.AccessLogJSON:
		fields := DefaultAccessLogFields
		if s != nil && len(s.JSON) > 0 {
			fields = s.JSON
		}
		m := make(map[string]*structpb.Value, len(fields))
		for _, f := range fields {
			m[f.Name] = structpb.NewStringValue(f.Value)
		}
		out.AccessLogFormat = &streamv3.StdoutAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
			Format: &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: &structpb.Struct{Fields: m}},
		}}
	default:
		return nil, fmt.Errorf("access log: unknown format %q", s.Format)
	}
	a, err := toAny("stdout access log", out)
	if err != nil {
		return nil, err
	}
	return []*accesslogv3.AccessLog{{
		Name:       stdoutAccessLogger,
		ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: a},
	}}, nil
}
