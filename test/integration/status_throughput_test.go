package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/controller"
	"github.com/portico-dev/portico/internal/provider/kube"
	"github.com/portico-dev/portico/internal/status"
)

// controller-runtime warns on stderr when no logger is set after 30s; its
// logs are not wanted here.
func init() { ctrllog.SetLogger(logr.Discard()) }

// statusLimits are the status writer's client-side limits of one run.
type statusLimits struct {
	name       string
	qps        float32
	burst      int
	workers    int
	otherQPS   float32 // the client of everything else
	otherBurst int
}

var (
	// oldStatusLimits are the defaults before issue 6: one client for
	// everything at 50 QPS / burst 100, and 4 workers.
	oldStatusLimits = statusLimits{"old", 50, 100, 4, 50, 100}
	// newStatusLimits are today's defaults of `portico controller`.
	newStatusLimits = statusLimits{"new", controller.DefaultStatusQPS, controller.DefaultStatusBurst, status.DefaultWorkers, 50, 100}
)

// statusRun is what one status-convergence run measured.
type statusRun struct {
	routes int
	// create: seconds to create the routes (32 concurrent creates), and
	// from the end of the creates to convergence. takeover: seconds from
	// the replica becoming leader, the routes existing already.
	createSeconds, convergedSeconds float64
	// Of convergedSeconds: when every route was accepted, and when the
	// Gateway counted them all.
	acceptedSeconds, attachedSeconds float64
	gatewayWrites, routeWrites       int64
	maxRouteWrites                   int64 // most writes of one route
}

func (r statusRun) String() string {
	return fmt.Sprintf("routes=%d creates=%.2fs converged=%.2fs (routes accepted %.2fs, attachedRoutes %.2fs) gatewayWrites=%d routeWrites=%d maxWritesPerRoute=%d",
		r.routes, r.createSeconds, r.convergedSeconds, r.acceptedSeconds, r.attachedSeconds, r.gatewayWrites, r.routeWrites, r.maxRouteWrites)
}

// writeCounter counts a replica's successful status writes per object.
type writeCounter struct {
	on       atomic.Bool
	mu       sync.Mutex
	byObject map[string]int64 // "<resource>/<ns>/<name>"
}

func (w *writeCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return rtFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil || !w.on.Load() || resp.StatusCode >= 300 ||
			(req.Method != http.MethodPut && req.Method != http.MethodPatch) || !strings.HasSuffix(req.URL.Path, "/status") {
			return resp, err
		}
		// .../namespaces/<ns>/<resource>/<name>/status
		parts := strings.Split(strings.TrimSuffix(req.URL.Path, "/status"), "/")
		if len(parts) >= 4 {
			n := len(parts)
			w.mu.Lock()
			w.byObject[parts[n-2]+"/"+parts[n-3]+"/"+parts[n-1]]++
			w.mu.Unlock()
		}
		return resp, err
	})
}

// counts returns the writes of resource (e.g. "httproutes"): the total and
// the most of one object.
func (w *writeCounter) counts(resource string) (total, most int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, n := range w.byObject {
		if strings.HasPrefix(k, resource+"/") {
			total += n
			most = max(most, n)
		}
	}
	return total, most
}

