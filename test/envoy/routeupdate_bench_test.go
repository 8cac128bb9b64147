package envoy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// BenchmarkEnvoyRouteUpdate measures what the proxy's side of a route
// change costs as the route table grows: one Gateway with one HTTP
// listener whose table holds routes routes over routeUpdateHosts
// hostnames (as the bench's Gateways do); each operation replaces one
// route of the first hostname by a route with a new path (to the same
// cluster) and times from the xDS server's update until a request for the
// new path through Envoy answers 200 (one request per millisecond, on a
// kept-alive connection: Envoy takes the table per request).
//
// form=vhds is a delta ADS Envoy, sent one virtual host by VHDS;
// form=whole a state-of-the-world Envoy, sent the whole table. The
// control plane's part is the same small push in both; what grows with
// the table is Envoy's: it rebuilds its in-memory table from every virtual
// host it holds on each update (internal/xds/translate/vhds.go), and
// that is the floor of "route create → first 200" for a Gateway of that
// size, whatever the controller.
//
//	go test -run '^$' -bench EnvoyRouteUpdate -benchtime 30x ./test/envoy/
func BenchmarkEnvoyRouteUpdate(b *testing.B) {
	for _, form := range []string{"vhds", "whole"} {
		for _, routes := range []int{250, 2500, 10000} {
			b.Run(fmt.Sprintf("form=%s/routes=%d", form, routes), func(b *testing.B) {
				benchmarkRouteUpdate(b, form == "vhds", routes)
			})
		}
	}
}

// routeUpdateHosts is the number of hostnames of the table.
const routeUpdateHosts = 50

// routeUpdateGateway is the Gateway of the benchmark: routes routes over
// routeUpdateHosts hostnames, to cluster c-echo at 127.0.0.1:backend; the
// first hostname's first route has path probe.
func routeUpdateGateway(routes, backend int, probe string) *ir.Gateway {
	fwd := &ir.Forward{Backends: []*ir.WeightedBackend{{Cluster: "c-echo", Weight: 1}}}
	var vhosts []*ir.VirtualHost
	for h := range routeUpdateHosts {
		vh := &ir.VirtualHost{Name: fmt.Sprintf("h%d", h), Hostname: fmt.Sprintf("h%d.example.com", h)}
		for j := range routes / routeUpdateHosts {
			path := fmt.Sprintf("/r%d", j)
			if h == 0 && j == 0 {
				path = probe
			}
			vh.Routes = append(vh.Routes, &ir.Route{Name: fmt.Sprintf("h%d-r%d", h, j), Forward: fwd,
				Match: ir.Match{Path: &ir.PathMatch{Type: ir.PathPrefix, Value: path}}})
		}
		vhosts = append(vhosts, vh)
	}
	const name = "http-10080"
	return &ir.Gateway{Namespace: "default", Name: "updates",
		Listeners: []*ir.Listener{{Name: name, Port: 10080, Protocol: ir.ProtocolHTTP,
			FilterChains: []*ir.FilterChain{{Name: name, RouteConfig: &ir.RouteConfig{Name: name, VirtualHosts: vhosts}}}}},
		Clusters: []*ir.Cluster{{Name: "c-echo", Protocol: ir.UpstreamHTTP1,
			Endpoints: []ir.Endpoint{{Address: "127.0.0.1", Port: uint32(backend)}}}},
	}
}

func benchmarkRouteUpdate(b *testing.B, delta bool, routes int) {
	s := newL4Stack(b)
	s.delta = delta
	l := s.listen("tcp")
	backend := l.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	s.wg.Go(func() { _ = srv.Serve(l) })
	b.Cleanup(func() { _ = srv.Close() })

	x := translate.NewTranslator()
	res, err := x.Translate(routeUpdateGateway(routes, backend, "/probe-0"))
	if err != nil || len(res.Problems) != 0 {
		b.Fatalf("translate: %v %+v", err, res.Problems)
	}
	s.startWith(res)
	client := &http.Client{Transport: &http.Transport{DialContext: s.ns.DialContext}, Timeout: 5 * time.Second}
	get := func(path string) (int, error) {
		req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:10080"+path, nil)
		if err != nil {
			return 0, err
		}
		req.Host = "h0.example.com"
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
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		b.StopTimer()
		probe := "/probe-" + strconv.Itoa(i)
		res, err := x.Translate(routeUpdateGateway(routes, backend, probe))
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
	// The delta Envoy took the changes by VHDS, the other by RDS.
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
	if delta != (reloads >= int64(b.N)) {
		b.Fatalf("VHDS reloads %v after %d updates (delta %v)", st, b.N, delta)
	}
}
