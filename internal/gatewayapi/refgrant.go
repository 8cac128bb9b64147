package gatewayapi

import (
	"fmt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/refs"
)

// objRef names the referring side of a cross-namespace reference.
type objRef struct {
	group, kind, namespace string
}

// allows reports whether from may refer to the object to (resolved by
// package refs), by the ReferenceGrants of to's namespace (GEP-709: grants
// live in the namespace of the referent). References within a namespace
// are always allowed, and read no grant.
func (t *translator) allows(from objRef, to refs.Object) bool {
	if from.namespace == to.Namespace {
		return true
	}
	for _, g := range t.in.ReferenceGrants(to.Namespace) {
		if grantMatches(g.Spec, from, to) {
			return true
		}
	}
	return false
}

// grantMatches reports whether a grant of to's namespace admits from. The
// grant's group and kind fields are required and have no defaults: they
// are compared as written ("" is the core group); an unset or empty to
// name admits every object of the kind.
func grantMatches(spec gwv1.ReferenceGrantSpec, from objRef, to refs.Object) bool {
	fromOK := false
	for _, f := range spec.From {
		if string(f.Group) == from.group && string(f.Kind) == from.kind && string(f.Namespace) == from.namespace {
			fromOK = true
			break
		}
	}
	if !fromOK {
		return false
	}
	for _, t := range spec.To {
		if string(t.Group) != to.Group || string(t.Kind) != to.Kind {
			continue
		}
		if t.Name == nil || *t.Name == "" || string(*t.Name) == to.Name {
			return true
		}
	}
	return false
}

// namespaceLabels returns the labels of a namespace, cached. A namespace
// present in the snapshot also carries kubernetes.io/metadata.name, as the
// API server sets it on every namespace; an absent namespace has no labels.
func (t *translator) namespaceLabels(name string) labels.Set {
	ns := t.in.Namespace(name) // recorded even when cached
	if set, ok := t.nsLabels[name]; ok {
		return set
	}
	set := labels.Set{}
	if ns != nil {
		for k, v := range ns.Labels {
			set[k] = v
		}
		if _, ok := set[corev1.LabelMetadataName]; !ok {
			set[corev1.LabelMetadataName] = name
		}
	}
	t.nsLabels[name] = set
	return set
}

// nsPolicy is a compiled From/Selector pair of allowedRoutes or
// allowedListeners.
type nsPolicy struct {
	from    gwv1.FromNamespaces
	sel     labels.Selector // nil when From is not Selector or it is invalid
	ownerNS string          // the namespace "Same" refers to
	// invalid says why the policy admits nothing although it was meant to
	// select: a Selector From without a selector or with an invalid one,
	// or an unknown From (the CRD's validation catches only some of these,
	// and standalone input has none). Empty when valid.
	invalid string
}

// newNSPolicy compiles a policy; def is the From used when from is nil.
func newNSPolicy(from *gwv1.FromNamespaces, sel *metav1.LabelSelector, def gwv1.FromNamespaces, ownerNS string) nsPolicy {
	p := nsPolicy{from: def, ownerNS: ownerNS}
	if from != nil {
		p.from = *from
	}
	switch p.from {
	case gwv1.NamespacesFromAll, gwv1.NamespacesFromSame, gwv1.NamespacesFromNone:
	case gwv1.NamespacesFromSelector:
		if sel == nil {
			p.invalid = "namespaces.from is Selector but no selector is set"
			break
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			p.invalid = fmt.Sprintf("namespaces.selector is invalid: %v", err)
			break
		}
		p.sel = s
	default:
		p.invalid = fmt.Sprintf("namespaces.from %q is not All, Same, Selector or None", p.from)
	}
	return p
}

// allows reports whether objects in namespace ns are admitted.
func (p nsPolicy) allows(t *translator, ns string) bool {
	switch p.from {
	case gwv1.NamespacesFromAll:
		return true
	case gwv1.NamespacesFromSame:
		return p.ownerNS == ns
	case gwv1.NamespacesFromSelector:
		return p.sel != nil && p.sel.Matches(t.namespaceLabels(ns))
	default: // None and unknown values
		return false
	}
}
