package gatewayapi

// BackendTLSPolicy: TLS from the proxies to the Services routes send to.
//
// Which policy applies to a Service port (the spec's order): the policies
// of the Service's namespace with a targetRef naming the Service (core
// group, kind Service) and the port's name as sectionName take
// precedence over those naming the whole Service; within each of the two
// groups the oldest (creationTimestamp, then namespace/name) wins and the
// others are Accepted=False, Conflicted. A whole-Service policy that loses
// a port to a sectionName one is not in conflict: it still applies to the
// Service's other ports. Policies apply to the backends of HTTP, gRPC,
// TLS and TCP routes (connections are then TLS from the proxy; a
// Passthrough TLS listener's route would wrap its client's TLS in the
// policy's, so do not put a policy on the backend of one), never to UDP.
//
// What the applied policy configures (ir.UpstreamTLS): SNI is
// validation.hostname; the certificate must be signed by the CAs of
// caCertificateRefs (trust.go), or by the proxy's system CAs for
// wellKnownCACertificates: System (SystemCABundle, the file of the
// proxy's image); it must carry one of subjectAltNames, or hostname as a
// DNS name when there are none. The Gateway's spec.tls.backend
// clientCertificateRef, when set and valid, is presented as the client
// certificate to every TLS backend of the Gateway.
//
// Fail closed: a policy that cannot be used as written never lets
// requests through in plaintext nor with weaker checks. When the applied
// policy is not Accepted (no usable CA: NoValidCACertificate; a value
// Portico does not support, options included: Invalid) or one of its CA
// references cannot be used (ResolvedRefs=False, InvalidCACertificateRef
// or InvalidKind, even when others can), its Service port's cluster has
// no endpoints: requests get 503 and connections are closed. The routes
// keep ResolvedRefs=True (the backend exists and is permitted); the
// policy's status says what is wrong.
//
// Status: a policy has an ancestor entry (controllerName ours) for every
// accepted Gateway one of whose clusters is a Service port the policy
// covers (a targetRef naming the Service, with that port's name or
// none). It is computed from the IR (WithPolicyStatuses) after the
// Gateways are translated, so that an incremental translation gets it
// from the merged IR as a full one does.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/refs"
	"github.com/portico-dev/portico/internal/resource"
)

// SystemCABundle is the file of the system's CA certificates in the
// proxy's image (Debian and Ubuntu based Envoy images have it), used for
// wellKnownCACertificates: System.
const SystemCABundle = "/etc/ssl/certs/ca-certificates.crt"

// policyEval is what a BackendTLSPolicy says, whatever it targets.
type policyEval struct {
	policy *gwv1.BackendTLSPolicy
	// tls is what it configures; Blocked when it cannot be used.
	tls *ir.UpstreamTLS
	// accepted and resolved are the problems of the Accepted and
	// ResolvedRefs conditions (nil: True).
	accepted, resolved *problem
	// cas are its CA references, read again (recorded) by every owner
	// that finds the evaluation cached.
	cas []refs.Object
}

