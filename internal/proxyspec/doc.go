// Package proxyspec is what a Gateway's provisioned proxies are, apart
// from how they are rendered and applied: the Spec the translator hands to
// the infrastructure reconciler, the names and labels of the objects
// provisioned for a Gateway (Name, Labels), the ownership rule of those
// names (CheckOwner), the defaults of a ProxyConfig's unset fields and the
// ports a proxy Pod reserves (defaults.go), the checks of a
// ProxyConfig's values (CheckProxyConfig), and the plan of a Gateway's
// spec.addresses on its Service (PlanAddresses, addresses.go).
//
// Why a package of its own: the Gateway API stage (internal/gatewayapi)
// decides and reports all of this — it refuses a ProxyConfig that fails
// CheckProxyConfig, reports a name collision from CheckOwner, lists the
// Specs — while internal/infra renders the objects and runs a
// controller-runtime reconciler that applies them. Both must decide
// alike, so the rules are written once, here; and the semantics must not
// depend on controller code, so they are not in infra. Spec is not in
// internal/ir: it carries the Gateway object and the ProxyConfig API type,
// and ir is a data-plane-neutral model that imports nothing of Kubernetes.
//
// The package is pure: no client, no clock, no logger, and no
// controller-runtime (a test in internal/layers enforces it). Its inputs
// are API types and metav1.Object; CheckOwner reads only owner references.
package proxyspec

import (
	"sort"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
)

// Spec is what the translator decides about one Gateway of ours: the
// Gateway, the effective ProxyConfig spec (the Gateway's own parametersRef,
// else its class's, else defaults) and the listener ports to expose: Ports
// over TCP, UDPPorts over UDP (one port number may be in both).
type Spec struct {
	Gateway  *gwv1.Gateway
	Proxy    v1alpha1.ProxyConfigSpec
	Ports    []int32
	UDPPorts []int32
}

// Ports are the distinct listener ports of a Gateway and its ListenerSets,
// as the translator programmed them, sorted; 0 and ports above 65535 are
// left out.
func Ports(ports []uint32) []int32 {
	seen := map[int32]bool{}
	var out []int32
	for _, p := range ports {
		if p == 0 || p > 65535 || seen[int32(p)] {
			continue
		}
		seen[int32(p)] = true
		out = append(out, int32(p))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
