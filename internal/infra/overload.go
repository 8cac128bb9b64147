package infra

import (
	"time"

	overloadv3 "github.com/envoyproxy/go-control-plane/envoy/config/overload/v3"
	connectionsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	fixedheapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
)

// Envoy's overload manager, in every bootstrap Portico writes:
//
//   - the number of client connections of the proxy (all listeners but
//     the metrics listener) is capped at MaxDownstreamConnections:
//     overload.maxDownstreamConnections, else 50000
//     (envoy.resource_monitors.global_downstream_max_connections); a
//     connection over the cap is closed as soon as it is accepted;
//   - when the Envoy container has a memory limit, its heap is watched
//     (envoy.resource_monitors.fixed_heap) against a maximum of
//     overload.maxHeapPercent (else 90) percent of the limit, the rest
//     being left to what the heap does not count (the binary, thread
//     stacks, fragmentation). Of that maximum: from 90% Envoy returns
//     freed memory to the system (shrink_heap); from 95% it answers new
//     requests with 503 (stop_accepting_requests) and asks clients to
//     close their connections (disable_http_keepalive, which drains
//     HTTP/2 connections with GOAWAY); from 98% it closes new TCP
//     connections as it accepts them (the load-shed point
//     tcp_listener_accept). Without a memory limit there is nothing to
//     measure the heap against: only the connection cap applies.
//
// Values out of the ProxyConfig's bounds (which the Gateway API stage
// refuses) are replaced by the defaults here, so that a bootstrap is
// always one Envoy starts with.
const (
	DefaultMaxHeapPercent           int32 = 90
	DefaultMaxDownstreamConnections int64 = 50000

	heapMonitor        = "envoy.resource_monitors.fixed_heap"
	connectionsMonitor = "envoy.resource_monitors.global_downstream_max_connections"
	// overloadRefresh is how often the heap is measured.
	overloadRefresh = 250 * time.Millisecond
)

// threshold is an overload action or load-shed point and the fraction of
// the maximum heap from which it applies.
type threshold struct {
	name  string
	value float64
}

var (
	heapActions = []threshold{
		{"envoy.overload_actions.shrink_heap", 0.90},
		{"envoy.overload_actions.disable_http_keepalive", 0.95},
		{"envoy.overload_actions.stop_accepting_requests", 0.95},
	}
	heapLoadShedPoints = []threshold{
		{"envoy.load_shed_points.tcp_listener_accept", 0.98},
	}
)

// MaxDownstreamConnections is the proxies' cap on client connections.
func MaxDownstreamConnections(pc v1alpha1.ProxyConfigSpec) int64 {
	if o := pc.Overload; o != nil && o.MaxDownstreamConnections != nil && *o.MaxDownstreamConnections >= 1 {
		return *o.MaxDownstreamConnections
	}
	return DefaultMaxDownstreamConnections
}

// MaxHeapBytes is the heap the overload manager measures against, false
// without a memory limit on the Envoy container.
func MaxHeapBytes(pc v1alpha1.ProxyConfigSpec) (uint64, bool) {
	if pc.Resources == nil {
		return 0, false
	}
	q, ok := pc.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		return 0, false
	}
	limit := q.Value()
	if limit <= 0 {
		return 0, false
	}
	pct := DefaultMaxHeapPercent
	if o := pc.Overload; o != nil && o.MaxHeapPercent != nil && *o.MaxHeapPercent >= 10 && *o.MaxHeapPercent <= 100 {
		pct = *o.MaxHeapPercent
	}
	// limit/100*pct, without overflow for any int64 limit.
	heap := uint64(limit/100)*uint64(pct) + uint64(limit%100)*uint64(pct)/100
	return heap, heap > 0
}

// overloadManager is the overload manager of a proxy with ProxyConfig pc
// (standalone proxies: the zero spec, so the connection cap only).
func overloadManager(pc v1alpha1.ProxyConfigSpec) (*overloadv3.OverloadManager, error) {
	conns, err := anypb.New(&connectionsv3.DownstreamConnectionsConfig{MaxActiveDownstreamConnections: MaxDownstreamConnections(pc)})
	if err != nil {
		return nil, err
	}
	om := &overloadv3.OverloadManager{
		RefreshInterval: durationpb.New(overloadRefresh),
		ResourceMonitors: []*overloadv3.ResourceMonitor{{
			Name:       connectionsMonitor,
			ConfigType: &overloadv3.ResourceMonitor_TypedConfig{TypedConfig: conns},
		}},
	}
	heap, ok := MaxHeapBytes(pc)
	if !ok {
		return om, nil
	}
	heapCfg, err := anypb.New(&fixedheapv3.FixedHeapConfig{MaxHeapSizeBytes: heap})
	if err != nil {
		return nil, err
	}
	om.ResourceMonitors = append(om.ResourceMonitors, &overloadv3.ResourceMonitor{
		Name:       heapMonitor,
		ConfigType: &overloadv3.ResourceMonitor_TypedConfig{TypedConfig: heapCfg},
	})
	trigger := func(v float64) []*overloadv3.Trigger {
		return []*overloadv3.Trigger{{
			Name:         heapMonitor,
			TriggerOneof: &overloadv3.Trigger_Threshold{Threshold: &overloadv3.ThresholdTrigger{Value: v}},
		}}
	}
	for _, a := range heapActions {
		om.Actions = append(om.Actions, &overloadv3.OverloadAction{Name: a.name, Triggers: trigger(a.value)})
	}
	for _, p := range heapLoadShedPoints {
		om.LoadshedPoints = append(om.LoadshedPoints, &overloadv3.LoadShedPoint{Name: p.name, Triggers: trigger(p.value)})
	}
	return om, nil
}