// evalPolicy evaluates p, once per translation; every call records the
// reads of the evaluation as the caller's.
func (t *translator) evalPolicy(p *gwv1.BackendTLSPolicy) (kept *policyEval) {
	k := resource.Key{Namespace: p.Namespace, Name: p.Name}
	if e := t.keptPolicyEval(k, p); e != nil {
		t.touchCAs(e.cas)
		return e
	}
	e := &policyEval{policy: p, cas: slices.Collect(refs.CACertificates(p))}
	defer func() { kept = t.keepPolicyEval(k, e) }()
	v := p.Spec.Validation
	tls := &ir.UpstreamTLS{SNI: string(v.Hostname)}
	invalid := func(format string, args ...any) {
		if e.accepted == nil {
			e.accepted = &problem{string(gwv1.PolicyReasonInvalid), fmt.Sprintf(format, args...)}
		}
	}
	wellKnown := ""
	if v.WellKnownCACertificates != nil {
		wellKnown = string(*v.WellKnownCACertificates)
	}
	switch {
	case len(v.CACertificateRefs) > 0 && wellKnown != "":
		invalid("validation sets both caCertificateRefs and wellKnownCACertificates")
		t.touchCAs(e.cas)
	case len(v.CACertificateRefs) > 0:
		res := t.caBundle(objRef{gwv1.GroupName, resource.KindBackendTLSPolicy.String(), p.Namespace}, e.cas)
		e.resolved = res.problem("validation.caCertificateRefs", backendReason)
		if res.pem == nil {
			e.accepted = &problem{string(gwv1.BackendTLSPolicyReasonNoValidCACertificate),
				"none of the caCertificateRefs is usable (see ResolvedRefs); requests to the backend fail"}
		}
		tls.CACertificates = res.pem
	case wellKnown == string(gwv1.WellKnownCACertificatesSystem):
		tls.SystemCAFile = SystemCABundle
	case wellKnown != "":
		invalid("wellKnownCACertificates %q is not supported (System is)", wellKnown)
	default:
		invalid("validation sets neither caCertificateRefs nor wellKnownCACertificates")
	}
	if h, ok := normalizeHostname(string(v.Hostname)); !ok || strings.HasPrefix(h, "*.") {
		invalid("validation.hostname %q is not a valid DNS name", v.Hostname)
	} else {
		tls.SNI = h
	}
	if len(v.SubjectAltNames) == 0 {
		tls.SubjectAltNames = []ir.SubjectAltName{{Type: ir.SANDNS, Value: tls.SNI}}
	}
	for i, san := range v.SubjectAltNames {
		switch {
		case san.Type == gwv1.HostnameSubjectAltNameType && san.Hostname != "":
			tls.SubjectAltNames = append(tls.SubjectAltNames, ir.SubjectAltName{Type: ir.SANDNS, Value: strings.ToLower(string(san.Hostname))})
		case san.Type == gwv1.URISubjectAltNameType && san.URI != "":
			tls.SubjectAltNames = append(tls.SubjectAltNames, ir.SubjectAltName{Type: ir.SANURI, Value: string(san.URI)})
		default:
			invalid("validation.subjectAltNames[%d]: type %q without its value", i, san.Type)
		}
	}
	if len(p.Spec.Options) > 0 {
		invalid("options are not supported (%s)", strings.Join(slices.Sorted(maps.Keys(optionKeys(p.Spec.Options))), ", "))
	}
	if e.accepted != nil || e.resolved != nil {
		msg := "BackendTLSPolicy " + k.String() + " cannot be used: "
		if e.accepted != nil {
			msg += e.accepted.message
		} else {
			msg += e.resolved.message
		}
		tls = &ir.UpstreamTLS{Blocked: msg}
	}
	e.tls = tls
	return e
}

// keptPolicyEval returns the evaluation of p kept so far, or nil.
func (t *translator) keptPolicyEval(k resource.Key, p *gwv1.BackendTLSPolicy) *policyEval {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.policyEvals[k]; e != nil && e.policy == p {
		return e
	}
	return nil
}

// keepPolicyEval keeps e, unless another goroutine kept an evaluation of
// the same policy first (compileAhead): the one kept is returned (they
// are equal, and computing e recorded the same reads).
func (t *translator) keepPolicyEval(k resource.Key, e *policyEval) *policyEval {
	t.mu.Lock()
	defer t.mu.Unlock()
	if kept := t.policyEvals[k]; kept != nil && kept.policy == e.policy {
		return kept
	}
	if t.policyEvals == nil {
		t.policyEvals = map[resource.Key]*policyEval{}
	}
	t.policyEvals[k] = e
	return e
}

func optionKeys(m map[gwv1.AnnotationKey]gwv1.AnnotationValue) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[string(k)] = true
	}
	return out
}

// touchCAs reads (and so records, for the reader's owner) the objects CA
// references name, as evaluating them did.
func (t *translator) touchCAs(cas []refs.Object) {
	for _, ref := range cas {
		switch {
		case ref.IsConfigMap():
			t.in.ConfigMap(resource.Key{Namespace: ref.Namespace, Name: ref.Name})
		case ref.IsSecret():
			t.in.Secret(resource.Key{Namespace: ref.Namespace, Name: ref.Name})
		case ref.IsClusterTrustBundle():
			t.in.ClusterTrustBundle(ref.Name)
		}
	}
}

// policyCovers reports whether a targetRef of p names Service svc with
// sectionName port (specific) or none (whole).
func policyCovers(p *gwv1.BackendTLSPolicy, svc, port string) (specific, whole bool) {
	for _, tr := range refs.TargetsOf(p.Namespace, p.Spec.TargetRefs) {
		if !tr.IsService() || tr.Name != svc {
			continue
		}
		switch {
		case tr.SectionName == "":
			whole = true
		case port != "" && tr.SectionName == port:
			specific = true
		}
	}
	return specific, whole
}

