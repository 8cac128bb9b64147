package translate

import (
	"fmt"
	"time"

	"github.com/portico-dev/portico/internal/ir"
)

const (
	clusterA = "default/svc-a/80"
	clusterB = "default/svc-b/8080" // HTTP/2, no endpoints
	clusterC = "default/svc-c/9000"
	secretA  = "default/cert-a"
	secretB  = "default/cert-b"
	keyA     = "-----BEGIN PRIVATE KEY-----\nSECRET-KEY-BYTES-A\n-----END PRIVATE KEY-----\n"
	keyB     = "-----BEGIN PRIVATE KEY-----\nSECRET-KEY-BYTES-B\n-----END PRIVATE KEY-----\n"
	certA    = "-----BEGIN CERTIFICATE-----\nCERT-BYTES-A\n-----END CERTIFICATE-----\n"
	certB    = "-----BEGIN CERTIFICATE-----\nCERT-BYTES-B\n-----END CERTIFICATE-----\n"
)

func ptr[T any](v T) *T { return &v }

func forwardTo(cluster string) *ir.Forward {
	return &ir.Forward{Backends: []*ir.WeightedBackend{{Cluster: cluster, Weight: 1}}}
}

func prefix(v string) *ir.PathMatch { return &ir.PathMatch{Type: ir.PathPrefix, Value: v} }

// fullGateway is an IR that uses every feature of the IR.
func fullGateway() *ir.Gateway {
	httpRoutes := []*ir.Route{
		{
			Name:  "exact",
			Match: ir.Match{Path: &ir.PathMatch{Type: ir.PathExact, Value: "/exact"}},
			Forward: &ir.Forward{
				Backends:       []*ir.WeightedBackend{{Cluster: clusterA, Weight: 1}},
				Timeout:        ptr(10 * time.Second),
				BackendTimeout: ptr(2 * time.Second),
			},
		},
		{
			Name:  "weighted",
			Match: ir.Match{Path: prefix("/foo/")},
			Forward: &ir.Forward{Backends: []*ir.WeightedBackend{
				{Cluster: clusterA, Weight: 3},
				{Invalid: true, Weight: 1},
				{Cluster: clusterC, Weight: 0},
				{Cluster: clusterA, Weight: 2},
			}},
		},
		{
			Name: "regex-direct",
			Match: ir.Match{
				Path: &ir.PathMatch{Type: ir.PathRegex, Value: "^/re/[0-9]+$"},
				Headers: []ir.StringMatch{
					{Name: "X-Exact", Type: ir.StringExact, Value: "yes"},
					{Name: "x-regex", Type: ir.StringRegex, Value: "v[0-9]"},
				},
				QueryParams: []ir.StringMatch{
					{Name: "q", Type: ir.StringExact, Value: "1"},
					{Name: "r", Type: ir.StringRegex, Value: "a.*"},
				},
				Method: "GET",
			},
			DirectResponse: &ir.DirectResponse{Status: 200, Body: "hello"},
		},
		{
			Name:  "redirect-prefix",
			Match: ir.Match{Path: prefix("/old")},
			Redirect: &ir.Redirect{
				Scheme:     ptr("https"),
				Hostname:   ptr("new.example.com"),
				Port:       ptr(uint32(8443)),
				Path:       &ir.PathModifier{Type: ir.PrefixMatchReplace, Value: "/new"},
				StatusCode: 301,
			},
		},
		{
			Name:     "redirect-full",
			Match:    ir.Match{Path: prefix("/full-redirect")},
			Redirect: &ir.Redirect{Path: &ir.PathModifier{Type: ir.FullPathReplace, Value: "/elsewhere"}, StatusCode: 308},
		},
		{
			Name:  "rewrite-strip",
			Match: ir.Match{Path: prefix("/strip")},
			Forward: &ir.Forward{
				Backends: []*ir.WeightedBackend{{Cluster: clusterA, Weight: 1}},
				URLRewrite: &ir.URLRewrite{
					Hostname: ptr("internal.example"),
					Path:     &ir.PathModifier{Type: ir.PrefixMatchReplace, Value: "/"},
				},
			},
		},
		{
			Name:  "rewrite-full",
			Match: ir.Match{Path: prefix("/rewrite-full")},
			Forward: &ir.Forward{
				Backends:   []*ir.WeightedBackend{{Cluster: clusterA, Weight: 1}},
				URLRewrite: &ir.URLRewrite{Path: &ir.PathModifier{Type: ir.FullPathReplace, Value: "/replaced"}},
			},
		},
		{
			Name:  "mirror",
			Match: ir.Match{Path: prefix("/mirror")},
			Forward: &ir.Forward{
				Backends: []*ir.WeightedBackend{{Cluster: clusterA, Weight: 1}},
				Mirrors:  []*ir.Mirror{{Cluster: clusterB, Percent: 50}, {Cluster: clusterC, Percent: 100}},
			},
		},
		{
			Name:  "headers",
			Match: ir.Match{Path: prefix("/headers")},
			RequestHeaders: &ir.HeaderModifier{
				Set:    []ir.Header{{Name: "X-Set", Value: "s"}},
				Add:    []ir.Header{{Name: "x-add", Value: "a"}},
				Remove: []string{"X-Remove"},
			},
			ResponseHeaders: &ir.HeaderModifier{
				Set:    []ir.Header{{Name: "x-resp-set", Value: "rs"}},
				Add:    []ir.Header{{Name: "x-resp-add", Value: "ra"}},
				Remove: []string{"x-resp-remove"},
			},
			Forward: forwardTo(clusterA),
		},
		{
			Name:    "all-invalid",
			Match:   ir.Match{Path: prefix("/broken")},
			Forward: &ir.Forward{Backends: []*ir.WeightedBackend{{Invalid: true, Weight: 1}}},
		},
		{
			Name:    "root",
			Forward: forwardTo(clusterC),
		},
	}
	httpRC := &ir.RouteConfig{Name: "http-80", VirtualHosts: []*ir.VirtualHost{
		{Name: "any", Hostname: "*", Routes: httpRoutes},
		{Name: "foo", Hostname: "Foo.Example.com", Routes: []*ir.Route{{Name: "foo-root", Match: ir.Match{Path: prefix("/")}, Forward: forwardTo(clusterA)}}},
	}}
	tlsRC := func(name, host string) *ir.RouteConfig {
		return &ir.RouteConfig{Name: name, VirtualHosts: []*ir.VirtualHost{{
			Name: host, Hostname: host,
			Routes: []*ir.Route{{Name: name + "-grpc", Match: ir.Match{Path: prefix("/pkg.Svc")}, Forward: forwardTo(clusterB)}},
		}}}
	}
	return &ir.Gateway{
		Namespace: "default",
		Name:      "gw",
		Listeners: []*ir.Listener{
			{Name: "http-80", Port: 80, Protocol: ir.ProtocolHTTP, FilterChains: []*ir.FilterChain{{Name: "http-80", RouteConfig: httpRC}}},
			{Name: "https-443", Port: 443, Protocol: ir.ProtocolHTTPS, FilterChains: []*ir.FilterChain{
				// Deliberately not sorted: the catch-all must end up last.
				{Name: "https-443/any", CertificateSecrets: []string{secretA}, RouteConfig: tlsRC("https-443/any", "*")},
				{Name: "https-443/a", ServerNames: []string{"a.example.com"}, CertificateSecrets: []string{secretA}, RouteConfig: tlsRC("https-443/a", "a.example.com")},
				{Name: "https-443/b", ServerNames: []string{"*.b.example.com"}, CertificateSecrets: []string{secretB, secretA}, RouteConfig: tlsRC("https-443/b", "*.b.example.com")},
			}},
		},
		Clusters: []*ir.Cluster{
			{Name: clusterA, ServiceNamespace: "default", ServiceName: "svc-a", ServicePort: 80, Protocol: ir.UpstreamHTTP1,
				Endpoints: []ir.Endpoint{{Address: "10.0.0.1", Port: 8080}, {Address: "10.0.0.2", Port: 8080}, {Address: "fd00::1", Port: 8080}}},
			{Name: clusterB, ServiceNamespace: "default", ServiceName: "svc-b", ServicePort: 8080, Protocol: ir.UpstreamHTTP2},
			{Name: clusterC, ServiceNamespace: "default", ServiceName: "svc-c", ServicePort: 9000, Protocol: ir.UpstreamHTTP1,
				Endpoints: []ir.Endpoint{{Address: "10.0.1.1", Port: 9000}, {Address: "not-an-ip.example", Port: 9000}}},
		},
		Secrets: []*ir.Secret{
			{Name: secretA, Cert: []byte(certA), Key: []byte(keyA)},
			{Name: secretB, Cert: []byte(certB), Key: []byte(keyB)},
		},
	}
}