// measureStatus creates a namespace with a GatewayClass, a Gateway "conv"
// and a Service, and runs one replica with lim. With takeover, the routes
// are created first and the run is timed from the replica becoming leader;
// otherwise the replica runs first and the routes are created 32 at a time,
// as the benchmark suite does. It returns when the Gateway reports
// attachedRoutes = routes and every route is Accepted with resolved refs.
func measureStatus(tb testing.TB, routes int, lim statusLimits, takeover bool) statusRun {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	ns, class, ctrl := "st-"+id, "portico-st-"+id, "portico.dev/st-"+id
	// The test's own client is not what is measured: no client-side limit.
	cfg := rest.CopyConfig(restCfg)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: kube.NewScheme()})
	if err != nil {
		tb.Fatal(err)
	}
	mustCreate := func(o client.Object) {
		tb.Helper()
		if err := c.Create(ctx, o); err != nil {
			tb.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	mustCreate(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	mustCreate(&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec: gwv1.GatewayClassSpec{ControllerName: gwv1.GatewayController(ctrl)}})
	tb.Cleanup(func() {
		// envtest runs no namespace controller: delete the routes, so that
		// later tests' replicas do not list them.
		_ = c.DeleteAllOf(context.Background(), &gwv1.HTTPRoute{}, client.InNamespace(ns))
		_ = c.Delete(context.Background(), &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: class}})
		_ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	mustCreate(&gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "conv"},
		Spec: gwv1.GatewaySpec{GatewayClassName: gwv1.ObjectName(class), Listeners: []gwv1.Listener{{
			Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType,
		}}},
	})
	fx := &fixture{ns: ns}
	mustCreate(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "svc"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	})
	mustCreate(fx.slice("svc", "10.0.0.1"))
	route := func(i int) *gwv1.HTTPRoute {
		return &gwv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("r%04d", i)},
			Spec: gwv1.HTTPRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "conv"}}},
				Hostnames:       []gwv1.Hostname{gwv1.Hostname(fmt.Sprintf("h%d.example", i%20))},
				Rules: []gwv1.HTTPRouteRule{{
					Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{
						Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To(fmt.Sprintf("/r%d", i)),
					}}},
					BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
						BackendObjectReference: gwv1.BackendObjectReference{Name: "svc", Port: ptr.To[gwv1.PortNumber](80)},
					}}},
				}},
			},
		}
	}
	createRoutes := func() {
		tb.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, routes)
		next := atomic.Int64{}
		for range 32 {
			wg.Go(func() {
				for i := int(next.Add(1)) - 1; i < routes; i = int(next.Add(1)) - 1 {
					if err := c.Create(ctx, route(i)); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			tb.Fatal(err)
		}
	}

	// Watch the Gateway and the routes for convergence.
	conv := newConvergence(routes, ctrl)
	var watchers sync.WaitGroup
	defer watchers.Wait()
	defer cancel() // before the watchers are waited for
	watchInto(ctx, tb, &watchers, c, &gwv1.GatewayList{}, ns, conv.observe)
	watchInto(ctx, tb, &watchers, c, &gwv1.HTTPRouteList{}, ns, conv.observe)

	if takeover {
		createRoutes()
	}
	counter := &writeCounter{byObject: map[string]int64{}}
	rcfg := rest.CopyConfig(restCfg)
	rcfg.WrapTransport = counter.wrap
	rcfg.QPS, rcfg.Burst = lim.otherQPS, lim.otherBurst
	xl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	al, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	opts := controller.Options{
		RESTConfig: rcfg, Namespace: ns, ControllerName: ctrl, LeaderElectionID: leaseName, Identity: "st",
		LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry,
		StatusQPS: lim.qps, StatusBurst: lim.burst, StatusWorkers: lim.workers,
		XDSListener: xl, AdminListener: al,
	}
	if lim.name == oldStatusLimits.name {
		// Before the status client was separate, status writes shared
		// the one client and its limiter.
		opts.StatusQPS, opts.StatusBurst = lim.otherQPS, lim.otherBurst
	}
	ctl, err := controller.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ctl.Run(rctx) }()
	defer func() {
		rcancel()
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("replica: %v", err)
			}
		case <-time.After(30 * time.Second):
			tb.Errorf("replica did not stop")
		}
	}()
	waitFor := func(timeout time.Duration, what string, cond func() bool) {
		tb.Helper()
		deadline := time.Now().Add(timeout)
		for !cond() {
			if time.Now().After(deadline) {
				tb.Fatalf("timed out after %s waiting for %s", timeout, what)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}

	run := statusRun{routes: routes}
	var start time.Time
	if takeover {
		counter.on.Store(true)
		waitFor(30*time.Second, "leadership", ctl.IsLeader)
		start = time.Now()
	} else {
		waitFor(30*time.Second, "leadership and the Gateway's status", func() bool {
			return ctl.IsLeader() && conv.gatewayReady()
		})
		counter.on.Store(true)
		start = time.Now()
		createRoutes()
		run.createSeconds = time.Since(start).Seconds()
		start = time.Now()
	}
	select {
	case <-conv.done:
	case <-time.After(5 * time.Minute):
		tb.Fatalf("no convergence within 5 minutes: %s", conv)
	}
	// The watch may report the last write before the replica saw its
	// response: wait for the counts (and the queue) to settle.
	waitFor(10*time.Second, "the writes to be counted and the queue to drain", func() bool {
		n, _ := counter.counts("httproutes")
		return n >= int64(routes) && ctl.StatusPending() == 0
	})
	accepted, attached, both := conv.at()
	run.convergedSeconds = max(both.Sub(start).Seconds(), 0)
	run.acceptedSeconds = max(accepted.Sub(start).Seconds(), 0)
	run.attachedSeconds = max(attached.Sub(start).Seconds(), 0)
	run.gatewayWrites, _ = counter.counts("gateways")
	run.routeWrites, run.maxRouteWrites = counter.counts("httproutes")
	return run
}

// convergence tracks, from watch events, whether the Gateway reports
// attachedRoutes = routes and every route is Accepted by ctrl.
type convergence struct {
	routes int
	ctrl   gwv1.GatewayController
	done   chan struct{}

	mu       sync.Mutex
	attached int32
	gwOK     bool // Accepted and Programmed at its generation
	accepted map[string]bool
	n        int
	// when all routes were accepted, when the Gateway counted them all,
	// and the later of the two.
	allAccepted, allAttached, when time.Time
}

func newConvergence(routes int, ctrl string) *convergence {
	return &convergence{routes: routes, ctrl: gwv1.GatewayController(ctrl), done: make(chan struct{}), accepted: map[string]bool{}}
}

func (c *convergence) observe(o client.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch o := o.(type) {
	case *gwv1.Gateway:
		c.gwOK = condIs(o.Status.Conditions, string(gwv1.GatewayConditionAccepted), metav1.ConditionTrue, o.Generation) &&
			condIs(o.Status.Conditions, string(gwv1.GatewayConditionProgrammed), metav1.ConditionTrue, o.Generation)
		if len(o.Status.Listeners) == 1 {
			c.attached = o.Status.Listeners[0].AttachedRoutes
		}
	case *gwv1.HTTPRoute:
		ok := false
		for _, p := range o.Status.Parents {
			if p.ControllerName == c.ctrl {
				ok = condIs(p.Conditions, string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, o.Generation) &&
					condIs(p.Conditions, string(gwv1.RouteConditionResolvedRefs), metav1.ConditionTrue, o.Generation)
			}
		}
		if ok != c.accepted[o.Name] {
			c.accepted[o.Name] = ok
			if ok {
				c.n++
			} else {
				c.n--
			}
		}
	}
	now := time.Now()
	if c.allAccepted.IsZero() && c.n == c.routes {
		c.allAccepted = now
	}
	if c.allAttached.IsZero() && int(c.attached) == c.routes {
		c.allAttached = now
	}
	if c.when.IsZero() && !c.allAccepted.IsZero() && !c.allAttached.IsZero() {
		c.when = now
		close(c.done)
	}
}

func (c *convergence) gatewayReady() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gwOK
}

