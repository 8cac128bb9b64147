// Package refs resolves the references that Gateway API objects hold: a
// route's parentRefs, a ListenerSet's parentRef, backendRefs (rules and
// RequestMirror filters), listener certificateRefs, CA certificate
// references (CACertificates: a BackendTLSPolicy's, a Gateway's
// spec.tls.frontend) and policy targetRefs.
// It applies the defaults the specification gives to what is left unset,
// and it is the only place that knows them: the translator
// (internal/gatewayapi) resolves through it, the kube provider's event
// filter lists what an object references through it, and the status
// writer identifies status.parents entries through it. A new reference
// kind is added here once.
//
// Design choices:
//
//   - Pure functions of gateway-api types: no client, no snapshot, no
//     knowledge of what exists. A resolved reference is a small comparable
//     value (Object, Parent, Backend, Target, Entry): a map key, compared
//     with ==.
//   - Resolution says what is referenced, never whether that is supported
//     or allowed: a backendRef of kind "Other" resolves to Kind "Other" and
//     the caller decides (IsService). ReferenceGrant checks stay with the
//     translator, which reports them in conditions.
//   - An unset or empty namespace is the referrer's. The CRDs forbid an
//     empty namespace, but standalone input is not validated by a schema
//     and the translator has always read "" as unset. An empty sectionName
//     is unset. A port is either set or not (HasPort): port 0 is an
//     invalid value, which must not mean "any port".
//   - Two identities for parentRefs. Parent answers "which parent does this
//     name" (namespace resolved): attaching, indexing, comparing the
//     parentRefs of one route. Entry answers "which status.parents entry is
//     this" the way the CRD's uniqueness rule for parentRefs sees them:
//     namespace as written, so that {name: gw} and {name: gw, namespace:
//     <the route's>} (which the CRD accepts side by side) stay two
//     entries.
//   - The enumerations (Backends, Certificates) list every reference an
//     object's spec holds, including those the translator then reports as
//     unsupported (a backendRef with filters, a mirror of an invalid
//     rule): a filter built on them is never narrower than what the
//     translator reads.
package refs

