package gatewayapi

import (
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/proxyspec"
	"github.com/portico-dev/portico/internal/resource"
)

// DefaultControllerName is the GatewayClass controllerName Portico serves.
const DefaultControllerName = "portico.dev/gateway-controller"

// Options parameterise a translation. They hold values, never clients.
type Options struct {
	// ControllerName selects the GatewayClasses that are ours.
	ControllerName string
	// Infrastructure is set when Portico provisions the proxies (controller
	// mode): a Gateway is then Programmed only once its Envoy Deployment
	// has an available replica and its Service an address, both read from
	// the snapshot, and status.addresses come from that Service. Offline
	// (standalone, translate), generated configuration is Programmed.
	Infrastructure bool
	// MaxRouteExpansion is the most Envoy routes one HTTP or gRPC route
	// may expand into (budget.go): 0 means
	// DefaultMaxRouteExpansion, negative no limit.
	MaxRouteExpansion int
	// MaxGatewayExpansion is the most Envoy routes the routes of one
	// Gateway may expand into together, admitted oldest first (budget.go):
	// 0 means DefaultMaxGatewayExpansion, negative no limit.
	MaxGatewayExpansion int
}

// Result is what one translation computes.
type Result struct {
	// Gateways is the IR of every Gateway of our classes that is accepted,
	// sorted by namespace/name.
	Gateways []*ir.Gateway
	// StatusSet holds the desired status of every object of ours, sorted
	// by kind, namespace and name. An incremental translation's set shares
	// what did not change with the previous one (see StatusSet and
	// DiffStatuses).
	StatusSet StatusSet
	// Infra is, for every Gateway of our classes, what its proxies need,
	// sorted by namespace/name.
	Infra []proxyspec.Spec
}

// Statuses yields the statuses, in order, each with its index:
//
//	for _, s := range res.Statuses { ... }
//
// It copies each status; StatusSet.All yields pointers.
func (r *Result) Statuses(yield func(int, Status) bool) {
	for i, s := range r.StatusSet.All() {
		if !yield(i, *s) {
			return
		}
	}
}

// Status is the desired status of one object. Exactly one of the typed
// fields is set, matching Kind.
type Status struct {
	Kind      resource.Kind
	Namespace string
	Name      string
	// Generation is the metadata.generation the status was computed from.
	Generation int64

	GatewayClass *gwv1.GatewayClassStatus
	Gateway      *gwv1.GatewayStatus
	ListenerSet  *gwv1.ListenerSetStatus
	// Route holds only the parents managed by Options.ControllerName; the
	// status writer merges them with other controllers' entries.
	Route *gwv1.RouteStatus
	// Policy holds only the ancestors managed by Options.ControllerName
	// (a BackendTLSPolicy's); the status writer merges them with other
	// controllers' entries.
	Policy *gwv1.PolicyStatus
}

// Key is "<Kind>/<namespace>/<name>" ("<Kind>/<name>" when cluster-scoped).
func (s *Status) Key() string {
	if s.Namespace == "" {
		return s.Kind.String() + "/" + s.Name
	}
	return s.Kind.String() + "/" + s.Namespace + "/" + s.Name
}
