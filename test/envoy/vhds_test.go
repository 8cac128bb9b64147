package envoy

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/testenv"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// The differential test of route tables in VHDS form (translate's vhds.go)
// and in scoped form (translate's scoped.go) against the single table.
//
// One Gateway is served by four xDS servers, each with its own Envoy and
// the same HTTP backends in its own network namespace: an Envoy on
// state-of-the-world ADS, which gets each table whole (the reference); one
// on delta ADS, which gets the route tables in VHDS form (the table
// without virtual hosts, the virtual hosts by VHDS); and two, one on each
// protocol, that get every table in scoped form (a route config and a
// scope per virtual host, the host-scope Lua filter by ECDS). A generated
// set of requests (hosts in other letter cases, with ports, bad ports,
// IPv6 literals and trailing dots, wildcard and catch-all hosts,
// precedence ties, two listeners with tables of their own) must get the
// same status from the same backend from all, before and after changes
// pushed to all through each side's incremental translator.

// vhdsPorts are the listener ports of the test Gateway; vhdsBackendPort
// the first of the backends' ports (fixed: each namespace holds only the
// test's sockets).
var vhdsPorts = []uint32{10080, 10081}

const vhdsBackendPort = 21000

// vhdsBackends names the backends; each answers with its name.
var vhdsBackends = []string{"exact-a", "exact-b", "wild", "wild-deep", "all", "other-a", "other-wild", "changed"}

func vhdsGateway(changed bool) *ir.Gateway {
	fwd := func(b string) *ir.Forward {
		return &ir.Forward{Backends: []*ir.WeightedBackend{{Cluster: "c-" + b, Weight: 1}}}
	}
	pfx := func(v string) ir.Match { return ir.Match{Path: &ir.PathMatch{Type: ir.PathPrefix, Value: v}} }
	vh := func(name, host string, routes ...*ir.Route) *ir.VirtualHost {
		return &ir.VirtualHost{Name: name, Hostname: host, Routes: routes}
	}
	r := func(name, path, backend string) *ir.Route {
		return &ir.Route{Name: name, Match: pfx(path), Forward: fwd(backend)}
	}
	direct := func(name, path string, status uint32, body string) *ir.Route {
		return &ir.Route{Name: name, Match: pfx(path), DirectResponse: &ir.DirectResponse{Status: status, Body: body}}
	}
	aRoutes := []*ir.Route{r("a-x", "/x", "exact-a"), direct("a-teapot", "/tea", 418, "teapot"), r("a-root", "/", "exact-a")}
	if changed {
		aRoutes = []*ir.Route{r("a-x", "/x", "changed"), direct("a-teapot", "/tea", 418, "teapot"), r("a-root", "/", "exact-a")}
	}
	first := []*ir.VirtualHost{
		vh("a", "a.example.com", aRoutes...),
		vh("b", "B.Example.com", r("b-root", "/", "exact-b")),
		vh("w", "*.example.com", r("w-y", "/y", "wild"), r("w-root", "/", "wild")),
		vh("wd", "*.deep.example.com", r("wd-root", "/", "wild-deep")),
		vh("all", "", r("all-x", "/x", "all"), direct("all-root", "/", 404, "catch-all")),
	}
	second := []*ir.VirtualHost{
		vh("a", "a.example.com", r("a2-root", "/", "other-a")),
		vh("w", "*.other.example", r("w2-root", "/", "other-wild")),
	}
	if changed {
		// A hostname comes and one goes; the catch-all of the first
		// table changes.
		second = append(second[:1], vh("n", "new.example.com", r("n-root", "/", "changed")))
		first[4] = vh("all", "", r("all-x", "/x", "all"), direct("all-root", "/", 410, "gone"))
	}
	gw := &ir.Gateway{Namespace: "default", Name: "vhds"}
	for i, hosts := range [][]*ir.VirtualHost{first, second} {
		name := fmt.Sprintf("http-%d", vhdsPorts[i])
		gw.Listeners = append(gw.Listeners, &ir.Listener{Name: name, Port: vhdsPorts[i], Protocol: ir.ProtocolHTTP,
			FilterChains: []*ir.FilterChain{{Name: name, RouteConfig: &ir.RouteConfig{Name: name, VirtualHosts: hosts}}}})
	}
	for i, b := range vhdsBackends {
		gw.Clusters = append(gw.Clusters, &ir.Cluster{Name: "c-" + b, Protocol: ir.UpstreamHTTP1,
			Endpoints: []ir.Endpoint{{Address: "127.0.0.1", Port: uint32(vhdsBackendPort + i)}}})
	}
	return gw
}

