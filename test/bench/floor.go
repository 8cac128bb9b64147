package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// FloorDetails are the figures of the status floor: what the API server
// of this machine allows for the status convergence scenario's writes,
// whatever the controller.
type FloorDetails struct {
	Routes        int     `json:"routes"`
	Seconds       float64 `json:"seconds"`        // first create until the last status write returned
	CreateSeconds float64 `json:"create_seconds"` // the creates alone, as in the scenario
	// CPUSeconds is the CPU time each process used meanwhile.
	CPUSeconds CPUUsage `json:"cpu_seconds,omitempty"`
}

const (
	floorLabel      = "floor"
	floorGateway    = "floor-none" // no such Gateway: Portico leaves the routes' status alone
	floorController = "bench.portico.dev/floor"
)

// RunStatusFloor does the API work of the status convergence scenario with
// no controller in the loop: routes routes are created by 32 workers, as
// in RunStatusConvergence, and the suite itself writes each one's status
// (one parent, Accepted) as soon as its create returns, with 8 workers
// (the controller's default) taking the created routes in order. The time
// until the last write returns is the floor of any controller's
// convergence on this cluster: the API server, etcd and the watchers (the
// replicas still see every route) are as busy as in the scenario, minus
// the controller's watch, translation and queueing. The routes name a
// Gateway that does not exist, which Portico does not write status for.
func RunStatusFloor(ctx context.Context, cl *Cluster, lead *Replica, replicas []*Replica, routes int) (*FloorDetails, error) {
	c := cl.Client
	d := &FloorDetails{Routes: routes}
	defer func() {
		for k := range RouteNS {
			_ = c.DeleteAllOf(context.Background(), &gwv1.HTTPRoute{}, client.InNamespace(RouteNamespace(k)),
				client.MatchingLabels{benchLabel: floorLabel})
		}
	}()
	created := make(chan *gwv1.HTTPRoute, routes)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		writeErr error
	)
	for range 8 {
		wg.Go(func() {
			for r := range created {
				if err := writeFloorStatus(ctx, c, r); err != nil {
					mu.Lock()
					writeErr = errors.Join(writeErr, err)
					mu.Unlock()
				}
			}
		})
	}
	cpu0 := cpuUsage(cl, replicas)
	start := time.Now()
	err := parallel(ctx, 0, routes, 32, func(i int) error {
		r := ProbeRoute(RouteNamespace(i), fmt.Sprintf("floor-%d", i), fmt.Sprintf("/floor-%d-z", i), i)
		r.Labels[benchLabel] = floorLabel
		r.Spec.ParentRefs[0].Name = floorGateway
		if err := c.Create(ctx, r); err != nil {
			return err
		}
		created <- r
		return nil
	})
	d.CreateSeconds = round(time.Since(start).Seconds(), 3)
	close(created)
	wg.Wait()
	d.Seconds = round(time.Since(start).Seconds(), 3)
	d.CPUSeconds = cpuUsage(cl, replicas).Since(cpu0).byRole(lead)
	if err != nil {
		return nil, err
	}
	if writeErr != nil {
		return nil, writeErr
	}
	return d, nil
}

// writeFloorStatus writes r's status as a controller accepting it would:
// one update of the status subresource, at the resourceVersion the create
// returned.
func writeFloorStatus(ctx context.Context, c client.Client, r *gwv1.HTTPRoute) error {
	r.Status.Parents = []gwv1.RouteParentStatus{{
		ParentRef:      r.Spec.ParentRefs[0],
		ControllerName: floorController,
		Conditions: []metav1.Condition{{
			Type: string(gwv1.RouteConditionAccepted), Status: metav1.ConditionTrue,
			Reason: string(gwv1.RouteReasonAccepted), Message: "Accepted by the bench's floor writer",
			ObservedGeneration: r.Generation, LastTransitionTime: metav1.Now(),
		}},
	}}
	if err := c.Status().Update(ctx, r); err != nil {
		return fmt.Errorf("floor status of %s/%s: %w", r.Namespace, r.Name, err)
	}
	return nil
}
