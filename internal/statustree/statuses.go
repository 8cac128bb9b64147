package statustree

import (
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/resource"
)

// Statuses gives the status of the objects of a tree; nil when an object
// has none.
type Statuses interface {
	Gateway(key resource.Key) *gwv1.GatewayStatus
	ListenerSet(key resource.Key) *gwv1.ListenerSetStatus
	// Route holds every controller's status.parents entries; the tree
	// keeps Options.ControllerName's.
	Route(kind resource.Kind, key resource.Key) *gwv1.RouteStatus
}

// ObjectStatuses reads the status the objects of snap carry: the live
// status of objects read from a cluster.
func ObjectStatuses(snap *resource.Snapshot) Statuses { return objectStatuses{snap} }

type objectStatuses struct{ snap *resource.Snapshot }

func (o objectStatuses) Gateway(key resource.Key) *gwv1.GatewayStatus {
	if gw, ok := o.snap.Gateways.Get(key); ok && gw != nil {
		return &gw.Status
	}
	return nil
}

func (o objectStatuses) ListenerSet(key resource.Key) *gwv1.ListenerSetStatus {
	if ls, ok := o.snap.ListenerSets.Get(key); ok && ls != nil {
		return &ls.Status
	}
	return nil
}

func (o objectStatuses) Route(kind resource.Kind, key resource.Key) *gwv1.RouteStatus {
	if v, ok := o.snap.Route(resource.Ref{Kind: kind, Key: key}); ok {
		return v.Status
	}
	return nil
}

// DesiredStatuses reads the statuses a translation computed
// (gatewayapi.Result.StatusSet): what Portico would write.
func DesiredStatuses(set gatewayapi.StatusSet) Statuses { return desiredStatuses{set} }

type desiredStatuses struct{ set gatewayapi.StatusSet }

func (d desiredStatuses) Gateway(key resource.Key) *gwv1.GatewayStatus {
	if s := d.set.Get(resource.KindGateway, key.Namespace, key.Name); s != nil {
		return s.Gateway
	}
	return nil
}

func (d desiredStatuses) ListenerSet(key resource.Key) *gwv1.ListenerSetStatus {
	if s := d.set.Get(resource.KindListenerSet, key.Namespace, key.Name); s != nil {
		return s.ListenerSet
	}
	return nil
}

func (d desiredStatuses) Route(kind resource.Kind, key resource.Key) *gwv1.RouteStatus {
	if s := d.set.Get(kind, key.Namespace, key.Name); s != nil {
		return s.Route
	}
	return nil
}
