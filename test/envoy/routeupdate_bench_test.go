package envoy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/testenv/workload"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// BenchmarkEnvoyRouteUpdate measures what the proxy's side of a route
// change costs as the route table grows: the HTTP listener of one Gateway
// of the translated workload.Snapshot (routes HTTPRoutes on that Gateway,
// two Envoy routes each, with header and query matches, over
// workload.HostsPerGateway hostnames, as in the bench's Gateways); each
// operation replaces a route of the first hostname by one with a new
// path (to a backend of the benchmark) and times from the xDS server's
// update until a request for the new path through Envoy answers 200 (one
// request per millisecond, on a kept-alive connection: Envoy takes the
// table per request).
//
// form=vhds is a delta ADS Envoy, sent one virtual host by VHDS;
// form=whole a state-of-the-world Envoy, sent the whole table;
// form=scoped a delta ADS Envoy with the table in scoped form, sent the
// route config of one hostname (internal/xds/translate/scoped.go). The
// control plane's part is the same small push in the first two; what
// grows with the table is Envoy's: it rebuilds its in-memory table from
// every virtual host it holds on each update (internal/xds/translate/
// vhds.go), the floor of "route create → first 200" for one table of that
// size. In scoped form Envoy rebuilds the hostname's table only.
//
//	go test -run '^$' -bench EnvoyRouteUpdate -benchtime 20x ./test/envoy/
func BenchmarkEnvoyRouteUpdate(b *testing.B) {
	for _, form := range []string{"vhds", "whole", "scoped"} {
		for _, routes := range []int{250, 2500} {
			b.Run(fmt.Sprintf("form=%s/routes=%d", form, routes), func(b *testing.B) {
				benchmarkRouteUpdate(b, form, routes)
			})
		}
	}
}

// routeUpdatePort is the port of the benchmark's listener.
const routeUpdatePort = 10080

// workloadListener is the IR of the first Gateway of
// workload.Snapshot(routes * workload.Gateways), with its HTTP listener
// only, on routeUpdatePort.
func workloadListener(b *testing.B, routes int) *ir.Gateway {
	res := gatewayapi.Translate(workload.Snapshot(routes*workload.Gateways), gatewayapi.Options{ControllerName: workload.ControllerName})
	for _, gw := range res.Gateways {
		for _, l := range gw.Listeners {
			if l.Protocol != ir.ProtocolHTTP || len(l.FilterChains) != 1 || l.FilterChains[0].RouteConfig == nil {
				continue
			}
			out := *gw
			ol := *l
			ol.Port = routeUpdatePort
			out.Listeners, out.Secrets = []*ir.Listener{&ol}, nil
			return &out
		}
	}
	b.Fatal("no Gateway with an HTTP listener")
	return nil
}

// withProbe is gw with its first virtual host's first route replaced by
// one for the path probe to cluster c-echo (127.0.0.1:backend), and the
// host of that virtual host.
func withProbe(gw *ir.Gateway, backend int, probe string) (*ir.Gateway, string) {
	out := *gw
	l := *gw.Listeners[0]
	fc := *l.FilterChains[0]
	rc := *fc.RouteConfig
	vh := *rc.VirtualHosts[0]
	vh.Routes = append([]*ir.Route{{Name: "probe", Match: ir.Match{Path: &ir.PathMatch{Type: ir.PathPrefix, Value: probe}},
		Forward: &ir.Forward{Backends: []*ir.WeightedBackend{{Cluster: "c-echo", Weight: 1}}}}}, vh.Routes[1:]...)
	rc.VirtualHosts = append([]*ir.VirtualHost{&vh}, rc.VirtualHosts[1:]...)
	fc.RouteConfig = &rc
	l.FilterChains = []*ir.FilterChain{&fc}
	out.Listeners = []*ir.Listener{&l}
	out.Clusters = append(slices.Clone(gw.Clusters), &ir.Cluster{Name: "c-echo", Protocol: ir.UpstreamHTTP1,
		Endpoints: []ir.Endpoint{{Address: "127.0.0.1", Port: uint32(backend)}}})
	slices.SortFunc(out.Clusters, func(a, b *ir.Cluster) int { return strings.Compare(a.Name, b.Name) })
	return &out, vh.Hostname
}

