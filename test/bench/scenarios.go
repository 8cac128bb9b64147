package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ConvergenceDetails are the figures of the status convergence scenario.
type ConvergenceDetails struct {
	Routes               int            `json:"routes"`
	Converged            bool           `json:"converged"`
	AttachedSeconds      float64        `json:"attached_seconds"`       // Gateway counts every route
	AllAcceptedSeconds   float64        `json:"all_accepted_seconds"`   // every route Accepted
	CreateSeconds        float64        `json:"create_seconds"`         // the suite's creates themselves
	AfterCreatesSeconds  float64        `json:"after_creates_seconds"`  // converged, counted from the last create
	WaitedSeconds        float64        `json:"waited_seconds"`         // until converged or given up
	AuditWrites          map[string]int `json:"audit_writes"`           // by resource, conv objects only
	MetricWrites         map[string]int `json:"metric_writes"`          // leader's portico_status_writes_total{result="written"} delta
	GatewayWritesCounted string         `json:"gateway_writes_counted"` // "audit" or "metrics"
	// CPUSeconds is the CPU time each process used from the first create
	// until converged (the replicas as "leader" and "follower").
	CPUSeconds CPUUsage `json:"cpu_seconds,omitempty"`
}

// RunStatusConvergence creates a Gateway "conv", then routes routes attached
// to it at once (32 concurrent creates), and measures until the Gateway's
// listener reports attachedRoutes = routes and every route is Accepted by
// it. Status writes are counted from the audit log (when we run the API
// server) and from the leader's metrics, over the scenario plus 2 s.
func RunStatusConvergence(ctx context.Context, cl *Cluster, leader func() *Replica, replicas []*Replica, routes int, logf func(string, ...any)) (*ConvergenceDetails, error) {
	c := cl.Client
	d := &ConvergenceDetails{Routes: routes}
	gw := Gateway("conv")
	if err := c.Create(ctx, gw); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	defer func() {
		_ = c.DeleteAllOf(context.Background(), &gwv1.HTTPRoute{}, client.InNamespace(RouteNamespace(0)),
			client.MatchingLabels{benchLabel: "conv"})
		for k := 1; k < RouteNS; k++ {
			_ = c.DeleteAllOf(context.Background(), &gwv1.HTTPRoute{}, client.InNamespace(RouteNamespace(k)),
				client.MatchingLabels{benchLabel: "conv"})
		}
		_ = c.Delete(context.Background(), gw)
	}()
	err := poll(ctx, 2*time.Minute, 100*time.Millisecond, func() (bool, error) {
		var g gwv1.Gateway
		if err := c.Get(ctx, client.ObjectKeyFromObject(gw), &g); err != nil {
			return false, nil
		}
		return meta.IsStatusConditionTrue(g.Status.Conditions, string(gwv1.GatewayConditionAccepted)) &&
			len(g.Status.Listeners) == 1, nil
	})
	if err != nil {
		return nil, fmt.Errorf("gateway conv not Accepted: %w", err)
	}
	// Let the Gateway's own writes (addresses, Programmed) finish first.
	time.Sleep(2 * time.Second)
	m0, err := leader().Metrics(ctx)
	if err != nil {
		return nil, err
	}

	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var mu sync.Mutex
	accepted := map[string]bool{}
	var attachedAt, allAt time.Time
	done := make(chan struct{})
	var once sync.Once
	start := time.Now()
	check := func() {
		if !attachedAt.IsZero() && !allAt.IsZero() {
			once.Do(func() { close(done) })
		}
	}
	go watchLoop(wctx, c, &gwv1.HTTPRouteList{}, []client.ListOption{client.MatchingLabels{benchLabel: "conv"}}, func(o client.Object) {
		r, ok := o.(*gwv1.HTTPRoute)
		if !ok {
			return
		}
		ok = routeAccepted(r, "conv")
		mu.Lock()
		defer mu.Unlock()
		accepted[r.Namespace+"/"+r.Name] = ok
		n := 0
		for _, v := range accepted {
			if v {
				n++
			}
		}
		if n == routes && allAt.IsZero() {
			allAt = time.Now()
			check()
		}
	})
	go watchLoop(wctx, c, &gwv1.GatewayList{}, []client.ListOption{client.InNamespace(InfraNamespace)}, func(o client.Object) {
		g, ok := o.(*gwv1.Gateway)
		if !ok || g.Name != "conv" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if len(g.Status.Listeners) == 1 && int(g.Status.Listeners[0].AttachedRoutes) == routes && attachedAt.IsZero() {
			attachedAt = time.Now()
			check()
		}
	})
	time.Sleep(200 * time.Millisecond) // the watches are established
	lead := leader()
	cpu0 := cpuUsage(cl, replicas)
	start = time.Now()
	err = parallel(ctx, 0, routes, 32, func(i int) error {
		r := ProbeRoute(RouteNamespace(i), fmt.Sprintf("conv-%d", i), fmt.Sprintf("/conv-%d-z", i), i)
		r.Labels[benchLabel] = "conv"
		r.Spec.ParentRefs[0].Name = "conv"
		r.Spec.Hostnames = []gwv1.Hostname{gwv1.Hostname(fmt.Sprintf("conv%d.bench.example", i%HostsPerGW))}
		return c.Create(ctx, r)
	})
	if err != nil {
		return nil, err
	}
	d.CreateSeconds = round(time.Since(start).Seconds(), 3)
	logf("status convergence: %d routes created in %.1fs", routes, d.CreateSeconds)
	select {
	case <-done:
		d.Converged = true
	case <-wctx.Done():
	}
	d.WaitedSeconds = round(time.Since(start).Seconds(), 3)
	d.CPUSeconds = cpuUsage(cl, replicas).Since(cpu0).byRole(lead)
	mu.Lock()
	if !attachedAt.IsZero() {
		d.AttachedSeconds = round(attachedAt.Sub(start).Seconds(), 3)
	}
	if !allAt.IsZero() {
		d.AllAcceptedSeconds = round(allAt.Sub(start).Seconds(), 3)
	}
	if d.Converged {
		d.AfterCreatesSeconds = round(max(0, max(d.AttachedSeconds, d.AllAcceptedSeconds)-d.CreateSeconds), 3)
	}
	mu.Unlock()
	// Late writes (e.g. a Gateway rewritten once more) count too.
	_ = poll(ctx, 2*time.Minute, 200*time.Millisecond, func() (bool, error) {
		m, err := leader().Metrics(ctx)
		return err == nil && m.Sum("portico_status_queue_depth", nil) == 0, nil
	})
	time.Sleep(2 * time.Second)
	end := time.Now()
	m1, err := leader().Metrics(ctx)
	if err != nil {
		return nil, err
	}
	d.MetricWrites = map[string]int{}
	for _, kind := range []string{"Gateway", "HTTPRoute"} {
		match := map[string]string{"kind": kind, "result": "written"}
		d.MetricWrites[kind] = int(m1.Sum("portico_status_writes_total", match) - m0.Sum("portico_status_writes_total", match))
	}
	d.GatewayWritesCounted = "metrics"
	if cl.AuditLog != "" {
		w, err := CountStatusWrites(cl.AuditLog, start, end)
		if err != nil {
			return nil, err
		}
		d.AuditWrites = map[string]int{}
		for obj, n := range w.ByObject {
			switch {
			case obj == "gateways/"+InfraNamespace+"/conv":
				d.AuditWrites["gateways"] += n
			case strings.HasPrefix(obj, "httproutes/") && strings.Contains(obj, "/conv-"):
				d.AuditWrites["httproutes"] += n
			}
		}
		d.GatewayWritesCounted = "audit"
	}
	return d, nil
}

