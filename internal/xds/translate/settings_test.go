package translate

import (
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"

	"github.com/portico-dev/portico/internal/ir"
)

// allHCMs are the HTTP connection managers of every listener of res.
func allHCMs(t *testing.T, res *Resources) []*hcmv3.HttpConnectionManager {
	t.Helper()
	var out []*hcmv3.HttpConnectionManager
	for _, r := range res.Listeners {
		for _, fc := range r.(*listenerv3.Listener).FilterChains {
			out = append(out, hcmOf(t, fc))
		}
	}
	if len(out) == 0 {
		t.Fatal("no HTTP connection manager")
	}
	return out
}

// stdoutLog is the stdout access log of hcm, nil when it has none.
func stdoutLog(t *testing.T, hcm *hcmv3.HttpConnectionManager) *streamv3.StdoutAccessLog {
	t.Helper()
	if len(hcm.AccessLog) == 0 {
		return nil
	}
	if len(hcm.AccessLog) != 1 || hcm.AccessLog[0].Name != stdoutAccessLogger {
		t.Fatalf("access logs %v", hcm.AccessLog)
	}
	l := &streamv3.StdoutAccessLog{}
	if err := hcm.AccessLog[0].GetTypedConfig().UnmarshalTo(l); err != nil {
		t.Fatal(err)
	}
	return l
}

func withSettings(gw *ir.Gateway, s *ir.ProxySettings) *ir.Gateway {
	out := *gw
	out.Proxy = s
	return &out
}

func clusterList(t *testing.T, rs []types.Resource) []*clusterv3.Cluster {
	t.Helper()
	var out []*clusterv3.Cluster
	for _, r := range rs {
		out = append(out, r.(*clusterv3.Cluster))
	}
	return out
}