import (
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Groups and kinds that are the specification's defaults.
const (
	GroupCore       = ""             // the core API group (Service, Secret)
	GroupGateway    = gwv1.GroupName // gateway.networking.k8s.io
	KindGateway     = "Gateway"      // default kind of parentRefs
	KindListenerSet = "ListenerSet"  // the other parent kind
	KindService     = "Service"      // default kind of backendRefs
	KindSecret      = "Secret"       // default kind of certificateRefs
	KindConfigMap   = "ConfigMap"    // a CA certificate reference's usual kind

	GroupCertificates      = "certificates.k8s.io"
	KindClusterTrustBundle = "ClusterTrustBundle" // cluster-scoped CA bundles
)

// Object is a resolved reference to a namespaced object.
type Object struct {
	Group, Kind, Namespace, Name string
}

// IsService reports whether o is a core Service.
func (o Object) IsService() bool { return o.Group == GroupCore && o.Kind == KindService }

// IsSecret reports whether o is a core Secret.
func (o Object) IsSecret() bool { return o.Group == GroupCore && o.Kind == KindSecret }

// IsConfigMap reports whether o is a core ConfigMap.
func (o Object) IsConfigMap() bool { return o.Group == GroupCore && o.Kind == KindConfigMap }

// IsClusterTrustBundle reports whether o is a ClusterTrustBundle (then
// cluster-scoped: its Namespace is "").
func (o Object) IsClusterTrustBundle() bool {
	return o.Group == GroupCertificates && o.Kind == KindClusterTrustBundle
}

// IsGateway reports whether o is a Gateway.
func (o Object) IsGateway() bool { return o.Group == GroupGateway && o.Kind == KindGateway }

// IsListenerSet reports whether o is a ListenerSet.
func (o Object) IsListenerSet() bool { return o.Group == GroupGateway && o.Kind == KindListenerSet }

// ID is "namespace/name", as messages name objects.
func (o Object) ID() string { return o.Namespace + "/" + o.Name }

// or returns *p, or def when p is nil.
func or[T ~string](p *T, def string) string {
	if p == nil {
		return def
	}
	return string(*p)
}

// namespace returns *p, or def when p is nil or empty.
func namespace(p *gwv1.Namespace, def string) string {
	if p == nil || *p == "" {
		return def
	}
	return string(*p)
}

// Parent is a resolved parentRef of a route.
type Parent struct {
	Object
	SectionName string // "" when unset
	Port        int32  // meaningful when HasPort
	HasPort     bool
}

// ParentOf resolves a parentRef of a route in namespace routeNS: group
// gateway.networking.k8s.io, kind Gateway and the route's namespace when
// unset.
func ParentOf(routeNS string, ref gwv1.ParentReference) Parent {
	p := Parent{Object: Object{
		Group:     or(ref.Group, GroupGateway),
		Kind:      or(ref.Kind, KindGateway),
		Namespace: namespace(ref.Namespace, routeNS),
		Name:      string(ref.Name),
	}}
	if ref.SectionName != nil {
		p.SectionName = string(*ref.SectionName)
	}
	if ref.Port != nil {
		p.Port, p.HasPort = int32(*ref.Port), true
	}
	return p
}

// ParentsOf resolves the parentRefs of a route in namespace routeNS, in
// order.
func ParentsOf(routeNS string, refs []gwv1.ParentReference) []Parent {
	out := make([]Parent, 0, len(refs))
	for _, r := range refs {
		out = append(out, ParentOf(routeNS, r))
	}
	return out
}

// GatewayOf resolves the parentRef of a ListenerSet in namespace ns: group
// gateway.networking.k8s.io, kind Gateway and the ListenerSet's namespace
// when unset. It is a Gateway of ours only when IsGateway.
func GatewayOf(ns string, ref gwv1.ParentGatewayReference) Object {
	return Object{
		Group:     or(ref.Group, GroupGateway),
		Kind:      or(ref.Kind, KindGateway),
		Namespace: namespace(ref.Namespace, ns),
		Name:      string(ref.Name),
	}
}

// Entry identifies a parentRef as an entry of status.parents: what the
// API server stores once the CRD schema's defaults (group, kind) are
// applied, with an unset namespace or sectionName read as "" and an unset
// port as 0, as the CRD's uniqueness rule for parentRefs reads them.
// The namespace is not resolved: see the package documentation.
type Entry struct {
	Group, Kind, Namespace, Name, SectionName string
	Port                                      int32
}

// EntryOf returns the identity of ref as a status.parents entry.
func EntryOf(ref gwv1.ParentReference) Entry {
	e := Entry{
		Group:     or(ref.Group, GroupGateway),
		Kind:      or(ref.Kind, KindGateway),
		Namespace: or(ref.Namespace, ""),
		Name:      string(ref.Name),
	}
	e.SectionName = or(ref.SectionName, "")
	if ref.Port != nil {
		e.Port = int32(*ref.Port)
	}
	return e
}

// StoredParentRef returns a copy of ref with the defaults the CRD schema
// applies on the API server (group, kind) set, so that a parentRef to be
// written compares equal to the one read back. Other fields are kept as
// they are.
func StoredParentRef(ref gwv1.ParentReference) gwv1.ParentReference {
	out := *ref.DeepCopy()
	if out.Group == nil {
		g := gwv1.Group(GroupGateway)
		out.Group = &g
	}
	if out.Kind == nil {
		k := gwv1.Kind(KindGateway)
		out.Kind = &k
	}
	return out
}

// Backend is a resolved backendRef.
type Backend struct {
	Object
	Port    int32 // meaningful when HasPort
	HasPort bool
}

// BackendOf resolves a backendRef (or a RequestMirror backendRef) of an
// object in namespace fromNS: core group, kind Service and fromNS when
// unset.
func BackendOf(fromNS string, ref gwv1.BackendObjectReference) Backend {
	b := Backend{Object: Object{
		Group:     or(ref.Group, GroupCore),
		Kind:      or(ref.Kind, KindService),
		Namespace: namespace(ref.Namespace, fromNS),
		Name:      string(ref.Name),
	}}
	if ref.Port != nil {
		b.Port, b.HasPort = int32(*ref.Port), true
	}
	return b
}

// CertificateOf resolves a certificateRef of a listener of an object in
// namespace fromNS: core group, kind Secret and fromNS when unset.
func CertificateOf(fromNS string, ref gwv1.SecretObjectReference) Object {
	return Object{
		Group:     or(ref.Group, GroupCore),
		Kind:      or(ref.Kind, KindSecret),
		Namespace: namespace(ref.Namespace, fromNS),
		Name:      string(ref.Name),
	}
}

// LocalOf resolves a reference to an object in the referrer's namespace ns
// (an ExtensionRef filter, a BackendTLSPolicy's caCertificateRefs). Group
// and kind are required fields, taken as written ("" group is core).
func LocalOf(ns string, ref gwv1.LocalObjectReference) Object {
	return Object{Group: string(ref.Group), Kind: string(ref.Kind), Namespace: ns, Name: string(ref.Name)}
}

// Target is a resolved policy targetRef: a policy targets objects of its
// own namespace, optionally one section of them (a listener of a Gateway
// or ListenerSet, a rule of a route, a port of a Service, by name).
type Target struct {
	Object
	SectionName string // "" when unset: the whole object
}

// TargetOf resolves a targetRef of a policy in namespace policyNS. Group
// and kind are required fields and have no default ("" group is core).
func TargetOf(policyNS string, ref gwv1.LocalPolicyTargetReferenceWithSectionName) Target {
	return Target{
		Object:      Object{Group: string(ref.Group), Kind: string(ref.Kind), Namespace: policyNS, Name: string(ref.Name)},
		SectionName: or(ref.SectionName, ""),
	}
}

// TargetsOf resolves the targetRefs of a policy in namespace policyNS, in
// order.
func TargetsOf(policyNS string, refs []gwv1.LocalPolicyTargetReferenceWithSectionName) []Target {
	out := make([]Target, 0, len(refs))
	for _, r := range refs {
		out = append(out, TargetOf(policyNS, r))
	}
	return out
}

// Covers reports whether target t applies to section (a listener, rule or
// port name; "" for the object as a whole) of the object it names: a
// target without sectionName covers every section.
func (t Target) Covers(section string) bool {
	return t.SectionName == "" || t.SectionName == section
}
