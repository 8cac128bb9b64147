package gatewayapi

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/testenv/workload"
)

// TestHeadlessBackendsTranslateAlike: a backend is reached through its
// Service's EndpointSlices, never its ClusterIP, so giving every backend
// Service a ClusterIP or making it headless changes neither the IR nor a
// status. The benchmark suite (test/bench) relies on it: its backend
// Services are headless, because the API server's ClusterIP allocation
// held the creates of 50,000 Services to a few per second. A proxy's own
// Service (owned by its Gateway) keeps its ClusterIP: that one is a
// Gateway address.
func TestHeadlessBackendsTranslateAlike(t *testing.T) {
	for name, snap := range worlds() {
		opts := Options{ControllerName: workload.ControllerName}
		if name == "determinism" {
			opts.ControllerName = testController
		}
		withIP := withBackendClusterIPs(t, snap, func(i int) string {
			return fmt.Sprintf("10.96.%d.%d", 1+i>>8&255, i&255)
		})
		headless := withBackendClusterIPs(t, snap, func(int) string { return corev1.ClusterIPNone })
		a, b := Translate(withIP, opts), Translate(headless, opts)
		if len(a.Gateways) == 0 {
			t.Fatalf("%s: nothing translated", name)
		}
		if !reflect.DeepEqual(a.Gateways, b.Gateways) {
			t.Errorf("%s: the IR differs when backend Services are headless", name)
		}
		if !reflect.DeepEqual(statuses(a.StatusSet), statuses(b.StatusSet)) {
			t.Errorf("%s: the statuses differ when backend Services are headless", name)
		}
	}
}

// withBackendClusterIPs returns snap with the ClusterIP of every Service
// that no object owns (the backends) set to ip(i), i counting them.
func withBackendClusterIPs(t *testing.T, snap *resource.Snapshot, ip func(i int) string) *resource.Snapshot {
	t.Helper()
	e := snap.Edit()
	i := 0
	for key, svc := range snap.Services.All() {
		if len(svc.OwnerReferences) > 0 {
			continue
		}
		c := svc.DeepCopy()
		c.Spec.ClusterIP = ip(i)
		c.Spec.ClusterIPs = []string{c.Spec.ClusterIP}
		if err := e.Set(resource.KindService, key, c); err != nil {
			t.Fatal(err)
		}
		i++
	}
	if i == 0 {
		t.Fatal("no backend Service in the snapshot")
	}
	return e.Snapshot()
}