// vhdsRequests are the generated requests: every listener, path and host
// variant. Hosts are the Gateway's hostnames and others, in other letter
// cases, with a port and with a trailing dot.
func vhdsRequests(rng *rand.Rand) []vhdsRequest {
	hosts := []string{"a.example.com", "b.example.com", "x.example.com", "x.y.example.com", "deep.example.com",
		"q.deep.example.com", "example.com", "other.example", "z.other.example", "new.example.com", "unknown.test", "localhost"}
	var variants []string
	for _, h := range hosts {
		variants = append(variants, h, strings.ToUpper(h), h+":80", h+":10080", h+".")
		mixed := []byte(h)
		for i := range mixed {
			if rng.IntN(2) == 0 {
				mixed[i] = strings.ToUpper(string(mixed[i]))[0]
			}
		}
		variants = append(variants, string(mixed), string(mixed)+":1")
	}
	// What the port rule of ignore_port_in_host_matching must tell apart.
	variants = append(variants, "a.example.com:", "a.example.com:http", "a.example.com:+80", "a.example.com:99999999999",
		"a.example.com:4294967295", "a.example.com:4294967296", "A.Example.Com.:80", "[::1]", "[::1]:80", "[a.example.com]:80",
		"x.example.com:80:80", "*.example.com", "example.com.:80", ".example.com")
	var out []vhdsRequest
	for _, port := range vhdsPorts {
		for _, h := range variants {
			for _, p := range []string{"/", "/x", "/x/1", "/y", "/tea"} {
				out = append(out, vhdsRequest{port: port, host: h, path: p})
			}
		}
	}
	return out
}

type vhdsRequest struct {
	port       uint32
	host, path string
}

// outcome is what a request got: the status and who answered (a
// backend's name, or the body of a direct response).
type outcome struct {
	status int
	by     string
}

// vhdsSide is one of the two data planes.
type vhdsSide struct {
	name   string
	stack  *l4Stack
	x      *translate.Translator
	client *http.Client
}