// at returns when the routes were all accepted, when the Gateway
// counted them all, and when both were true.
func (c *convergence) at() (accepted, attached, both time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.allAccepted, c.allAttached, c.when
}

func (c *convergence) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("attachedRoutes=%d accepted=%d of %d", c.attached, c.n, c.routes)
}

// watchInto lists and watches the objects of list's kind in ns until ctx
// ends, handing each to fn; a watch that closes is opened again. The
// watching goroutine is counted in wg.
func watchInto(ctx context.Context, tb testing.TB, wg *sync.WaitGroup, c client.WithWatch, list client.ObjectList, ns string, fn func(client.Object)) {
	tb.Helper()
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		tb.Fatal(err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		tb.Fatal(err)
	}
	for _, it := range items {
		fn(it.(client.Object))
	}
	rv := list.(metav1.ListInterface).GetResourceVersion()
	w, err := c.Watch(ctx, list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
	if err != nil {
		tb.Fatal(err)
	}
	wg.Go(func() {
		defer func() { w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					// Closed by the server: start over from the current resourceVersion.
					if ctx.Err() != nil {
						return
					}
					w.Stop()
					nw, err := c.Watch(ctx, list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
					if err != nil {
						return
					}
					w = nw
					continue
				}
				if ev.Type == watch.Error {
					continue
				}
				if o, ok := ev.Object.(client.Object); ok {
					rv = o.GetResourceVersion()
					if ev.Type != watch.Deleted {
						fn(o)
					}
				}
			}
		}
	})
}

