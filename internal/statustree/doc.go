// Package statustree builds the view `portico status` prints: every
// Gateway of Portico's GatewayClasses as a tree
//
//	Gateway → listeners → attached routes → backends
//	        → ListenerSets → their listeners → attached routes → backends
//	        → routes that name the Gateway but are attached to no listener
//
// each node with its conditions, for a tenant whose route does not work.
//
// Sources. The tree is built from a resource.Snapshot (the objects) and a
// Statuses (their status), so that both sources of `portico status` share
// one construction:
//   - ObjectStatuses reads the status the objects carry: the live status of
//     objects listed from a cluster.
//   - DesiredStatuses reads a translation's desired statuses
//     (gatewayapi.Result.StatusSet): `portico status -f DIR` translates the
//     files as `portico standalone` would and shows what it would write.
//
// The package is pure: it lists nothing and talks to no API server; the
// command reads the cluster (or the files) and hands the objects over.
//
// Choices:
//   - Only Gateways whose GatewayClass names Options.ControllerName are
//     shown, and only the status.parents entries of routes whose
//     controllerName is it: other controllers' opinions are not Portico's
//     to explain. A Gateway whose class is not among the objects is shown
//     only with Options.UnknownClasses (a user who may not list
//     GatewayClasses).
//   - A route is placed under every parent its spec.parentRefs name, in
//     spec order, with the conditions of that parentRef's status entry
//     (matched as the CRD identifies entries: refs.EntryOf). A parentRef
//     without an entry of ours is shown with a note, not left out: it is
//     what a user debugs when the controller has not seen the route yet.
//   - Where a route goes in the tree. An entry that is not Accepted goes
//     under the listener its sectionName names when there is one, under
//     the parent's "not attached" list otherwise (no sectionName, or one
//     naming no listener). An Accepted entry goes under the listeners it
//     attaches to. Status does not say which those are when the parentRef
//     names no sectionName, so the view reads them from the spec as the
//     Gateway API defines attachment: sectionName and port, the listener's
//     supportedKinds (from its status), its allowedRoutes namespaces (a
//     selector is checked against the Namespace's labels, and assumed to
//     match when the Namespace is not among the objects) and hostname
//     intersection. Each listener's own attachedRoutes count, from
//     status, is printed beside it and stays the authority; the placement
//     is this view's reading, not the controller's. An Accepted entry that
//     matches no listener by that reading is shown under "not attached"
//     with a note, rather than hidden.
//   - Backends are each distinct backendRef of the route (RequestMirror
//     backends included, resource.RouteDescriptor.Backends), in spec
//     order. Whether one resolves is derived from two things: the objects
//     (the kind is a core Service, a ReferenceGrant permits a
//     cross-namespace reference, the Service exists and has the port) and
//     the route's ResolvedRefs=False message, whose "; "-separated parts
//     naming the backend are reported as its problem when the objects
//     show none (the controller knows more: appProtocol, BackendTLSPolicy).
//     A Service that resolves gets the count of ready endpoints of its
//     port from the EndpointSlices (none: requests get 503). Namespaces
//     whose Services could not be read (Options.Unreadable) make the
//     backends there "unknown", not missing.
//   - Stable order: Gateways and ListenerSets by namespace/name, listeners
//     in spec order, routes by kind (resource.RouteKinds order) then
//     namespace/name, conditions in status order.
//   - Text is an indented tree, two spaces a level, colorless; a line
//     showing a problem (a condition in its unhealthy state — False, or
//     True for the negative types such as Conflicted — or Unknown, or
//     stale: observed at an older generation than the object's; an
//     unresolved or unknown backend, no ready endpoints, no status) is
//     marked with "! " in the margin. JSON is the Tree as it is.
package statustree