func newVHDSSide(t *testing.T, name string, delta bool, opts translate.Options) *vhdsSide {
	s := newL4Stack(t)
	s.delta = delta
	for i, b := range vhdsBackends {
		l, err := testenv.InNetns(s.ns, func() (net.Listener, error) {
			return net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", vhdsBackendPort+i))
		})
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-Backend", b)
			_, _ = io.WriteString(w, b)
		})}
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	tr := &http.Transport{DialContext: s.ns.DialContext, DisableKeepAlives: true}
	return &vhdsSide{name: name, stack: s, x: translate.NewTranslatorWith(opts), client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

func (v *vhdsSide) send(r vhdsRequest) (outcome, error) {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", r.port, r.path), nil)
	if err != nil {
		return outcome{}, err
	}
	req.Host = r.host
	resp, err := v.client.Do(req)
	if err != nil {
		return outcome{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return outcome{}, err
	}
	by := resp.Header.Get("X-Backend")
	if by == "" {
		by = "direct:" + string(body)
	}
	return outcome{status: resp.StatusCode, by: by}, nil
}

// translate translates gw with the side's translator.
func (v *vhdsSide) translate(t *testing.T, gw *ir.Gateway) *translate.Resources {
	t.Helper()
	res, err := v.x.Translate(gw)
	if err != nil || len(res.Problems) != 0 {
		t.Fatalf("%s: translate: %v %+v", v.name, err, res.Problems)
	}
	return res
}

// reloads is the sum of the Envoy stats matching re.
func (v *vhdsSide) reloads(t *testing.T, re string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := v.stack.envoy.Stats(ctx, re)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, c := range st {
		n += c
	}
	return n
}

func TestVHDSMatchesSingleTable(t *testing.T) {
	vhdsOnly := translate.Options{ScopeAtRoutes: -1}
	scopeAll := translate.Options{ScopeAtRoutes: 1}
	sotw := newVHDSSide(t, "state of the world (whole tables)", false, vhdsOnly)
	sides := []*vhdsSide{
		sotw,
		newVHDSSide(t, "delta (VHDS)", true, vhdsOnly),
		newVHDSSide(t, "delta (scoped)", true, scopeAll),
		newVHDSSide(t, "state of the world (scoped)", false, scopeAll),
	}
	for i, side := range sides {
		res := side.translate(t, vhdsGateway(false))
		scoped := i >= 2
		if want := map[bool]int{false: 0, true: 7}[scoped]; len(res.ScopedRoutes) != want {
			t.Fatalf("%s: %d scopes, want %d", side.name, len(res.ScopedRoutes), want)
		}
		if len(res.VirtualHosts) != 7 && !scoped {
			t.Fatalf("%d virtual hosts in VHDS form, want 7", len(res.VirtualHosts))
		}
		side.stack.startWith(res)
	}
	// The delta Envoy of the VHDS form got its virtual hosts by VHDS, the
	// scoped ones their tables by scoped RDS, the reference neither.
	for i, side := range sides {
		vhds, srds := side.reloads(t, `vhds\..*config_reload$`), side.reloads(t, `scoped_rds\..*config_reload$`)
		if (vhds > 0) != (i == 1) || (srds > 0) != (i >= 2) {
			t.Fatalf("%s: VHDS reloads %d, scoped RDS reloads %d", side.name, vhds, srds)
		}
	}

	rng := rand.New(rand.NewPCG(27, 1))
	reqs := vhdsRequests(rng)
	compare := func(phase string) map[outcome]int {
		t.Helper()
		seen := map[outcome]int{}
		for _, r := range reqs {
			want, err := sotw.send(r)
			if err != nil {
				t.Fatalf("%s: %+v: %s: %v", phase, r, sotw.name, err)
			}
			for _, side := range sides[1:] {
				got, err := side.send(r)
				if err != nil {
					t.Fatalf("%s: %+v: %s: %v", phase, r, side.name, err)
				}
				if got != want {
					t.Errorf("%s: port %d Host %q %s: %s got %+v, %s got %+v", phase, r.port, r.host, r.path,
						side.name, got, sotw.name, want)
				}
			}
			seen[want]++
		}
		return seen
	}
	seen := compare("initial")
	// Not vacuous: every backend but the one routes point at only after
	// the change answered, and so did direct responses and unmatched
	// requests.
	for _, b := range vhdsBackends {
		if b != "changed" && seen[outcome{200, b}] == 0 {
			t.Errorf("no request reached %s: %v", b, seen)
		}
	}
	for _, o := range []outcome{{418, "direct:teapot"}, {404, "direct:catch-all"}, {404, "direct:"}} {
		if seen[o] == 0 {
			t.Errorf("no request got %+v: %v", o, seen)
		}
	}

	// Changes, through each side's incremental translator.
	for _, side := range sides {
		res2 := side.translate(t, vhdsGateway(true))
		if err := side.stack.xds.Update(context.Background(), []*translate.Resources{res2}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if t.Failed() {
				_, dump, _ := side.stack.envoy.Admin(context.Background(), "/config_dump?resource=dynamic_scoped_route_configs")
				_, rd, _ := side.stack.envoy.Admin(context.Background(), "/config_dump?resource=dynamic_route_configs&mask=route_config.name,version_info")
				t.Logf("%s: scopes %s\nroute configs %s", side.name, dump, rd)
			}
		}()
		eventually(t, 15*time.Second, side.name+" serves the change", func() error {
			for _, probe := range []vhdsRequest{{10080, "a.example.com", "/x"}, {10081, "new.example.com", "/"}, {10080, "zzz", "/"}} {
				got, err := side.send(probe)
				if err != nil {
					return err
				}
				if probe.port == 10080 && probe.host == "zzz" {
					if got != (outcome{410, "direct:gone"}) {
						return fmt.Errorf("%+v: %+v", probe, got)
					}
				} else if got.by != "changed" {
					return fmt.Errorf("%+v: %+v", probe, got)
				}
			}
			return nil
		})
	}
	seen = compare("after the change")
	if seen[outcome{200, "changed"}] == 0 || seen[outcome{200, "other-wild"}] != 0 {
		t.Errorf("the change is not what all serve: %v", seen)
	}
	if n := len(reqs); n < 500 {
		t.Errorf("only %d requests", n)
	}
	t.Logf("%d requests, %d outcomes, equal in every form", len(reqs), len(slices.Collect(func(yield func(outcome) bool) {
		for o := range seen {
			if !yield(o) {
				return
			}
		}
	})))
}