// TestStatusWritesPerObject checks, at the default limits, that a burst
// of route creations costs exactly one status write per route and that the
// Gateway, whose attachedRoutes changes with every route, is written about
// once per write interval instead of once per route.
func TestStatusWritesPerObject(t *testing.T) {
	const routes = 300
	r := measureStatus(t, routes, newStatusLimits, false)
	t.Logf("default limits, %s", r)
	if r.routeWrites != routes || r.maxRouteWrites != 1 {
		t.Errorf("%d route status writes (at most %d for one route), want exactly one per route", r.routeWrites, r.maxRouteWrites)
	}
	// The Gateway's writes are at least a write interval apart, so their
	// number is bounded by the time the routes took to converge.
	limit := int64((r.createSeconds+r.convergedSeconds)/status.DefaultWriteInterval.Seconds()) + 2
	if r.gatewayWrites > limit {
		t.Errorf("%d Gateway status writes in %.1fs, want at most %d (one per %s)", r.gatewayWrites,
			r.createSeconds+r.convergedSeconds, limit, status.DefaultWriteInterval)
	}
}

// BenchmarkStatusConvergence measures status convergence for 1,000 routes
// (PORTICO_BENCH_ROUTES to change) at the old and the new default limits:
// "create" creates the routes while the replica runs (as the benchmark
// suite's status_convergence_1000 does) and reports the seconds from the
// end of the creates; "takeover" starts the replica once the routes exist
// and reports the seconds from its election to convergence: the time the
// writer needs for that many route status writes. Run it with
//
//	go test ./test/integration/ -run '^$' -bench StatusConvergence -benchtime 1x
func BenchmarkStatusConvergence(b *testing.B) {
	routes := 1000
	if v, err := strconv.Atoi(os.Getenv("PORTICO_BENCH_ROUTES")); err == nil && v > 0 {
		routes = v
	}
	limits := []statusLimits{oldStatusLimits, newStatusLimits}
	if v, err := strconv.Atoi(os.Getenv("PORTICO_BENCH_WORKERS")); err == nil && v > 0 {
		// Explore: the new limits with another number of workers.
		l := newStatusLimits
		l.name, l.workers = fmt.Sprintf("new-%dworkers", v), v
		limits = []statusLimits{l}
	}
	for _, scenario := range []string{"create", "takeover"} {
		for _, lim := range limits {
			b.Run(fmt.Sprintf("%s/limits=%s", scenario, lim.name), func(b *testing.B) {
				var r statusRun
				for range b.N {
					r = measureStatus(b, routes, lim, scenario == "takeover")
				}
				b.ReportMetric(r.convergedSeconds, "s-converged")
				b.ReportMetric(r.createSeconds, "s-creates")
				b.ReportMetric(float64(r.gatewayWrites), "gateway-writes")
				b.ReportMetric(float64(r.routeWrites), "route-writes")
				b.ReportMetric(0, "ns/op")
				b.Logf("%s limits=%+v: %s", scenario, lim, r)
			})
		}
	}
}
