package proxyspec

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Ownership of provisioned names.
//
// Name shortens long Gateway names with a hash, so two Gateways of a
// namespace can map to one name (a long name, and a short name equal to
// the long one's shortened form), and anyone may have created an object
// of that name before. Portico writes an object for Gateway G only if the
// object does not exist or its controller owner reference is G: a Gateway
// of gateway.networking.k8s.io with G's UID, or with G's name (a
// predecessor of G with the same name, necessarily deleted since names are
// unique, whose objects the garbage collector has not removed yet). Any
// other object (controlled by another Gateway, by something else, or by
// nothing) is never written for G: G's proxies are not provisioned and its
// status says why (Programmed=False, reason Invalid, naming the holder),
// until the holder is gone.

// ConflictError reports a provisioned name taken by an object that is not
// the Gateway's.
type ConflictError struct {
	// Kind, Namespace and Name of the object.
	Kind, Namespace, Name string
	// Holder is its controller owner reference, nil if it has none.
	Holder *metav1.OwnerReference
}

func (e *ConflictError) Error() string {
	obj := fmt.Sprintf("the %s %s/%s", e.Kind, e.Namespace, e.Name)
	h := e.Holder
	switch {
	case h != nil && isGatewayRef(h):
		return fmt.Sprintf("%s belongs to Gateway %s/%s: both Gateways' proxies are named %s (a Gateway name longer than %d characters is shortened with a hash, which another name can equal); Portico does not overwrite another Gateway's objects: rename one of the Gateways",
			obj, e.Namespace, h.Name, e.Name, 63-len(namePrefix))
	case h != nil:
		return fmt.Sprintf("%s exists and is controlled by %s %s/%s, not by this Gateway; Portico does not overwrite it: delete it or rename the Gateway",
			obj, h.Kind, e.Namespace, h.Name)
	default:
		return fmt.Sprintf("%s exists and is not controlled by this Gateway (it has no controller owner reference); Portico does not overwrite it: delete it or rename the Gateway", obj)
	}
}

// HolderGateway is the name of the Gateway holding the object, "" when
// its holder is not a Gateway.
func (e *ConflictError) HolderGateway() string {
	if e.Holder != nil && isGatewayRef(e.Holder) {
		return e.Holder.Name
	}
	return ""
}

// CheckOwner returns nil when obj (of the given kind, named by Name or
// ClientCertSecretName) may be written for Gateway gw, and a
// *ConflictError otherwise. It reads only obj's owner references: the
// reconciler (before each write) and the translator (for the Gateway's
// status, from the snapshot) decide alike.
func CheckOwner(obj metav1.Object, kind string, gw *gwv1.Gateway) error {
	c := metav1.GetControllerOfNoCopy(obj)
	if c != nil && isGatewayRef(c) && (c.UID == gw.UID || c.Name == gw.Name) {
		return nil
	}
	e := &ConflictError{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if c != nil {
		e.Holder = c.DeepCopy()
	}
	return e
}

// ControlledByName reports whether obj's controller is a Gateway named gw
// (of whatever UID): the objects a removed Gateway may delete.
func ControlledByName(obj metav1.Object, gw string) bool {
	c := metav1.GetControllerOfNoCopy(obj)
	return c != nil && isGatewayRef(c) && c.Name == gw
}

func isGatewayRef(r *metav1.OwnerReference) bool {
	return r.Kind == "Gateway" && strings.HasPrefix(r.APIVersion, gwv1.GroupName+"/")
}