// Without settings, every connection manager (HTTP, each HTTPS chain) logs JSON with the default fields and has
// the default timeouts, and every cluster the default connect timeout
// and circuit breakers.
func TestDefaultSettings(t *testing.T) {
	{
		res, err := TranslateWith(fullGateway(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range allHCMs(t, res) {
			l := stdoutLog(t, h)
			fields := l.GetLogFormat().GetJsonFormat().GetFields()
			if len(fields) != len(DefaultAccessLogFields) {
				t.Fatalf("%s: JSON fields %v", h.StatPrefix, fields)
			}
			for _, f := range DefaultAccessLogFields {
				if fields[f.Name].GetStringValue() != f.Value {
					t.Errorf("%s: field %s = %v, want %s", h.StatPrefix, f.Name, fields[f.Name], f.Value)
				}
			}
			if h.RequestHeadersTimeout.AsDuration() != 10*time.Second || h.StreamIdleTimeout.AsDuration() != 5*time.Minute ||
				h.CommonHttpProtocolOptions.GetIdleTimeout().AsDuration() != time.Hour {
				t.Errorf("%s: timeouts %v %v %v", h.StatPrefix, h.RequestHeadersTimeout, h.StreamIdleTimeout, h.CommonHttpProtocolOptions.GetIdleTimeout())
			}
		}
		for _, c := range clusterList(t, res.Clusters) {
			th := c.GetCircuitBreakers().GetThresholds()
			if c.ConnectTimeout.AsDuration() != 5*time.Second || len(th) != 1 || th[0].GetMaxConnections().GetValue() != 1024 ||
				th[0].GetMaxPendingRequests().GetValue() != 1024 || th[0].GetMaxRequests().GetValue() != 1024 || th[0].GetMaxRetries().GetValue() != 3 {
				t.Errorf("cluster %s: connect timeout %v, circuit breakers %v", c.Name, c.ConnectTimeout, th)
			}
		}
	}
}

func TestSettingsOverrides(t *testing.T) {
	d := func(v time.Duration) *time.Duration { return &v }
	n := func(v uint32) *uint32 { return &v }
	res := mustTranslate(t, withSettings(fullGateway(), &ir.ProxySettings{
		AccessLog: &ir.AccessLog{Format: ir.AccessLogText, Text: "%REQ(:METHOD)% %RESPONSE_CODE%"},
		Timeouts: ir.Timeouts{RequestHeaders: d(0), StreamIdle: d(time.Minute), ConnectionIdle: d(10 * time.Minute),
			UpstreamConnect: d(250 * time.Millisecond)},
		CircuitBreakers: ir.CircuitBreakers{MaxConnections: n(10), MaxRetries: n(0)},
	}))
	checkValid(t, res)
	for _, h := range allHCMs(t, res) {
		if got := stdoutLog(t, h).GetLogFormat().GetTextFormatSource().GetInlineString(); got != "%REQ(:METHOD)% %RESPONSE_CODE%\n" {
			t.Errorf("text format %q", got)
		}
		if h.RequestHeadersTimeout.AsDuration() != 0 || h.StreamIdleTimeout.AsDuration() != time.Minute ||
			h.CommonHttpProtocolOptions.GetIdleTimeout().AsDuration() != 10*time.Minute {
			t.Errorf("timeouts %v %v %v", h.RequestHeadersTimeout, h.StreamIdleTimeout, h.CommonHttpProtocolOptions.GetIdleTimeout())
		}
	}
	for _, c := range clusterList(t, res.Clusters) {
		th := c.GetCircuitBreakers().GetThresholds()[0]
		if c.ConnectTimeout.AsDuration() != 250*time.Millisecond || th.GetMaxConnections().GetValue() != 10 ||
			th.GetMaxPendingRequests().GetValue() != 1024 || th.GetMaxRequests().GetValue() != 1024 || th.GetMaxRetries().GetValue() != 0 {
			t.Errorf("cluster %s: %v %v", c.Name, c.ConnectTimeout, th)
		}
	}

	for name, tc := range map[string]struct {
		log   *ir.AccessLog
		check func(*streamv3.StdoutAccessLog) bool
	}{
		"disabled": {&ir.AccessLog{Disabled: true, Text: "ignored"}, func(l *streamv3.StdoutAccessLog) bool { return l == nil }},
		"text with Envoy's default": {&ir.AccessLog{Format: ir.AccessLogText}, func(l *streamv3.StdoutAccessLog) bool {
			return l != nil && l.AccessLogFormat == nil
		}},
		"text with its newline": {&ir.AccessLog{Format: ir.AccessLogText, Text: "%PROTOCOL%\n"}, func(l *streamv3.StdoutAccessLog) bool {
			return l.GetLogFormat().GetTextFormatSource().GetInlineString() == "%PROTOCOL%\n"
		}},
		"custom JSON": {&ir.AccessLog{JSON: []ir.AccessLogField{{Name: "code", Value: "%RESPONSE_CODE%"}, {Name: "ua", Value: "ua=%REQ(USER-AGENT)%"}}},
			func(l *streamv3.StdoutAccessLog) bool {
				f := l.GetLogFormat().GetJsonFormat().GetFields()
				return len(f) == 2 && f["code"].GetStringValue() == "%RESPONSE_CODE%" && f["ua"].GetStringValue() == "ua=%REQ(USER-AGENT)%"
			}},
		"JSON without fields": {&ir.AccessLog{Format: ir.AccessLogJSON}, func(l *streamv3.StdoutAccessLog) bool {
			return len(l.GetLogFormat().GetJsonFormat().GetFields()) == len(DefaultAccessLogFields)
		}},
	} {
		res := mustTranslate(t, withSettings(fullGateway(), &ir.ProxySettings{AccessLog: tc.log}))
		checkValid(t, res)
		for _, h := range allHCMs(t, res) {
			if !tc.check(stdoutLog(t, h)) {
				t.Errorf("%s: access log %v", name, h.AccessLog)
			}
		}
	}
	if _, err := Translate(withSettings(fullGateway(), &ir.ProxySettings{AccessLog: &ir.AccessLog{Format: "XML"}})); err == nil {
		t.Error("an unknown access-log format was translated")
	}
}

// A Translator re-translates a Gateway whose settings changed, though its
// listeners and clusters are the same IR objects, and gives exactly what
// a fresh translation gives; back to the old settings, the old version.
func TestSettingsChangeRetranslates(t *testing.T) {
	x := NewTranslator()
	gw := fullGateway()
	first, err := x.Translate(gw)
	if err != nil {
		t.Fatal(err)
	}
	changes := []*ir.ProxySettings{
		{AccessLog: &ir.AccessLog{Disabled: true}},
		{CircuitBreakers: ir.CircuitBreakers{MaxRequests: ptr(uint32(7))}},
		{Timeouts: ir.Timeouts{UpstreamConnect: ptr(time.Second)}},
		nil,
	}
	for i, s := range changes {
		next := withSettings(gw, s)
		got, err := x.Translate(next)
		if err != nil {
			t.Fatal(err)
		}
		want := mustTranslate(t, next)
		if got.Version != want.Version {
			t.Errorf("change %d: version %s, a fresh translation's %s", i, got.Version, want.Version)
		}
		if s != nil && got.Version == first.Version {
			t.Errorf("change %d: the version did not change", i)
		}
		if s == nil && got.Version != first.Version {
			t.Errorf("back to the defaults: version %s, want %s", got.Version, first.Version)
		}
	}
	// Equal settings in distinct objects keep the memory.
	a := withSettings(gw, &ir.ProxySettings{AccessLog: &ir.AccessLog{Disabled: true}})
	b := withSettings(gw, &ir.ProxySettings{AccessLog: &ir.AccessLog{Disabled: true}})
	ra, _ := x.Translate(a)
	rb, _ := x.Translate(b)
	if ra != rb {
		t.Error("equal settings in a new IR object did not reuse the previous Resources")
	}
}