// Convergence is the results.json form of d.
func (d *ConvergenceDetails) Convergence() *StatusConvergence {
	s := &StatusConvergence{Seconds: max(d.AttachedSeconds, d.AllAcceptedSeconds)}
	if !d.Converged {
		s.Seconds = d.WaitedSeconds // a lower bound
	} else {
		after := d.AfterCreatesSeconds
		s.AfterCreatesSeconds = &after
	}
	if d.GatewayWritesCounted == "audit" {
		s.GatewayStatusWrites, s.RouteStatusWrites = d.AuditWrites["gateways"], d.AuditWrites["httproutes"]
	} else {
		s.GatewayStatusWrites, s.RouteStatusWrites = d.MetricWrites["Gateway"], d.MetricWrites["HTTPRoute"]
	}
	return s
}

func routeAccepted(r *gwv1.HTTPRoute, gw string) bool {
	for _, p := range r.Status.Parents {
		if string(p.ParentRef.Name) != gw {
			continue
		}
		c := meta.FindStatusCondition(p.Conditions, string(gwv1.RouteConditionAccepted))
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration >= r.Generation
	}
	return false
}

// watchLoop lists-and-watches list (re-watching when the watch ends) and
// calls f with every object seen, until ctx is done.
func watchLoop(ctx context.Context, c client.WithWatch, list client.ObjectList, opts []client.ListOption, f func(client.Object)) {
	for ctx.Err() == nil {
		w, err := c.Watch(ctx, list, opts...)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				if o, ok := ev.Object.(client.Object); ok {
					f(o)
				}
			}
		}
		w.Stop()
	}
}