// winners returns the policies that win port of Service svc among pols
// (sorted by name, as inputs.BackendTLSPolicies gives them): the oldest
// of those naming the port, and the oldest of those naming the whole
// Service (nil when none).
func winners(pols []*gwv1.BackendTLSPolicy, svc, port string) (specific, whole *gwv1.BackendTLSPolicy) {
	older := func(a, b *gwv1.BackendTLSPolicy) bool {
		return olderFirst(a.CreationTimestamp, b.CreationTimestamp, a.Namespace, a.Name, b.Namespace, b.Name)
	}
	for _, p := range pols {
		s, w := policyCovers(p, svc, port)
		if s && (specific == nil || older(p, specific)) {
			specific = p
		}
		if w && (whole == nil || older(p, whole)) {
			whole = p
		}
	}
	return specific, whole
}

// servicePortTLS returns the policy that applies to port sp of Service
// svc among pols, evaluated (nil: none), and the evaluations of every
// policy covering the port: all are evaluated, so that the caller records
// what their statuses read.
func (t *translator) servicePortTLS(svc resource.Key, sp *corev1.ServicePort, pols []*gwv1.BackendTLSPolicy) (applied *policyEval, evals []*policyEval) {
	specific, whole := winners(pols, svc.Name, sp.Name)
	for _, p := range pols {
		if s, w := policyCovers(p, svc.Name, sp.Name); !s && !w {
			continue
		}
		e := t.evalPolicy(p)
		evals = append(evals, e)
		if p == specific || (specific == nil && p == whole) {
			applied = e
		}
	}
	return applied, evals
}

// clientCertificate resolves the Gateway's spec.tls.backend
// clientCertificateRef: the name of its Secret in the IR, or the problem
// of the Gateway's ResolvedRefs condition. It reads for the Gateway.
func (t *translator) clientCertificate(gw *gwv1.Gateway) (string, *problem) {
	ref := gw.Spec.TLS.Backend.ClientCertificateRef
	from := objRef{gwv1.GroupName, resource.KindGateway.String(), gw.Namespace}
	name, p := t.resolveCertificate(*ref, from)
	if p == nil {
		return name, nil
	}
	reason := string(gwv1.GatewayReasonInvalidClientCertificateRef)
	if p.reason == string(gwv1.ListenerReasonRefNotPermitted) {
		reason = string(gwv1.GatewayReasonRefNotPermitted)
	}
	return "", &problem{reason, "spec.tls.backend.clientCertificateRef: " + p.message}
}

// maxPolicyAncestors is the most ancestor entries a policy's status holds
// (the CRD's limit, shared with other controllers).
const maxPolicyAncestors = 16

// WithPolicyStatuses returns res with the statuses of the
// BackendTLSPolicies computed from its IR and snap (see the file's
// documentation): those of other kinds, and the policy statuses that are
// the same as res's, are shared.
func WithPolicyStatuses(snap *resource.Snapshot, opts Options, res *Result) *Result {
	t := newTranslator(snap, opts, nil, newOneTranslation())
	if t.in.BackendTLSPolicyCount() == 0 && !hasKind(res.StatusSet, resource.KindBackendTLSPolicy) {
		return res
	}
	next := t.policyStatuses(res.Gateways)
	var scope []StatusKey
	for s := range res.StatusSet.OfKind(resource.KindBackendTLSPolicy) {
		scope = append(scope, KeyOf(s))
	}
	changed := len(scope) != len(next)
	for i := range next {
		s := &next[i]
		scope = append(scope, KeyOf(s))
		if old := res.StatusSet.Get(s.Kind, s.Namespace, s.Name); old != nil && equalPolicyStatus(old, s) {
			next[i] = *old
		} else {
			changed = true
		}
	}
	if !changed {
		return res
	}
	out := *res
	out.StatusSet = res.StatusSet.Replace(next, scope)
	return &out
}

func hasKind(set StatusSet, kind resource.Kind) bool {
	for range set.OfKind(kind) {
		return true
	}
	return false
}

func equalPolicyStatus(a, b *Status) bool {
	if a.Generation != b.Generation || a.Policy == nil || b.Policy == nil || len(a.Policy.Ancestors) != len(b.Policy.Ancestors) {
		return false
	}
	for i, x := range a.Policy.Ancestors {
		y := b.Policy.Ancestors[i]
		if refs.EntryOf(x.AncestorRef) != refs.EntryOf(y.AncestorRef) || x.ControllerName != y.ControllerName || !slices.EqualFunc(x.Conditions, y.Conditions, sameCondition) {
			return false
		}
	}
	return true
}

