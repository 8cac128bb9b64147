package infra

import (
	"fmt"
	"slices"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/proxyspec"
)

// Static listeners that expose one path of Envoy's loopback admin
// interface each, and nothing else of it (any other path is 404):
//
//   - "portico-ready" on 0.0.0.0:proxyspec.ReadyPort, /ready: the
//     readiness probe (readyListener);
//   - "portico-metrics" on 0.0.0.0:proxyspec.MetricsPort (19090 unless the
//     ProxyConfig moves or disables it), /stats/prometheus: Envoy's
//     statistics in Prometheus' text format. It ignores the cap on client
//     connections (overload.go), so that an overloaded proxy can still be
//     scraped; the readiness listener does not, so that a proxy at its
//     cap turns unready.
//
// Envoy's admin interface itself (config dump, runtime changes,
// /quitquitquit, /healthcheck/fail...) listens on 127.0.0.1 only.
const (
	readyListenerName   = "portico-ready"
	metricsListenerName = "portico-metrics"
	// MetricsPath is the only path the metrics listener serves.
	MetricsPath = "/stats/prometheus"
	// metricsTimeout bounds a scrape (Prometheus' default scrape timeout
	// is 10 s).
	metricsTimeout = 10 * time.Second
)

// readyListener answers GET /ready (the Pod's readiness probe) with
// Envoy's own readiness: the admin interface's /ready, which is 200 only
// in server state LIVE (initial configuration applied) and 503 while
// initializing or draining. Static listeners accept connections only once
// Envoy's initialization is done, and that waits for xDS (see
// adsResources), so before its configuration has arrived a proxy refuses
// the probe.
func readyListener() (*listenerv3.Listener, error) {
	return adminPathListener(readyListenerName, "0.0.0.0", uint32(proxyspec.ReadyPort), "/ready", time.Second, false)
}

// metricsListener is the Prometheus endpoint on addr:port.
func metricsListener(addr string, port uint32) (*listenerv3.Listener, error) {
	return adminPathListener(metricsListenerName, addr, port, MetricsPath, metricsTimeout, true)
}

// provisionedMetricsListener is the metrics listener of a provisioned
// proxy, or nil when its ProxyConfig disables metrics. A port the Pod
// uses otherwise is an error (the Gateway API stage refuses it first):
// Envoy would not start.
func provisionedMetricsListener(pc v1alpha1.ProxyConfigSpec) (*listenerv3.Listener, error) {
	port, ok := proxyspec.MetricsPort(pc)
	if !ok {
		return nil, nil
	}
	if port < 1 || port > 65535 || slices.Contains(proxyspec.ReservedPorts(), port) {
		return nil, fmt.Errorf("infra: metrics port %d is not available", port)
	}
	return metricsListener("0.0.0.0", uint32(port))
}

// adminPathListener is a listener on addr:port whose only route, exact
// path (the query string aside), goes to the admin cluster.
func adminPathListener(name, addr string, port uint32, path string, timeout time.Duration, ignoreConnLimit bool) (*listenerv3.Listener, error) {
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		return nil, err
	}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix: statPrefix(name),
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: name,
			VirtualHosts: []*routev3.VirtualHost{{
				Name:    name,
				Domains: []string{"*"},
				Routes: []*routev3.Route{{
					Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Path{Path: path}},
					Action: &routev3.Route_Route{Route: &routev3.RouteAction{
						ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: adminClusterName},
						Timeout:          durationpb.New(timeout),
					}},
				}},
			}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       "envoy.filters.http.router",
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router},
		}},
		// A client must send its request within a few seconds.
		RequestHeadersTimeout: durationpb.New(5 * time.Second),
	})
	if err != nil {
		return nil, err
	}
	return &listenerv3.Listener{
		Name:    name,
		Address: socket(addr, port),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name:       "envoy.filters.network.http_connection_manager",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm},
		}}}},
		IgnoreGlobalConnLimit: ignoreConnLimit,
	}, nil
}

// statPrefix is the stat prefix of a static listener's connection
// manager: "portico-ready" → "portico_ready".
func statPrefix(name string) string {
	b := []byte(name)
	for i, c := range b {
		if c == '-' {
			b[i] = '_'
		}
	}
	return string(b)
}
