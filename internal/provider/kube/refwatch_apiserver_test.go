package kube

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/testenv"
)

// runProvider runs a provider on cfg until the test ends; notified counts
// its notifications.
func runProvider(t *testing.T, cfg *rest.Config, notified *atomic.Int64) *Provider {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := New(Config{RESTConfig: cfg, Scheme: NewScheme(), Notify: func() { notified.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
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
			t.Error("provider did not stop")
		}
	})
	waitFor(t, 30*time.Second, "caches synced", func() (bool, string) { return p.Synced(), "not synced" })
	return p
}

// The provider holds the ConfigMaps CA references name, and only those:
// one watch per referenced ConfigMap, started and stopped as references
// come and go; their changes reach snapshots and wake the pipeline; a
// provider started after the objects exist has them in its first
// snapshot.
func TestReferencedConfigMapsOnly(t *testing.T) {
	cfg, _ := testenv.StartAPIServer(t)
	ctx := context.Background()
	c, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	const ns = "apps"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ca", "unrelated"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"ca.crt": "v1"}}
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	var notified atomic.Int64
	p := runProvider(t, cfg, &notified)
	snapshot := func() *resource.Snapshot {
		s, err := p.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	caKey := types.NamespacedName{Namespace: ns, Name: "ca"}
	if s := snapshot(); s.ConfigMaps.Len() != 0 {
		t.Fatalf("unreferenced ConfigMaps in the snapshot: %v", resource.SortedKeys(s.ConfigMaps))
	}

	policy := &gwv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}, Spec: gwv1.BackendTLSPolicySpec{
		TargetRefs: []gwv1.LocalPolicyTargetReferenceWithSectionName{{LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{Kind: "Service", Name: "svc"}}},
		Validation: gwv1.BackendTLSPolicyValidation{CACertificateRefs: []gwv1.LocalObjectReference{{Kind: "ConfigMap", Name: "ca"}}, Hostname: "svc.example.com"},
	}}
	if err := c.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	// The policy reaches a snapshot; that snapshot's references start the
	// watch, whose object reaches a later one.
	waitFor(t, 30*time.Second, "the referenced ConfigMap in a snapshot", func() (bool, string) {
		s := snapshot()
		cm := s.ConfigMaps.Value(caKey)
		return cm != nil && s.ConfigMaps.Len() == 1, fmt.Sprintf("policies %d, configmaps %v", s.BackendTLSPolicies.Len(), resource.SortedKeys(s.ConfigMaps))
	})
	if w := p.byRef.watching(); len(w) != 1 || !w[caKey] {
		t.Errorf("watching %v, want %v only", w, caKey)
	}

	// A change of it wakes the pipeline and reaches the next snapshot; one
	// of the unrelated ConfigMap does neither.
	before := notified.Load()
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, caKey, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["ca.crt"] = "v2"
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the new data in a snapshot", func() (bool, string) {
		got := snapshot().ConfigMaps.Value(caKey)
		return got != nil && got.Data["ca.crt"] == "v2" && notified.Load() > before, fmt.Sprintf("notified %d", notified.Load()-before)
	})

	// A second provider, started now, has it in its first snapshot.
	var n2 atomic.Int64
	p2 := runProvider(t, cfg, &n2)
	if s, err := p2.Snapshot(ctx); err != nil || s.ConfigMaps.Value(caKey) == nil {
		t.Errorf("first snapshot of a new provider lacks the referenced ConfigMap (err %v)", err)
	}

	// The last reference gone, the watch stops and the ConfigMap leaves.
	if err := c.Delete(ctx, policy); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the ConfigMap out of snapshots", func() (bool, string) {
		s := snapshot()
		return s.ConfigMaps.Len() == 0 && len(p.byRef.watching()) == 0, fmt.Sprintf("configmaps %v, watching %v", resource.SortedKeys(s.ConfigMaps), p.byRef.watching())
	})
}
