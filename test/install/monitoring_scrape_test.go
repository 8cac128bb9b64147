package install

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/internal/controller"
	"github.com/portico-dev/portico/internal/provider/kube"
	"github.com/portico-dev/portico/internal/testenv"
)

// parseExposition parses Prometheus' text format.
func parseExposition(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing the scrape: %v", err)
	}
	return mfs
}

func httpGet(ctx context.Context, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// scrapeController runs a controller (as the chart does: provisioning
// on; xDS in plaintext, so that the test's proxy needs no certificate)
// against the envtest API server with a Gateway of its class, connects a
// proxy of the Gateway that NACKs its listeners, and scrapes /metrics
// once every metric has its series: the leader's, the status writes', the
// stream's requests, the NACK and the proxy's state. It also returns the
// Deployment it provisioned for the Gateway.
func scrapeController(t *testing.T) (map[string]*dto.MetricFamily, *appsv1.Deployment) {
	cfg := apiServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	admin, err := client.New(cfg, client.Options{Scheme: kube.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorld(ctx, t, admin)
	go fakeControllerManager(ctx, admin, w.ns)

	xdsLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adminLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := controller.New(controller.Options{
		RESTConfig:       cfg,
		Namespace:        w.ns,
		ControllerName:   w.controller,
		LeaderElectionID: "portico-monitoring",
		LeaseDuration:    4 * time.Second,
		RenewDeadline:    3 * time.Second,
		RetryPeriod:      500 * time.Millisecond,
		Debounce:         20 * time.Millisecond,
		MaxDelay:         200 * time.Millisecond,
		Provision:        true,
		XDSListener:      xdsLis,
		AdminListener:    adminLis,
		Log:              slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, ctx, c)

	gateway := w.ns + "/gw"
	conn, err := grpc.NewClient("passthrough:///"+xdsLis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&discoveryv3.DeltaDiscoveryRequest{
		Node: &corev3.Node{Id: "monitoring-test", Cluster: gateway}, TypeUrl: resourcev3.ListenerType,
	}); err != nil {
		t.Fatal(err)
	}
	resps := make(chan *discoveryv3.DeltaDiscoveryResponse, 16)
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			resps <- r
		}
	}()
	select {
	case r := <-resps:
		if err := stream.Send(&discoveryv3.DeltaDiscoveryRequest{
			TypeUrl: resourcev3.ListenerType, ResponseNonce: r.GetNonce(),
			ErrorDetail: &status.Status{Code: int32(codes.InvalidArgument), Message: "rejected by the monitoring test"},
		}); err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the proxy of %s got no listeners within 60s", gateway)
	}

	url := "http://" + adminLis.Addr().String() + "/metrics"
	var mfs map[string]*dto.MetricFamily
	value := func(name string, labels map[string]string) (float64, bool) {
		for _, m := range mfs[name].GetMetric() {
			match := 0
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v == lp.GetValue() {
					match++
				}
			}
			if match == len(labels) {
				switch {
				case m.GetGauge() != nil:
					return m.GetGauge().GetValue(), true
				case m.GetCounter() != nil:
					return m.GetCounter().GetValue(), true
				}
			}
		}
		return 0, false
	}
	eventually(t, 60*time.Second, "the controller's series", func() (bool, string) {
		code, body, err := httpGet(ctx, url)
		if err != nil || code != http.StatusOK {
			return false, fmt.Sprintf("GET %s: %d %v", url, code, err)
		}
		mfs = parseExposition(t, body)
		for _, want := range []struct {
			name   string
			labels map[string]string
		}{
			{"portico_leader", nil},
			{"portico_status_writes_total", map[string]string{"result": "written"}},
			{"portico_xds_requests_total", map[string]string{"type_url": resourcev3.ListenerType}},
			{"portico_xds_nacks_total", map[string]string{"gateway": gateway}},
			{"portico_xds_proxies", map[string]string{"gateway": gateway, "state": "NACK"}},
		} {
			if v, ok := value(want.name, want.labels); !ok || v < 1 {
				return false, fmt.Sprintf("%s%v = %v (%v)", want.name, want.labels, v, ok)
			}
		}
		return true, ""
	})

	var deploys appsv1.DeploymentList
	eventually(t, 30*time.Second, "the Gateway's proxy Deployment", func() (bool, string) {
		err := admin.List(ctx, &deploys, client.InNamespace(w.ns))
		return err == nil && len(deploys.Items) == 1, fmt.Sprintf("provisioned Deployments in %s: %d (%v), want 1", w.ns, len(deploys.Items), err)
	})
	return mfs, &deploys.Items[0]
}

// envoyBootstrap is an Envoy with one HTTP listener routing to one
// cluster, as a Gateway's proxy has (its stat prefix is a Gateway
// listener's), its stats flushed every second.
const envoyBootstrap = `
stats_flush_interval: 1s
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: 0}}
static_resources:
  listeners:
  - name: default/gw/http
    address: {socket_address: {address: 127.0.0.1, port_value: %d}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: default_gw_http
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {prefix: "/"}
                route: {cluster: default/web/80}
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: default/web/80
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: default/web/80
      endpoints:
      - lb_endpoints:
        - endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: %d}}}
`

// scrapeEnvoy runs Envoy, sends it a request answered 200 and one
// answered 503 by the backend, and scrapes /stats/prometheus once the
// request-time histogram has both (Envoy exports histograms only after
// observations).
func scrapeEnvoy(t *testing.T) map[string]*dto.MetricFamily {
	testenv.RequireEnvoy(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(backend.Close)
	backendPort := backend.Listener.Addr().(*net.TCPAddr).Port
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	e := testenv.StartEnvoy(t, testenv.EnvoyOptions{Bootstrap: fmt.Sprintf(envoyBootstrap, port, backendPort)})
	if err := e.WaitLive(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for path, want := range map[string]int{"/ok": http.StatusOK, "/fail": http.StatusServiceUnavailable} {
		if code, _, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d%s", port, path)); err != nil || code != want {
			t.Fatalf("GET %s through Envoy: %d %v, want %d", path, code, err, want)
		}
	}
	var mfs map[string]*dto.MetricFamily
	err = e.WaitFor(20*time.Second, "the request-time histogram", func(ctx context.Context) (bool, error) {
		code, body, err := e.Admin(ctx, "/stats/prometheus")
		if err != nil || code != http.StatusOK {
			return false, fmt.Errorf("/stats/prometheus: %d %v", code, err)
		}
		mfs = parseExposition(t, body)
		for _, m := range mfs["envoy_http_downstream_rq_time"].GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "envoy_http_conn_manager_prefix" && lp.GetValue() == "default_gw_http" &&
					m.GetHistogram().GetSampleCount() >= 2 {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}
