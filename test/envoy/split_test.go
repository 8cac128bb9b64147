package envoy

import (
	"context"
	"strings"
	"testing"
)

// TestRouteSplitByHostname serves the quickstart with --route-split
// hostname (one route table per hostname, chosen by Envoy's scoped RDS on
// the Host header) through Envoy: each hostname is routed by its own
// table, a route added for a new hostname is served, and an unknown host
// gets Envoy's 404.
func TestRouteSplitByHostname(t *testing.T) {
	s := startStackWith(t, []string{"--route-split", "hostname"}, nil, quickstartBackends...)
	c := s.client(nil)

	r := s.routed(c, "http://127.0.0.1:8080/api/x", "localhost", "api")
	if got := r.echo.Headers["X-Gateway"]; len(got) != 1 || got[0] != "portico-quickstart" {
		t.Errorf("api got X-Gateway %q", got)
	}
	s.routed(c, "http://127.0.0.1:8080/beta/home", "app.example.com", "app-v2", "X-Beta", "1")
	if r, err := s.get(c, "http://127.0.0.1:8080/old", "app.example.com"); err != nil || r.code != 301 {
		t.Fatalf("redirect through a scoped table: %v %d", err, r.code)
	}
	// The tables are scoped route configurations in Envoy.
	_, dump, err := s.envoy.Admin(context.Background(), "/config_dump?resource=dynamic_scoped_route_configs")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dump, "localhost") || !strings.Contains(dump, "app.example.com") {
		t.Fatalf("Envoy has no scoped route configurations for the quickstart's hostnames:\n%s", truncate(dump, 2000))
	}

	s.write("added.yaml", routeFor("added", "added.example.com", "app-v2"))
	s.routed(c, "http://127.0.0.1:8080/", "added.example.com", "app-v2")
	if r, err := s.get(c, "http://127.0.0.1:8080/", "unknown.example.com"); err != nil || r.code != 404 || r.echo != nil {
		t.Fatalf("unknown host: %v %d", err, r.code)
	}
}
