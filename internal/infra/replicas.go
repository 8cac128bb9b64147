package infra

import (
	"context"
	"encoding/json"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/proxyspec"
)

// Who owns a Deployment's replicas.
//
// Without autoscaling, Portico: its apply configuration sets
// spec.replicas, and a change by anyone else is restored. With
// autoscaling, the HorizontalPodAutoscaler: Portico's configuration has no
// replicas, so that its applies (field manager proxyspec.FieldManager, forced) never
// reset what the autoscaler wrote through the scale subresource.
//
// Dropping a field from a server-side apply configuration removes it from
// the object when no other manager owns it, and a Deployment without
// replicas has one. When autoscaling is turned on for a Deployment whose
// replicas Portico owns, Portico first applies the current value alone
// with another field manager (ReplicasFieldManager, not forced), which
// keeps it while Portico lets go; the autoscaler's first scaling takes it
// over (Kubernetes' "transferring ownership" procedure). A new autoscaled
// Deployment starts with the API's default of one replica, until the
// autoscaler raises it to minReplicas.

// ReplicasFieldManager holds a Deployment's replicas while their
// ownership passes from Portico to the HorizontalPodAutoscaler.
const ReplicasFieldManager = "portico-replicas-handover"

// handOverReplicas keeps the replicas of Deployment ns/name when Portico
// owns them and is about to apply a configuration without them. It reads
// the live object (the informer cache drops managedFields).
func (r *Reconciler) handOverReplicas(ctx context.Context, ns, name string) error {
	var live appsv1.Deployment
	err := r.cfg.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &live)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case live.Spec.Replicas == nil || !ownsReplicas(live.ManagedFields, proxyspec.FieldManager):
		return nil
	}
	keep := appsv1ac.Deployment(name, ns).WithSpec(appsv1ac.DeploymentSpec().WithReplicas(*live.Spec.Replicas))
	err = r.cfg.Client.Apply(ctx, keep, client.FieldOwner(ReplicasFieldManager))
	if apierrors.IsConflict(err) {
		// Someone else (the autoscaler) set another value since the
		// read and owns the field now: Portico may let go.
		return nil
	}
	if err != nil {
		r.cfg.Metrics.Writes.WithLabelValues("apply", "error").Inc()
		return err
	}
	r.cfg.Metrics.Writes.WithLabelValues("apply", "ok").Inc()
	return nil
}

// ownsReplicas reports whether manager's apply owns spec.replicas.
func ownsReplicas(fields []metav1.ManagedFieldsEntry, manager string) bool {
	for _, mf := range fields {
		if mf.Manager != manager || mf.Operation != metav1.ManagedFieldsOperationApply || mf.Subresource != "" || mf.FieldsV1 == nil {
			continue
		}
		var set struct {
			Spec map[string]json.RawMessage `json:"f:spec"`
		}
		if json.Unmarshal(mf.FieldsV1.Raw, &set) != nil {
			continue
		}
		if _, ok := set.Spec["f:replicas"]; ok {
			return true
		}
	}
	return false
}

// deleteAutoscaler deletes the HorizontalPodAutoscaler of Gateway gw, if
// the Gateway controls one: autoscaling was turned off. It reads the
// informer cache only: an autoscaler the cache does not hold yet is
// observed when it does, which enqueues the Gateway again.
func (r *Reconciler) deleteAutoscaler(ctx context.Context, gw *gwv1.Gateway) error {
	var hpa autoscalingv2.HorizontalPodAutoscaler
	key := types.NamespacedName{Namespace: gw.Namespace, Name: proxyspec.Name(gw.Name)}
	var rd client.Reader = r.cfg.Client
	if r.cfg.Reader != nil {
		rd = r.cfg.Reader
	}
	if err := rd.Get(ctx, key, &hpa); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !proxyspec.ControlledByName(&hpa, gw.Name) {
		return nil // not Portico's to delete
	}
	// The one read, not a successor of the same name.
	del := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := r.cfg.Client.Delete(ctx, del, client.Preconditions{UID: &hpa.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		r.cfg.Metrics.Writes.WithLabelValues("delete", "error").Inc()
		return err
	}
	r.cfg.Metrics.Writes.WithLabelValues("delete", "ok").Inc()
	return nil
}
