package workload

import (
	"fmt"
	"math/rand/v2"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/resource"
)

// The backend TLS objects of Rich: BackendTLSPolicies of team0 and team1
// targeting Services of their routes (one by port name, one whole), their
// CA ConfigMap and a ClusterTrustBundle.
var (
	caConfigMap = resource.Key{Namespace: "team0", Name: "backend-ca"}
	trustBundle = "backend-ca"
)

// addTrust adds the backend TLS objects to s.
func addTrust(s *resource.Snapshot) {
	s.ConfigMaps.Set(caConfigMap, caMap(caConfigMap.Namespace))
	s.ConfigMaps.Set(resource.Key{Namespace: "team1", Name: "backend-ca"}, caMap("team1"))
	s.ClusterTrustBundles.Set(trustBundle, bundle())
	for _, p := range richPolicies() {
		s.BackendTLSPolicies.Set(key(p.ObjectMeta), p)
	}
}

// richPolicies are the BackendTLSPolicies of Rich.
func richPolicies() []*gwv1.BackendTLSPolicy {
	return []*gwv1.BackendTLSPolicy{
		backendPolicy("team0", "svc0-tls", "svc0", "http", 0, gwv1.LocalObjectReference{Kind: "ConfigMap", Name: "backend-ca"}),
		backendPolicy("team1", "svc0-tls", "svc0", "", 1, gwv1.LocalObjectReference{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle", Name: gwv1.ObjectName(trustBundle)}),
	}
}

func caMap(ns string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backend-ca"}, Data: map[string]string{"ca.crt": TestCertPEM}}
}

func bundle() *certificatesv1.ClusterTrustBundle {
	return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: trustBundle},
		Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: TestCertPEM}}
}

// backendPolicy is a BackendTLSPolicy of ns targeting Service svc (its
// port section, or the whole Service when section is ""), created age
// seconds after the epoch, trusting ca.
func backendPolicy(ns, name, svc, section string, age int, ca gwv1.LocalObjectReference) *gwv1.BackendTLSPolicy {
	t := gwv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{Kind: "Service", Name: gwv1.ObjectName(svc)}}
	if section != "" {
		t.SectionName = ptr(gwv1.SectionName(section))
	}
	return &gwv1.BackendTLSPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1, CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(age) * time.Second))},
		Spec: gwv1.BackendTLSPolicySpec{
			TargetRefs: []gwv1.LocalPolicyTargetReferenceWithSectionName{t},
			Validation: gwv1.BackendTLSPolicyValidation{CACertificateRefs: []gwv1.LocalObjectReference{ca}, Hostname: gwv1.PreciseHostname(svc + "." + ns + ".example")},
		},
	}
}

// changeTrust changes the backend TLS objects: the CA ConfigMap (invalid,
// deleted, restored), the ClusterTrustBundle (invalid, deleted, restored),
// a policy (created, one of Rich's restored, its target, CA, validation
// changed, or deleted).
func changeTrust(c *resource.Snapshot, rng *rand.Rand) string {
	switch rng.IntN(8) {
	case 0:
		if cm := c.ConfigMaps.Value(caConfigMap); cm != nil && rng.IntN(2) == 0 {
			cm = cm.DeepCopy()
			cm.Data["ca.crt"] = "garbage"
			c.ConfigMaps.Set(caConfigMap, cm)
			return "ca configmap invalid"
		}
		c.ConfigMaps.Delete(caConfigMap)
		return "ca configmap deleted"
	case 1:
		c.ConfigMaps.Set(caConfigMap, caMap(caConfigMap.Namespace))
		return "ca configmap restored"
	case 2:
		switch b := c.ClusterTrustBundles.Value(trustBundle); {
		case b == nil:
			c.ClusterTrustBundles.Set(trustBundle, bundle())
			return "trust bundle restored"
		case rng.IntN(2) == 0:
			b = b.DeepCopy()
			b.Spec.TrustBundle = "garbage"
			c.ClusterTrustBundles.Set(trustBundle, b)
			return "trust bundle invalid"
		}
		c.ClusterTrustBundles.Delete(trustBundle)
		return "trust bundle deleted"
	case 3:
		ns := fmt.Sprintf("team%d", rng.IntN(3))
		p := backendPolicy(ns, fmt.Sprintf("new%d", rng.IntN(3)), fmt.Sprintf("svc%d", rng.IntN(2)), []string{"", "http", "nope"}[rng.IntN(3)],
			rng.IntN(3)-1, gwv1.LocalObjectReference{Kind: "ConfigMap", Name: "backend-ca"})
		c.BackendTLSPolicies.Set(key(p.ObjectMeta), p)
		return "backend tls policy created " + key(p.ObjectMeta).String()
	case 4:
		p := richPolicies()[rng.IntN(2)]
		c.BackendTLSPolicies.Set(key(p.ObjectMeta), p)
		return "backend tls policy restored " + key(p.ObjectMeta).String()
	}
	k, p, ok := pick(rng, c.BackendTLSPolicies, resource.CompareKeys)
	if !ok {
		return "no backend tls policy"
	}
	p = p.DeepCopy()
	p.Generation++
	c.BackendTLSPolicies.Set(k, p)
	switch rng.IntN(6) {
	case 0:
		c.BackendTLSPolicies.Delete(k)
		return "backend tls policy deleted " + k.String()
	case 1:
		p.Spec.TargetRefs[0].Name = gwv1.ObjectName(fmt.Sprintf("svc%d", rng.IntN(3)))
		return "backend tls policy target " + k.String()
	case 2, 3:
		kinds := []gwv1.LocalObjectReference{{Kind: "ConfigMap", Name: "backend-ca"}, {Kind: "ConfigMap", Name: "nope"},
			{Group: "example.com", Kind: "Bundle", Name: "x"}, {Group: "certificates.k8s.io", Kind: "ClusterTrustBundle", Name: gwv1.ObjectName(trustBundle)}}
		p.Spec.Validation.CACertificateRefs = []gwv1.LocalObjectReference{kinds[rng.IntN(len(kinds))]}
		p.Spec.Validation.WellKnownCACertificates = nil
		return "backend tls policy ca " + k.String()
	case 4:
		p.Spec.Validation.CACertificateRefs = nil
		p.Spec.Validation.WellKnownCACertificates = ptr(gwv1.WellKnownCACertificatesSystem)
		return "backend tls policy system CAs " + k.String()
	default:
		p.Spec.Validation.Hostname = gwv1.PreciseHostname(fmt.Sprintf("h%d.example", rng.IntN(10)))
		p.Spec.Validation.SubjectAltNames = []gwv1.SubjectAltName{{Type: gwv1.URISubjectAltNameType, URI: "spiffe://example/ns/x"}}
		return "backend tls policy validation " + k.String()
	}
}
