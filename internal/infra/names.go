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
// Drain (internal/proxyagent has the details): when a proxy Pod
// terminates, the kubelet sends SIGTERM to the shutdown-manager sidecar
// (`portico proxy-agent`, which has no preStop hook) and runs Envoy's
// preStop hook, an HTTP GET of the sidecar's /shutdown/wait (AgentPort),
// at the same time. SIGTERM makes the sidecar fail Envoy's health check
// through the admin interface (loopback): /ready answers 503, the
// endpoint is removed, and Envoy (--drain-strategy immediate,
// --drain-time-s of drainTimeout) closes connections gracefully while it
// goes on accepting and serving. After minDrainDuration, once no
// connection is left on the Gateway's listeners (those of the readiness
// and metrics ports are not waited for) or at drainTimeout, the hook is
// answered and the kubelet sends Envoy SIGTERM.
// terminationGracePeriodSeconds is drainTimeout plus 10s
// (TerminationGracePeriod), so the wait is never cut short.
//
// Bootstrap (bootstrap.go): xDS by ADS over mutual TLS; the admin
// interface on loopback; the readiness listener (readyPort) serving only
// /ready; the metrics listener on MetricsPort (19090) serving only
// /stats/prometheus (metrics_listener.go); the overload manager
// (overload.go): client connections capped at maxDownstreamConnections
// (50000) and, with a memory limit, a heap of maxHeapPercent (90) of it,
// shrunk from 90% of that, keep-alive off and new requests refused with
// 503 from 95%, new connections refused from 98%.
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
