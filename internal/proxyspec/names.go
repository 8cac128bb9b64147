package proxyspec

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
)

// FieldManager is the field manager of Portico's server-side applies:
// the provisioned proxy objects (internal/infra) and the certificate
// Secrets (internal/pki/certstore). It is here, with the names and labels
// they share, so that certstore need not import infra.
const FieldManager = "portico"

// MaxGatewayNameLength is the longest Gateway name Portico provisions
// proxies for: the name is the value of the labels LabelGatewayName and
// LabelGatewayAPIName, and a label value has at most 63 characters.
const MaxGatewayNameLength = 63

// namePrefix starts the name of every object Portico provisions.
const namePrefix = "portico-"

// Name is the name of the ServiceAccount, ConfigMap, Deployment, Service,
// PodDisruptionBudget and HorizontalPodAutoscaler of Gateway gw, in the
// Gateway's namespace: "portico-<gw>", shortened with a hash when it would
// exceed 63 characters (the limit of a Service name). Shortening is not
// injective: another Gateway's name can be the shortened form of a long
// one. CheckOwner keeps either from writing the other's objects.
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