// routeBench is an Envoy serving the table of workloadListener(routes)
// in one form, with the probe route "/probe-0" answering 200.
type routeBench struct {
	s       *l4Stack
	x       *translate.Translator
	res     *translate.Resources // the first translation
	base    *ir.Gateway
	backend int
	// get asks for path on the probe's host; until waits for path to
	// answer a status, asking once per millisecond.
	get   func(path string) (int, error)
	until func(path string, want int) error
}

func newRouteBench(b *testing.B, form string, routes int) *routeBench {
	s := newL4Stack(b)
	s.delta = form != "whole"
	opts := translate.Options{ScopeAtRoutes: -1}
	if form == "scoped" {
		opts.ScopeAtRoutes = 1
	}
	l := s.listen("tcp")
	backend := l.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	s.wg.Go(func() { _ = srv.Serve(l) })
	b.Cleanup(func() { _ = srv.Close() })

	base := workloadListener(b, routes)
	gw, host := withProbe(base, backend, "/probe-0")
	if host == "" || strings.HasPrefix(host, "*") {
		b.Fatalf("the first virtual host has hostname %q, want an exact one", host)
	}
	x := translate.NewTranslatorWith(opts)
	res, err := x.Translate(gw)
	if err != nil || len(res.Problems) != 0 {
		b.Fatalf("translate: %v %+v", err, res.Problems)
	}
	s.startWith(res)
	client := &http.Client{Transport: &http.Transport{DialContext: s.ns.DialContext}, Timeout: 5 * time.Second}
	get := func(path string) (int, error) {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", routeUpdatePort, path), nil)
		if err != nil {
			return 0, err
		}
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// until waits for path to answer want, asking once per millisecond.
	until := func(path string, want int) error {
		deadline := time.Now().Add(30 * time.Second)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		last := 0
		for time.Now().Before(deadline) {
			code, err := get(path)
			if err != nil {
				return err
			}
			if code == want {
				return nil
			}
			last = code
			<-tick.C
		}
		return fmt.Errorf("%s: still %d, want %d", path, last, want)
	}
	if err := until("/probe-0", http.StatusOK); err != nil {
		b.Fatal(err)
	}
	return &routeBench{s: s, x: x, res: res, base: base, backend: backend, get: get, until: until}
}

func benchmarkRouteUpdate(b *testing.B, form string, routes int) {
	rb := newRouteBench(b, form, routes)
	s, x, res, base, backend, get, until := rb.s, rb.x, rb.res, rb.base, rb.backend, rb.get, rb.until
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		b.StopTimer()
		probe := "/probe-" + strconv.Itoa(i)
		gw, _ := withProbe(base, backend, probe)
		res, err := x.Translate(gw)
		if err != nil || len(res.Problems) != 0 {
			b.Fatalf("translate: %v %+v", err, res.Problems)
		}
		if code, err := get(probe); err != nil || code != http.StatusNotFound {
			b.Fatalf("%s before the update: %d %v", probe, code, err)
		}
		b.StartTimer()
		if err := s.xds.Update(context.Background(), []*translate.Resources{res}); err != nil {
			b.Fatal(err)
		}
		if err := until(probe, http.StatusOK); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// The VHDS Envoy took the changes by VHDS, the others by RDS.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := s.envoy.Stats(ctx, `vhds\..*config_reload$`)
	if err != nil {
		b.Fatal(err)
	}
	var reloads int64
	for _, n := range st {
		reloads += n
	}
	if (form == "vhds") != (reloads >= int64(b.N)) {
		b.Fatalf("VHDS reloads %v after %d updates (form %s)", st, b.N, form)
	}
	if scoped := len(res.ScopedRoutes) > 0; scoped != (form == "scoped") {
		b.Fatalf("form %s: %d scopes", form, len(res.ScopedRoutes))
	}
}

// BenchmarkEnvoyRequest is what a request through Envoy costs in each
// form of a table of 500 routes over 50 hostnames: one GET on a kept-alive
// connection per operation, to a route of the first hostname. The
// difference between form=scoped and form=vhds is the host-scope Lua
// filter and the second route selection of the scoped form
// (internal/xds/translate/scoped.go).
//
//	go test -run '^$' -bench EnvoyRequest -benchtime 5000x ./test/envoy/
func BenchmarkEnvoyRequest(b *testing.B) {
	for _, form := range []string{"vhds", "scoped"} {
		b.Run("form="+form, func(b *testing.B) {
			rb := newRouteBench(b, form, 250)
			for b.Loop() {
				if code, err := rb.get("/probe-0"); err != nil || code != http.StatusOK {
					b.Fatalf("%d %v", code, err)
				}
			}
		})
	}
}
