// Package infra provisions the Envoy proxies of each Gateway: a
// ServiceAccount, a ConfigMap with the Envoy bootstrap, a Deployment, a
// Service, a PodDisruptionBudget and, with autoscaling, a
// HorizontalPodAutoscaler, applied with server-side apply (field manager
// proxyspec.FieldManager) by the leader only.
//
// What Render makes of a ProxyConfig, and why:
//
//   - Replicas are the ProxyConfig's (default 2), unless it sets
//     autoscaling: then a HorizontalPodAutoscaler (autoscaling/v2;
//     minReplicas default 2; the Envoy container's CPU at 80% of its
//     request when no target is set) owns them, and the Deployment's apply
//     configuration has no replicas, so that Portico's applies never undo
//     its scaling (replicas.go hands the field over without a reset when
//     autoscaling is turned on). Turning autoscaling off deletes the
//     autoscaler and Portico sets replicas again.
//   - Disruptions: a PodDisruptionBudget of maxUnavailable 1 unless the
//     ProxyConfig sets minAvailable or maxUnavailable; a Pod that is not
//     Ready may always be evicted (it serves nothing). Rollouts add a Pod
//     before removing one (maxSurge 25%, maxUnavailable 0).
//   - Spreading: unless the ProxyConfig sets topology spread constraints,
//     at most one Pod more in a node, and in a zone, than in another
//     (kubernetes.io/hostname, topology.kubernetes.io/zone), as a
//     preference (ScheduleAnyway: a small cluster still runs every
//     replica), counted among the Pods of one ReplicaSet
//     (matchLabelKeys pod-template-hash) so a rollout's old Pods do not
//     skew its new ones. No affinity unless the ProxyConfig sets one.
//   - Placement and identity (node selector, tolerations, affinity,
//     topology spread, priority class; extra Pod labels and annotations)
//     come only from the ProxyConfig, and are not among
//     v1alpha1.DefaultOverridableFields: they grant capacity (dedicated
//     or tainted nodes, preemption) or an identity that Services,
//     NetworkPolicies and admission webhooks select on, which is the
//     administrator's to give, so a Gateway's own ProxyConfig sets them
//     only where its class's gatewayOverrides allows. Pod labels and
//     annotations merge key by key, later winning: spec.infrastructure's,
//     the ProxyConfig's pod, then Portico's own (the selector labels,
//     which the Deployment, Service, budget and spread constraints select
//     on, and the scrape annotations).
//   - Resources are the ProxyConfig's; CPU and memory that it neither
//     requests nor limits are requested at 100m and 128Mi (utilization
//     targets are percentages of requests, and a Pod without requests is
//     the first evicted under node pressure).
//   - Gateway addresses (spec.addresses) are requests on the Service,
//     mapped by proxyspec.PlanAddresses: a static IPAddress of default
//     routability is spec.loadBalancerIP on a LoadBalancer Service (the
//     first one; further ones, and all on a ClusterIP or NodePort Service,
//     are spec.externalIPs), one of routability Cluster is spec.clusterIP,
//     a Gateway whose every address is of routability Cluster gets a
//     ClusterIP Service, and an address without a value asks for nothing
//     (the Service's assigned address satisfies it). Hostname addresses
//     cannot be requested of a Service. The translator reports in the
//     Gateway's status which requests the Service honours. Requested
//     addresses the API server refuses (a ClusterIP outside the
//     ServiceCIDR, or another than an existing Service's, which cannot
//     change; external IPs an admission policy forbids) are left out and
//     the Service applied without them: those requests are then
//     unsatisfied in status, the rest served. To move a static ClusterIP,
//     delete the Service.
//   - Listener ports: each of the Spec's TCP ports is a Service port and
//     an Envoy container port named "port-<n>" over TCP, each UDP port
//     one named "udp-<n>" over UDP; a number that is both gets both (the
//     API server and server-side apply key these ports by number and
//     protocol, so changing one protocol's ports leaves the other's).
//     TCP names are those of before UDP listeners, so upgrading renames
//     nothing. The ports are ordered by number, TCP first. A Gateway with
//     no port at all gets one placeholder Service port, "none" (a
//     Service needs a port; its address is still reported).
//   - Metrics: a "metrics" container port (proxyspec.MetricsPort) and the
//     prometheus.io/scrape, port and path (/stats/prometheus) annotations,
//     unless metrics are disabled.
//   - Readiness: /ready on the readiness listener every second, unready
//     after 3 failures, so a draining proxy leaves its Service's endpoints
//     within seconds.
//
// Drain (internal/proxyagent has the details): when a proxy Pod
// terminates, the kubelet sends SIGTERM to the shutdown-manager sidecar
// (`portico proxy-agent`, which has no preStop hook) and runs Envoy's
// preStop hook, an HTTP GET of the sidecar's /shutdown/wait
// (proxyspec.AgentPort), at the same time. SIGTERM makes the sidecar fail
// Envoy's health check through the admin interface (loopback): /ready
// answers 503, the endpoint is removed, and Envoy (--drain-strategy
// immediate, --drain-time-s of drainTimeout) closes connections gracefully
// while it goes on accepting and serving. After minDrainDuration, once no
// connection is left on the Gateway's listeners (those of the readiness
// and metrics ports are not waited for) or at drainTimeout, the hook is
// answered and the kubelet sends Envoy SIGTERM.
// terminationGracePeriodSeconds is drainTimeout plus 10s
// (TerminationGracePeriod), so the wait is never cut short.
//
// Bootstrap (bootstrap.go): xDS by ADS over mutual TLS; the admin
// interface on loopback; the readiness listener (proxyspec.ReadyPort)
// serving only /ready; the metrics listener on proxyspec.MetricsPort
// (19090) serving only /stats/prometheus (metrics_listener.go); the
// overload manager (overload.go): client connections capped at
// maxDownstreamConnections (50000) and, with a memory limit, a heap of
// maxHeapPercent (90) of it, shrunk from 90% of that, keep-alive off and
// new requests refused with 503 from 95%, new connections refused from
// 98%.
//
// Provisioned names are derived from Gateway names (proxyspec.Name) and
// can collide; an object is written for a Gateway only if it is absent or
// controlled by that Gateway (proxyspec.CheckOwner), never taken over
// from another Gateway or from anyone else, and a Gateway's removal
// deletes only what it controls. The translator reports a collision in
// the Gateway's status from the same rule, reading the snapshot.
//
// What a proxy is — the Spec the translator hands over, the names, labels
// and ownership rule, the defaults of a ProxyConfig and its checks — is in
// internal/proxyspec, which the Gateway API stage shares without
// depending on this package's controller code.
package infra