// policyStatuses computes the status of every policy covering a cluster
// of gateways, sorted by namespace/name.
func (t *translator) policyStatuses(gateways []*ir.Gateway) []Status {
	type entry struct {
		gw       resource.Key
		conflict bool
	}
	ancestors := map[resource.Key][]entry{}
	seen := map[resource.Key]map[resource.Key]int{} // policy → Gateway → index in ancestors
	for _, gw := range gateways {
		gk := resource.Key{Namespace: gw.Namespace, Name: gw.Name}
		for _, c := range gw.Clusters {
			if c.Protocol == ir.UpstreamUDP {
				continue
			}
			svcKey := resource.Key{Namespace: c.ServiceNamespace, Name: c.ServiceName}
			pols := t.in.BackendTLSPolicies(svcKey)
			if len(pols) == 0 {
				continue
			}
			port := servicePortName(t.in.Service(svcKey), c.ServicePort, false)
			specific, whole := winners(pols, svcKey.Name, port)
			for _, p := range pols {
				s, w := policyCovers(p, svcKey.Name, port)
				if !s && !w {
					continue
				}
				conflict := (s && p != specific) || (w && !s && p != whole)
				pk := resource.Key{Namespace: p.Namespace, Name: p.Name}
				if seen[pk] == nil {
					seen[pk] = map[resource.Key]int{}
				}
				if i, ok := seen[pk][gk]; ok {
					ancestors[pk][i].conflict = ancestors[pk][i].conflict || conflict
					continue
				}
				seen[pk][gk] = len(ancestors[pk])
				ancestors[pk] = append(ancestors[pk], entry{gw: gk, conflict: conflict})
			}
		}
	}
	keys := slices.SortedFunc(maps.Keys(ancestors), resource.CompareKeys)
	out := make([]Status, 0, len(keys))
	for _, pk := range keys {
		p := t.in.BackendTLSPolicy(pk)
		if p == nil {
			continue
		}
		e := t.evalPolicy(p)
		entries := ancestors[pk]
		slices.SortFunc(entries, func(a, b entry) int { return resource.CompareKeys(a.gw, b.gw) })
		if len(entries) > maxPolicyAncestors {
			entries = entries[:maxPolicyAncestors]
		}
		st := &gwv1.PolicyStatus{Ancestors: []gwv1.PolicyAncestorStatus{}}
		for _, a := range entries {
			c := newConditions(p.Generation)
			switch {
			case a.conflict:
				c.set(string(gwv1.PolicyConditionAccepted), false, string(gwv1.PolicyReasonConflicted),
					"another BackendTLSPolicy targets the same Service port and takes precedence (older, or a sectionName over the whole Service)")
			case e.accepted != nil:
				c.set(string(gwv1.PolicyConditionAccepted), false, e.accepted.reason, e.accepted.message)
			default:
				c.set(string(gwv1.PolicyConditionAccepted), true, string(gwv1.PolicyReasonAccepted), "the policy applies to the Service's connections from this Gateway")
			}
			if e.resolved != nil {
				c.set(string(gwv1.BackendTLSPolicyConditionResolvedRefs), false, e.resolved.reason, e.resolved.message)
			} else {
				c.set(string(gwv1.BackendTLSPolicyConditionResolvedRefs), true, string(gwv1.BackendTLSPolicyReasonResolvedRefs), "every CA certificate reference is usable")
			}
			st.Ancestors = append(st.Ancestors, gwv1.PolicyAncestorStatus{
				AncestorRef:    ancestorRef(a.gw),
				ControllerName: gwv1.GatewayController(t.opts.ControllerName),
				Conditions:     c.done(),
			})
		}
		out = append(out, Status{Kind: resource.KindBackendTLSPolicy, Namespace: p.Namespace, Name: p.Name, Generation: p.Generation, Policy: st})
	}
	return out
}

// ancestorRef is the ancestorRef of a Gateway, as the API server stores
// it (group and kind set).
func ancestorRef(gw resource.Key) gwv1.ParentReference {
	ns := gwv1.Namespace(gw.Namespace)
	return refs.StoredParentRef(gwv1.ParentReference{Namespace: &ns, Name: gwv1.ObjectName(gw.Name)})
}

func sameCondition(a, b metav1.Condition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message && a.ObservedGeneration == b.ObservedGeneration
}
