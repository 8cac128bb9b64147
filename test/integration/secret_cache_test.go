package integration

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/portico-dev/portico/internal/provider/kube"
	"github.com/portico-dev/portico/internal/resource"
)

// The informer cache holds TLS Secrets (listener certificates, the proxies'
// client certificates) and no other Secret of the cluster: an Opaque
// Secret, a ServiceAccount token or registry credentials in a tenant's
// namespace never enter Portico's memory, its snapshots or its caches,
// created before or after the informers started.
func TestSecretCacheHoldsOnlyTLSSecrets(t *testing.T) {
	f := newFixture(t)
	tlsSecret := func(name string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: []byte("cert"), corev1.TLSPrivateKeyKey: []byte("key")},
		}
	}
	opaque := func(name string, typ corev1.SecretType) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
			Type:       typ,
			StringData: map[string]string{"password": "hunter2", ".dockerconfigjson": `{"auths":{}}`},
		}
	}
	f.create(tlsSecret("cert-before"))
	f.create(opaque("password-before", corev1.SecretTypeOpaque))

	p, err := kube.New(kube.Config{RESTConfig: restCfg, Scheme: kube.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("provider: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("provider did not stop within 30s")
		}
	})
	eventually(t, 30*time.Second, "the caches to sync", p.Synced)

	f.create(opaque("password-after", corev1.SecretTypeOpaque))
	f.create(opaque("registry-after", corev1.SecretTypeDockerConfigJson))
	// Created last: one watch delivers events in order, so once this one
	// is in the cache, the others would be too, were they watched.
	f.create(tlsSecret("cert-after"))

	var snap *resource.Snapshot
	eventually(t, 30*time.Second, "the TLS Secret created last in a snapshot", func() bool {
		snap, err = p.Snapshot(ctx)
		return err == nil && snap.Secrets.Value(resource.Key{Namespace: f.ns, Name: "cert-after"}) != nil
	})
	if snap.Secrets.Value(resource.Key{Namespace: f.ns, Name: "cert-before"}) == nil {
		t.Error("a TLS Secret created before the start is not in the snapshot")
	}
	for _, name := range []string{"password-before", "password-after", "registry-after"} {
		if snap.Secrets.Value(resource.Key{Namespace: f.ns, Name: name}) != nil {
			t.Errorf("Secret %s (not kubernetes.io/tls) is in the snapshot", name)
		}
		var sec corev1.Secret
		if err := p.Cache().Get(ctx, f.key(name), &sec); !apierrors.IsNotFound(err) {
			t.Errorf("Secret %s (not kubernetes.io/tls) from the cache: %v (%s), want NotFound", name, err, sec.Type)
		}
	}
}
