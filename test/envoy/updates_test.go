package envoy

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Portico refuses, per route, what Envoy would refuse (issue 15): nothing
// it sends a proxy booted from its own bootstrap is rejected. To see how it
// handles a rejection all the same, TestRejectedUpdate runs an Envoy whose
// RE2 program-size limit is lower than the one Portico's bootstraps set
// (lowRE2Limit, a runtime layer given on Envoy's command line): badRegexRoute's
// expression is within Portico's bound and over that Envoy's limit, so it
// rejects the listener's whole RouteConfiguration.
const lowRE2Limit = `layered_runtime: {layers: [{name: test-lower-limits, static_layer: {re2.max_program_size.error_level: 10}}]}`

const badRegexRoute = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bad-regex, namespace: default}
spec:
  parentRefs: [{name: quickstart, sectionName: http}]
  hostnames: [bad.example.com]
  rules:
  - matches:
    - path: {type: RegularExpression, value: "/[a-z]{20}"}
    backendRefs: [{name: app-v1, port: 80}]
`

func routeFor(name, host, service string) string {
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: %s, namespace: default}
spec:
  parentRefs: [{name: quickstart}]
  hostnames: [%s]
  rules:
  - backendRefs: [{name: %s, port: 80}]
`, name, host, service)
}

// TestRejectedUpdate: when Envoy rejects an update, it keeps serving its
// last good configuration, Portico counts the rejection in its metrics
// and logs it, and the next good update is applied.
func TestRejectedUpdate(t *testing.T) {
	s := startStackWith(t, []string{envoyArg("--config-yaml"), envoyArg(lowRE2Limit)}, nil, quickstartBackends...)
	c := s.client(nil)
	s.routed(c, "http://127.0.0.1:8080/api/x", "localhost", "api")
	const nacks = `portico_xds_nacks_total{gateway="default/quickstart",type_url="type.googleapis.com/envoy.config.route.v3.RouteConfiguration"}`
	if n := s.metric(nacks); n != 0 {
		t.Fatalf("NACKs before the bad update: %v", n)
	}

	s.write("bad-regex.yaml", badRegexRoute)
	s.eventually(15*time.Second, "Portico sees the NACK", func() error {
		if n := s.metric(nacks); n < 1 {
			return fmt.Errorf("%s = %v", nacks, n)
		}
		return nil
	})
	if !strings.Contains(s.portico.Output(), "xds config rejected by proxy (NACK)") {
		t.Error("Portico did not log the rejection")
	}
	rejected, err := s.envoy.Stats(context.Background(), "rds.*update_rejected")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, n := range rejected {
		total += n
	}
	if total == 0 {
		t.Errorf("Envoy counts no rejected RDS update: %v", rejected)
	}
	// The last good configuration is still served.
	r, err := s.get(c, "http://127.0.0.1:8080/api/x", "localhost")
	if err != nil || r.echo == nil || r.echo.Pod != "api" {
		t.Fatalf("after the rejected update: %v %d %s", err, r.code, truncate(r.body, 200))
	}
	if r, err := s.get(c, "http://127.0.0.1:8080/abc", "bad.example.com"); err != nil || r.code != 404 {
		t.Fatalf("the rejected route is served: %v %d", err, r.code)
	}

	// Fixed: the next configuration is accepted and served.
	s.remove("bad-regex.yaml")
	s.write("fixed.yaml", routeFor("fixed", "fixed.example.com", "app-v2"))
	s.routed(c, "http://127.0.0.1:8080/", "fixed.example.com", "app-v2")
}

// TestRouteAddedWhileRequestsFlow: requests keep flowing over open
// connections (HTTP/1.1 and HTTP/2 over TLS) while a route is added; none
// fails, no connection is closed, and the new route is served.
func TestRouteAddedWhileRequestsFlow(t *testing.T) {
	s := startStack(t, nil, quickstartBackends...)
	want := quickstartCert(t)
	type flow struct {
		name   string
		url    string
		dials  atomic.Int64
		ok     atomic.Int64
		failed atomic.Int64
		client *http.Client
		err    error
	}
	var flows []*flow
	for _, f := range []struct{ name, url string }{{"http/1.1", "http://127.0.0.1:8080/api/flow"}, {"h2", "https://127.0.0.1:8443/api/flow"}} {
		fl := &flow{name: f.name, url: f.url}
		tr := s.transport(nil)
		if strings.HasPrefix(f.url, "https") {
			tr = s.transport(tlsFor(want, "localhost"))
		}
		tr.MaxConnsPerHost = 1
		dial := tr.DialContext
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			fl.dials.Add(1)
			return dial(ctx, network, addr)
		}
		fl.client = &http.Client{Transport: tr, Timeout: 5 * time.Second}
		s.routed(fl.client, f.url, "localhost", "api")
		flows = append(flows, fl)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, fl := range flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Bounded: at most 20,000 requests or until stopped.
			for i := 0; i < 20000; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r, err := s.get(fl.client, fl.url, "localhost")
				if err != nil || r.echo == nil || r.echo.Pod != "api" {
					fl.failed.Add(1)
					if fl.err == nil {
						fl.err = fmt.Errorf("%v %d %s", err, r.code, truncate(r.body, 200))
					}
					continue
				}
				fl.ok.Add(1)
			}
		}()
	}
	for _, fl := range flows {
		s.eventually(10*time.Second, fl.name+" requests flowing", func() error {
			if fl.ok.Load() < 20 {
				return fmt.Errorf("%d requests so far", fl.ok.Load())
			}
			return nil
		})
	}
	s.write("added.yaml", routeFor("added", "added.example.com", "app-v2"))
	s.routed(s.client(nil), "http://127.0.0.1:8080/", "added.example.com", "app-v2")
	// Keep the flow going a little after the change has been applied.
	for _, fl := range flows {
		n := fl.ok.Load()
		s.eventually(10*time.Second, fl.name+" requests after the change", func() error {
			if fl.ok.Load() < n+50 {
				return fmt.Errorf("%d requests since", fl.ok.Load()-n)
			}
			return nil
		})
	}
	close(stop)
	wg.Wait()
	for _, fl := range flows {
		t.Logf("%s: %d requests, %d failed, %d connections", fl.name, fl.ok.Load(), fl.failed.Load(), fl.dials.Load())
		if fl.failed.Load() != 0 {
			t.Errorf("%s: %d requests failed while the route was added; first: %v", fl.name, fl.failed.Load(), fl.err)
		}
		if fl.dials.Load() != 1 {
			t.Errorf("%s: %d connections, want the first one kept throughout", fl.name, fl.dials.Load())
		}
	}
}