// generatedGateway has one HTTP listener with n routes spread over virtual
// hosts of 100 routes each, and one cluster per 10 routes.
func generatedGateway(n int) *ir.Gateway {
	gw := &ir.Gateway{Namespace: "bench", Name: "gw"}
	for c := 0; c < (n+9)/10; c++ {
		gw.Clusters = append(gw.Clusters, &ir.Cluster{
			Name:     fmt.Sprintf("bench/svc-%05d/80", c),
			Protocol: ir.UpstreamHTTP1,
			Endpoints: []ir.Endpoint{
				{Address: fmt.Sprintf("10.%d.%d.1", c/256, c%256), Port: 8080},
				{Address: fmt.Sprintf("10.%d.%d.2", c/256, c%256), Port: 8080},
			},
		})
	}
	rc := &ir.RouteConfig{Name: "http-80"}
	var vh *ir.VirtualHost
	for i := 0; i < n; i++ {
		if i%100 == 0 {
			vh = &ir.VirtualHost{Name: fmt.Sprintf("host-%05d", i/100), Hostname: fmt.Sprintf("host-%05d.example.com", i/100)}
			rc.VirtualHosts = append(rc.VirtualHosts, vh)
		}
		c := gw.Clusters[i/10].Name
		r := &ir.Route{
			Name: fmt.Sprintf("httproute/bench/r%d/rule/0/match/0", i),
			Match: ir.Match{
				Path:    prefix(fmt.Sprintf("/api/v%d", i)),
				Headers: []ir.StringMatch{{Name: "x-tenant", Type: ir.StringExact, Value: fmt.Sprint(i % 7)}},
			},
			RequestHeaders: &ir.HeaderModifier{Set: []ir.Header{{Name: "x-route", Value: fmt.Sprint(i)}}},
			Forward: &ir.Forward{
				Backends:   []*ir.WeightedBackend{{Cluster: c, Weight: 90}, {Cluster: gw.Clusters[0].Name, Weight: 10}},
				URLRewrite: &ir.URLRewrite{Path: &ir.PathModifier{Type: ir.PrefixMatchReplace, Value: "/"}},
				Timeout:    ptr(30 * time.Second),
			},
		}
		vh.Routes = append(vh.Routes, r)
	}
	gw.Listeners = []*ir.Listener{{Name: "http-80", Port: 80, Protocol: ir.ProtocolHTTP,
		FilterChains: []*ir.FilterChain{{Name: "http-80", RouteConfig: rc}}}}
	return gw
}
