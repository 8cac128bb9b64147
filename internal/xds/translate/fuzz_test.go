package translate

import (
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/ir"
)

// fuzzGateway builds an IR whose user-controlled strings and numbers come
// from the fuzzer.
func fuzzGateway(host, sni, path string, pathKind uint8, regex, header, value, rewrite, addr string, w1, w2 uint32, percent float64, status uint16, port uint32) *ir.Gateway {
	pathTypes := []ir.PathMatchType{ir.PathExact, ir.PathPrefix, ir.PathRegex, "bogus"}
	pm := &ir.PathMatch{Type: pathTypes[int(pathKind)%len(pathTypes)], Value: path}
	if pm.Type == ir.PathRegex {
		pm.Value = regex
	}
	modTypes := []ir.PathModifierType{ir.FullPathReplace, ir.PrefixMatchReplace}
	mod := &ir.PathModifier{Type: modTypes[int(pathKind/4)%2], Value: rewrite}
	routes := []*ir.Route{
		{
			Name: "forward",
			Match: ir.Match{
				Path:        pm,
				Headers:     []ir.StringMatch{{Name: header, Type: ir.StringExact, Value: value}, {Name: header, Type: ir.StringRegex, Value: regex}},
				QueryParams: []ir.StringMatch{{Name: header, Type: ir.StringRegex, Value: regex}},
				Method:      value,
			},
			RequestHeaders:  &ir.HeaderModifier{Set: []ir.Header{{Name: header, Value: value}}, Remove: []string{header}},
			ResponseHeaders: &ir.HeaderModifier{Add: []ir.Header{{Name: header, Value: value}}},
			Forward: &ir.Forward{
				Backends: []*ir.WeightedBackend{
					{Cluster: "ns/a/80", Weight: w1},
					{Cluster: "ns/b/80", Weight: w2},
					{Invalid: true, Weight: w2 / 2},
				},
				URLRewrite:     &ir.URLRewrite{Hostname: &host, Path: mod},
				Mirrors:        []*ir.Mirror{{Cluster: "ns/b/80", Percent: percent}},
				Timeout:        ptr(time.Duration(w1) * time.Millisecond),
				BackendTimeout: ptr(time.Duration(w2) * time.Millisecond),
				Retry: &ir.Retry{Attempts: w1 % 8, Codes: []uint32{uint32(status), 504},
					Backoff: ptr(time.Duration(int64(w2)-1<<31) * time.Microsecond)},
			},
		},
		{
			Name:     "redirect",
			Match:    ir.Match{Path: pm},
			Redirect: &ir.Redirect{Hostname: &host, Scheme: &value, Port: &port, Path: mod, StatusCode: int(status)},
		},
		{
			Name:           "direct",
			DirectResponse: &ir.DirectResponse{Status: uint32(status), Body: value},
		},
	}
	rc := &ir.RouteConfig{Name: "rc", VirtualHosts: []*ir.VirtualHost{
		{Name: "vh", Hostname: host, Routes: routes},
		{Name: "any", Hostname: "*", Routes: routes[2:]},
	}}
	// TCP and UDP routes, weighted like the HTTP route's backends.
	l4 := func(name string, a, b string) *ir.TCPForward {
		return &ir.TCPForward{Name: name + "/" + value, Backends: []ir.WeightedBackend{
			{Cluster: a, Weight: w1}, {Cluster: b, Weight: w2}, {Invalid: true, Weight: w2 / 2},
		}}
	}
	udp := ir.UDPForward(*l4("udp", "ns/u/53/udp", "ns/v/53/udp"))
	return &ir.Gateway{
		Namespace: "ns", Name: "gw",
		Listeners: []*ir.Listener{
			{Name: "http", Port: port, Protocol: ir.ProtocolHTTP, FilterChains: []*ir.FilterChain{{Name: "http", RouteConfig: rc}}},
			{Name: "https", Port: 443, Protocol: ir.ProtocolHTTPS, FilterChains: []*ir.FilterChain{
				{Name: "sni", ServerNames: []string{sni}, CertificateSecrets: []string{"ns/cert"}, RouteConfig: rc},
				{Name: "host", ServerNames: []string{host}, CertificateSecrets: []string{"ns/cert"}, RouteConfig: rc},
				{Name: "passthrough", ServerNames: []string{"pass." + sni}, TCP: l4("tls", "ns/t/9000", "ns/a/80")},
				{Name: "terminate", ServerNames: []string{"term." + host}, CertificateSecrets: []string{"ns/cert"}, TCP: l4("term", "ns/t/9000", "ns/t/9000")},
			}},
			{Name: "tcp", Port: port + 1, Protocol: ir.ProtocolTCP, FilterChains: []*ir.FilterChain{{Name: "tcp", TCP: l4("tcp", "ns/t/9000", "ns/b/80")}}},
			{Name: "udp", Port: port + 2, Protocol: ir.ProtocolUDP, UDP: &udp},
		},
		Clusters: []*ir.Cluster{
			{Name: "ns/a/80", Protocol: ir.UpstreamHTTP1, Endpoints: []ir.Endpoint{{Address: addr, Port: port}}},
			{Name: "ns/b/80", Protocol: ir.UpstreamHTTP2},
			{Name: "ns/t/9000", Protocol: ir.UpstreamTCP, Endpoints: []ir.Endpoint{{Address: addr, Port: port}}},
			{Name: "ns/u/53/udp", Protocol: ir.UpstreamUDP, Endpoints: []ir.Endpoint{{Address: addr, Port: port}}},
			{Name: "ns/v/53/udp", Protocol: ir.UpstreamUDP},
		},
		Secrets: []*ir.Secret{{Name: "ns/cert", Cert: []byte(value), Key: []byte(rewrite)}},
	}
}

func FuzzTranslate(f *testing.F) {
	f.Add("foo.example.com", "*.example.com", "/foo/", uint8(1), "^/re/[0-9]+$", "x-h", "v", "/", "10.0.0.1", uint32(1), uint32(2), 50.0, uint16(302), uint32(8080))
	f.Add("*", "a.example.com", "/", uint8(5), "(", ":path", "GET", "/x\\1", "::1", uint32(0), uint32(0), 0.0, uint16(200), uint32(80))
	f.Add("Host", "", "/a?b", uint8(2), "a{2,3}", "Host", "a\nb", "", "bad", uint32(1<<32-1), uint32(1<<32-1), 100.5, uint16(99), uint32(70000))
	f.Fuzz(func(t *testing.T, host, sni, path string, pathKind uint8, regex, header, value, rewrite, addr string, w1, w2 uint32, percent float64, status uint16, port uint32) {
		gw := fuzzGateway(host, sni, path, pathKind, regex, header, value, rewrite, addr, w1, w2, percent, status, port)
		res, err := Translate(gw)
		if err != nil {
			return
		}
		checkValid(t, res)
		// Every table of two virtual hosts or more in scoped form: as
		// valid, and no new failure.
		scoped, err := TranslateWith(gw, scopeAll)
		if err != nil {
			t.Fatalf("scoped form failed where the default did not: %v", err)
		}
		checkValid(t, scoped)
		again, err := Translate(fuzzGateway(host, sni, path, pathKind, regex, header, value, rewrite, addr, w1, w2, percent, status, port))
		if err != nil {
			t.Fatalf("second translation failed: %v", err)
		}
		if again.Version != res.Version {
			t.Fatalf("not deterministic: %s != %s", again.Version, res.Version)
		}
	})
}
