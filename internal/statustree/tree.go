package statustree

// Tree is the view of a set of Gateways.
type Tree struct {
	// Source says where the objects and statuses come from ("cluster",
	// "files"); set by the caller, printed by neither renderer's tree.
	Source   string    `json:"source,omitempty"`
	Gateways []Gateway `json:"gateways"`
}

// Condition is one status condition.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// ObservedGeneration is the generation the condition was computed
	// from (0: not set).
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Stale: ObservedGeneration is older than the object's generation
	// (Generation): the controller has not caught up with the spec.
	Stale      bool  `json:"stale,omitempty"`
	Generation int64 `json:"generation,omitempty"`
}

// Gateway is a Gateway with what hangs from it.
type Gateway struct {
	Namespace  string      `json:"namespace"`
	Name       string      `json:"name"`
	Class      string      `json:"class"`
	Conditions []Condition `json:"conditions"`
	// NoStatus: no status was found for the Gateway (conditions empty).
	NoStatus  bool       `json:"noStatus,omitempty"`
	Listeners []Listener `json:"listeners"`
	// ListenerSets are those whose parentRef names the Gateway and that
	// have a status (the controller took them up), by namespace/name.
	ListenerSets []ListenerSet `json:"listenerSets,omitempty"`
	// Unattached are the routes whose parentRef names the Gateway and that
	// are attached to none of its listeners: not Accepted, without a
	// sectionName naming a listener (see the package documentation).
	Unattached []Route `json:"unattached,omitempty"`
}

// ListenerSet is a ListenerSet attached to (or refused by) a Gateway.
type ListenerSet struct {
	Namespace  string      `json:"namespace"`
	Name       string      `json:"name"`
	Conditions []Condition `json:"conditions"`
	NoStatus   bool        `json:"noStatus,omitempty"`
	Listeners  []Listener  `json:"listeners"`
	Unattached []Route     `json:"unattached,omitempty"`
}

// Listener is a listener of a Gateway or ListenerSet.
type Listener struct {
	Name     string `json:"name"`
	Port     int32  `json:"port"`
	Protocol string `json:"protocol"`
	Hostname string `json:"hostname,omitempty"`
	// AttachedRoutes is the status' count; nil when the listener has no
	// status entry.
	AttachedRoutes *int32      `json:"attachedRoutes,omitempty"`
	Conditions     []Condition `json:"conditions"`
	Routes         []Route     `json:"routes,omitempty"`
}

// Route is a route as one parentRef sees it.
type Route struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// SectionName and Port are those of the parentRef ("", 0: unset).
	SectionName string `json:"sectionName,omitempty"`
	Port        int32  `json:"port,omitempty"`
	// Conditions are those of the route's status.parents entry of Portico
	// for this parentRef.
	Conditions []Condition `json:"conditions"`
	// Note explains a placement or a missing status ("" mostly).
	Note     string    `json:"note,omitempty"`
	NoStatus bool      `json:"noStatus,omitempty"`
	Backends []Backend `json:"backends,omitempty"`
}

// Backend is one distinct backendRef of a route.
type Backend struct {
	Group     string `json:"group,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Port      int32  `json:"port,omitempty"`
	// State is "Resolved", "Unresolved" or "Unknown" (the objects could
	// not be read).
	State string `json:"state"`
	// Reason and Message say why it does not resolve: a ResolvedRefs
	// reason (BackendNotFound, RefNotPermitted, InvalidKind…) and text.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// ReadyEndpoints counts the ready endpoints of a resolved Service's
	// port; nil when not known.
	ReadyEndpoints *int `json:"readyEndpoints,omitempty"`
}

// Backend states.
const (
	BackendResolved   = "Resolved"
	BackendUnresolved = "Unresolved"
	BackendUnknown    = "Unknown"
)
