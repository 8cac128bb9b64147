package status

import (
	"context"
	"errors"
	"github.com/portico-dev/portico/internal/resource"
	"reflect"
	"testing"

	dto "github.com/prometheus/client_model/go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// staleReader answers with the objects as they were when it was made, like
// an informer cache that has not seen the latest write yet.
type staleReader map[client.ObjectKey]client.Object

func (r staleReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	o, ok := r[key]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(o.DeepCopyObject()).Elem())
	return nil
}

func (staleReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("not implemented")
}

// A Gateway's status is wholly ours: it is written without a resourceVersion
// precondition, so a spec write that landed after our read (another tool
// adding a listener) neither makes it conflict nor is undone by it, and
// fields we no longer set are removed.
func TestGatewayStatusWrittenOverConcurrentSpecWrite(t *testing.T) {
	ctx := context.Background()
	gw := &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw", Generation: 1},
		Spec:       gwv1.GatewaySpec{GatewayClassName: "portico", Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}},
	}
	api := newFakeAPI(t, gw)
	var read gwv1.Gateway
	if err := api.Get(ctx, client.ObjectKeyFromObject(gw), &read); err != nil {
		t.Fatal(err)
	}
	read.Status.Addresses = []gwv1.GatewayStatusAddress{{Value: "192.0.2.1"}}
	if err := api.Status().Update(ctx, &read); err != nil {
		t.Fatal(err)
	}
	stale := staleReader{client.ObjectKeyFromObject(gw): read.DeepCopy()}
	// Another client adds a listener after our cache saw the object.
	read.Spec.Listeners = append(read.Spec.Listeners, gwv1.Listener{Name: "other", Port: 8080, Protocol: gwv1.HTTPProtocolType})
	read.Generation = 2
	if err := api.Update(ctx, &read); err != nil {
		t.Fatal(err)
	}
	writesBefore := api.writes.Load()

	w, _ := testWriter(t, Config{Client: api, Reader: stale, ControllerName: string(ours)})
	w.SetLeading(ctx)
	run(t, w)
	w.Publish(setOf(gatewayStatus("infra", "gw", 3)))
	api.waitWrites(t, writesBefore+1)

	var got gwv1.Gateway
	if err := api.Get(ctx, client.ObjectKeyFromObject(gw), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Listeners) != 2 {
		t.Errorf("spec listeners = %d, want the other client's 2", len(got.Spec.Listeners))
	}
	if len(got.Status.Listeners) != 1 || got.Status.Listeners[0].AttachedRoutes != 3 {
		t.Errorf("status listeners = %+v, want ours (attachedRoutes 3)", got.Status.Listeners)
	}
	if len(got.Status.Addresses) != 0 {
		t.Errorf("status addresses = %v, want them removed", got.Status.Addresses)
	}
	if n := api.writes.Load() - writesBefore; n != 1 {
		t.Errorf("%d status writes, want 1", n)
	}
	var m dto.Metric
	if err := w.cfg.Metrics.Writes.WithLabelValues(resource.KindGateway.String(), ResultConflict).Write(&m); err != nil {
		t.Fatal(err)
	}
	if n := m.GetCounter().GetValue(); n != 0 {
		t.Errorf("%v conflicts, want 0", n)
	}
}
