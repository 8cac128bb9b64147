// Package infra provisions the Envoy proxies of each Gateway: a
// ServiceAccount, a ConfigMap with the Envoy bootstrap, a Deployment, a
// Service, a PodDisruptionBudget and, with autoscaling, a
// HorizontalPodAutoscaler, applied with server-side apply (field manager
// FieldManager) by the leader only.
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
//   - Metrics: a "metrics" container port (MetricsPort) and the
//     prometheus.io/scrape, port and path (/stats/prometheus) annotations,
//     unless metrics are disabled.
//   - Readiness: /ready on the readiness listener every second, unready
//     after 3 failures, so a draining proxy leaves its Service's endpoints
//     within seconds.
//
// Drain: when a proxy Pod terminates, the kubelet runs Envoy's preStop
// hook, an HTTP GET of /shutdown/wait on the shutdown-manager sidecar
// (`portico proxy-agent`, AgentPort). The sidecar fails Envoy's readiness
// through the admin interface (loopback), so the endpoint is removed;
// keeps the proxy accepting for minDrainDuration while load balancers
// catch up; drains Envoy's listeners (Envoy runs with --drain-strategy
// immediate and --drain-time-s of drainTimeout); and answers the hook
// when no downstream connection is left, or at drainTimeout. Then the
// kubelet sends Envoy SIGTERM. terminationGracePeriodSeconds is
// drainTimeout plus 10s (TerminationGracePeriod), so the wait is never cut
// short. The sidecar has no preStop hook: it receives SIGTERM when the Pod
// starts terminating and keeps serving the drain until it ends.
//
// Provisioned names are derived from Gateway names (Name) and can collide;
// an object is written for a Gateway only if it is absent or controlled by
// that Gateway (CheckOwner), never taken over from another Gateway or from
// anyone else, and a Gateway's removal deletes only what it controls. The
// translator reports a collision in the Gateway's status from the same
// rule, reading the snapshot.
package infra

import (
	"crypto/sha256"
	"encoding/hex"
)

// Labels on every object Portico provisions for a Gateway.
const (
	LabelManagedBy        = "app.kubernetes.io/managed-by"
	ManagedByValue        = "portico"
	LabelName             = "app.kubernetes.io/name"
	NameValue             = "envoy"
	LabelGatewayName      = "portico.dev/gateway-name"
	LabelGatewayNamespace = "portico.dev/gateway-namespace"
	// LabelGatewayAPIName is the label the Gateway API recommends for
	// resources of a Gateway.
	LabelGatewayAPIName = "gateway.networking.k8s.io/gateway-name"
	// FieldManager is the server-side apply field manager of every write.
	FieldManager = "portico"
)

// namePrefix starts the name of every object Portico provisions.
const namePrefix = "portico-"

// Name is the name of the ServiceAccount, ConfigMap, Deployment, Service,
// PodDisruptionBudget and HorizontalPodAutoscaler of Gateway gw, in the Gateway's namespace: "portico-<gw>", shortened with
// a hash when it would exceed 63 characters (the limit of a Service name).
// Shortening is not injective: another Gateway's name can be the shortened
// form of a long one. CheckOwner keeps either from writing the other's
// objects.
func Name(gw string) string {
	n := namePrefix + gw
	if len(n) <= 63 {
		return n
	}
	sum := sha256.Sum256([]byte(gw))
	return n[:54] + "-" + hex.EncodeToString(sum[:])[:8]
}

// ClientCertSecretName is the Secret holding the xDS client certificate of
// Gateway gw's proxies (tls.crt, tls.key, ca.crt), in the Gateway's
// namespace.
func ClientCertSecretName(gw string) string { return Name(gw) + "-xds" }

// Labels returns the labels of the objects of Gateway ns/gw.
func Labels(ns, gw string) map[string]string {
	return map[string]string{
		LabelManagedBy:        ManagedByValue,
		LabelName:             NameValue,
		LabelGatewayName:      gw,
		LabelGatewayNamespace: ns,
		LabelGatewayAPIName:   gw,
	}
}
