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

// The differential test of route tables in VHDS form (translate's vhds.go).
//
// One Gateway is translated once and served by two xDS servers, each with
// its own Envoy and the same HTTP backends in its own network namespace:
// one Envoy on delta ADS, which gets the route tables in VHDS form (the
// table without virtual hosts, the virtual hosts by VHDS); the other on
// state-of-the-world ADS, which gets each table whole. A generated set of
// requests (hosts in other letter cases, with ports and trailing dots,
// wildcard and catch-all hosts, precedence ties, two listeners with tables
// of their own) must get the same status from the same backend from both,
// before and after changes pushed to both.

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
	client *http.Client
}

func newVHDSSide(t *testing.T, name string, delta bool) *vhdsSide {
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
	return &vhdsSide{name: name, stack: s, client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
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

func TestVHDSMatchesSingleTable(t *testing.T) {
	delta := newVHDSSide(t, "delta (VHDS)", true)
	sotw := newVHDSSide(t, "state of the world (whole tables)", false)
	x := translate.NewTranslator()
	res, err := x.Translate(vhdsGateway(false))
	if err != nil || len(res.Problems) != 0 {
		t.Fatalf("translate: %v %+v", err, res.Problems)
	}
	if len(res.VirtualHosts) != 7 {
		t.Fatalf("%d virtual hosts in VHDS form, want 7", len(res.VirtualHosts))
	}
	for _, side := range []*vhdsSide{delta, sotw} {
		side.stack.startWith(res)
	}
	// The delta Envoy got its virtual hosts by VHDS, the other none.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, side := range []*vhdsSide{delta, sotw} {
		st, err := side.stack.envoy.Stats(ctx, `vhds\..*config_reload$`)
		if err != nil {
			t.Fatal(err)
		}
		var reloads int64
		for _, n := range st {
			reloads += n
		}
		if (reloads > 0) != side.stack.delta {
			t.Fatalf("%s: VHDS reloads %v", side.name, st)
		}
	}

	rng := rand.New(rand.NewPCG(27, 1))
	reqs := vhdsRequests(rng)
	compare := func(phase string) map[outcome]int {
		t.Helper()
		seen := map[outcome]int{}
		for _, r := range reqs {
			a, errA := delta.send(r)
			b, errB := sotw.send(r)
			if errA != nil || errB != nil {
				t.Fatalf("%s: %+v: %v / %v", phase, r, errA, errB)
			}
			if a != b {
				t.Errorf("%s: port %d Host %q %s: %s got %+v, %s got %+v", phase, r.port, r.host, r.path,
					delta.name, a, sotw.name, b)
			}
			seen[a]++
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

	// Changes, through the incremental translator, to both.
	res2, err := x.Translate(vhdsGateway(true))
	if err != nil || len(res2.Problems) != 0 {
		t.Fatalf("translate: %v %+v", err, res2.Problems)
	}
	for _, side := range []*vhdsSide{delta, sotw} {
		if err := side.stack.xds.Update(context.Background(), []*translate.Resources{res2}); err != nil {
			t.Fatal(err)
		}
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
		t.Errorf("the change is not what both serve: %v", seen)
	}
	if n := len(reqs); n < 500 {
		t.Errorf("only %d requests", n)
	}
	t.Logf("%d requests, %d outcomes, equal in both forms", len(reqs), len(slices.Collect(func(yield func(outcome) bool) {
		for o := range seen {
			if !yield(o) {
				return
			}
		}
	})))
}