// FailoverDetails are the figures of one failover.
type FailoverDetails struct {
	Signal      string  `json:"signal"`
	LeaderMs    float64 `json:"leader_ms"`              // until the other replica reports leading
	ConvergedMs float64 `json:"converged_ms,omitempty"` // until a route created at the kill is Accepted and the new leader's queue is empty
	Converged   *bool   `json:"converged,omitempty"`    // nil: not waited for
}

// RunFailover stops the leader with sig, and creates a route at once: it
// measures until the other replica leads and, with converge set, until
// that route is Accepted (only a leader writes status) with the new
// leader's status queue empty.
func RunFailover(ctx context.Context, c client.Client, old, next *Replica, sig syscall.Signal, tag string, converge bool) (*FailoverDetails, error) {
	d := &FailoverDetails{Signal: map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGKILL: "SIGKILL"}[sig]}
	r := ProbeRoute(RouteNamespace(0), "failover-"+tag, "/failover-"+tag+"-z", 1)
	r.Spec.ParentRefs[0].Name = gwv1.ObjectName(GatewayName(1))
	r.Spec.Hostnames = []gwv1.Hostname{gwv1.Hostname(Hostname(1))}
	start := time.Now()
	if err := old.Signal(sig); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, r); err != nil {
		return nil, err
	}
	defer func() { _ = c.Delete(context.Background(), r) }()
	err := poll(ctx, 2*time.Minute, 10*time.Millisecond, func() (bool, error) {
		ok, err := next.Leader(ctx)
		return err == nil && ok, nil
	})
	if err != nil {
		return d, fmt.Errorf("no new leader: %w", err)
	}
	d.LeaderMs = ms(time.Since(start))
	if !converge {
		return d, nil
	}
	err = poll(ctx, 5*time.Minute, 20*time.Millisecond, func() (bool, error) {
		var got gwv1.HTTPRoute
		if err := c.Get(ctx, client.ObjectKeyFromObject(r), &got); err != nil || !routeAccepted(&got, GatewayName(1)) {
			return false, nil
		}
		m, err := next.Metrics(ctx)
		return err == nil && m.Sum("portico_status_queue_depth", nil) == 0, nil
	})
	d.Converged = check(err == nil)
	d.ConvergedMs = ms(time.Since(start))
	return d, nil
}

// LeaseDuration reads the leader Lease's leaseDurationSeconds.
func LeaseDuration(ctx context.Context, cs kubernetes.Interface) (float64, error) {
	l, err := cs.CoordinationV1().Leases(ControllerNamespace).Get(ctx, "portico-leader", metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	if l.Spec.LeaseDurationSeconds == nil {
		return 0, fmt.Errorf("lease without leaseDurationSeconds")
	}
	return float64(*l.Spec.LeaseDurationSeconds), nil
}
