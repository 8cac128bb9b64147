package status

import (
	"context"
	"slices"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/refs"
	"github.com/portico-dev/portico/internal/resource"
)

// Gateway conditions from outside the translation: Portico's own
// conditions that the translator cannot know, such as
// portico.dev/ProxiesInSync, which says what the proxies accepted (package
// proxysync). Their source hands the writer the whole set at once
// (SetGatewayConditions); a Gateway whose condition changed (in anything
// but its time) is enqueued, and written under the same write interval as
// any other change, so a source that recomputes often costs no writes
// while nothing changes. A Gateway the set does not name keeps the live
// condition of each type the source manages: a new leader, whose source
// has not reported yet, does not remove what the previous one wrote.

// SetGatewayConditions replaces the extra conditions of Gateways, by
// Gateway; managed are the condition types the source sets. Conditions
// carry no time and no observedGeneration: the writer stamps both.
func (w *Writer) SetGatewayConditions(managed []string, conds map[types.NamespacedName][]metav1.Condition) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.extraTypes = slices.Clone(managed)
	old := w.extra
	w.extra = make(map[string][]metav1.Condition, len(conds))
	for nn, c := range conds {
		k := gatewayKey(nn)
		w.extra[k] = c
		if !sameConditions(old[k], c) {
			w.enqueueExtra(k)
		}
	}
	for k := range old {
		if _, ok := w.extra[k]; !ok {
			w.enqueueExtra(k)
		}
	}
}

func gatewayKey(nn types.NamespacedName) string {
	return (&gatewayapi.Status{Kind: resource.KindGateway, Namespace: nn.Namespace, Name: nn.Name}).Key()
}

// enqueueExtra enqueues the Gateway k if it has a desired status. Called
// with w.mu held.
func (w *Writer) enqueueExtra(k string) {
	if e := w.desired[k]; e != nil {
		e.version++
		w.enqueue(k, e)
	}
}

func sameConditions(a, b []metav1.Condition) bool {
	return slices.EqualFunc(a, b, func(x, y metav1.Condition) bool {
		return x.Type == y.Type && x.Status == y.Status && x.Reason == y.Reason && x.Message == y.Message
	})
}

// withExtra returns the desired Gateway status s with the extra conditions
// of its Gateway, or, when it has none, the live conditions of the managed
// types. Called with w.mu held; s is not modified.
func (w *Writer) withExtra(k string, s *gwv1.GatewayStatus, generation int64, live *gwv1.GatewayStatus) *gwv1.GatewayStatus {
	if len(w.extraTypes) == 0 || s == nil {
		return s
	}
	out := *s
	out.Conditions = slices.Clone(s.Conditions)
	if conds, ok := w.extra[k]; ok {
		for _, c := range conds {
			c.ObservedGeneration = generation
			out.Conditions = append(out.Conditions, c)
		}
		return &out
	}
	if live != nil {
		for _, c := range live.Conditions {
			if slices.Contains(w.extraTypes, c.Type) {
				out.Conditions = append(out.Conditions, c)
			}
		}
	}
	return &out
}

// Route conditions from outside the translation work alike, on the
// entries of a route's status.parents: SetRouteConditions hands the
// writer the whole set, by route, each condition for the route's entries
// whose parentRef names a given Gateway (entries naming a ListenerSet get
// none: which Gateway they stand for is the translation's to say). Until
// the source first sets them in a term (routeExtraSet), every route keeps
// the live conditions of the managed types, as a Gateway does; after, the
// set is the whole truth: a route it does not name has none, so that the
// source's conditions cost writes only of the routes they are about.

// RouteParentCondition is a condition of the entries of a route's
// status.parents for the Gateway Gateway.
type RouteParentCondition struct {
	Gateway   types.NamespacedName
	Condition metav1.Condition
}

// SetRouteConditions replaces the extra conditions of routes, by status
// key ("HTTPRoute/<ns>/<name>"); managed are the condition types the
// source sets. A nil conds means that the source has not reported (a new
// term): live conditions are kept until it does.
//
// The first set of a term also enqueues the routes whose live status (in
// the informer cache) holds a managed condition the set no longer gives
// them: a previous leader's, for a rejection that ended meanwhile.
func (w *Writer) SetRouteConditions(managed []string, conds map[string][]RouteParentCondition) {
	w.mu.Lock()
	first := conds != nil && !w.routeExtraSet
	w.mu.Unlock()
	var holding []string
	if first {
		holding = w.routesHolding(managed)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.routeExtraTypes = slices.Clone(managed)
	old, wasSet := w.routeExtra, w.routeExtraSet
	w.routeExtra, w.routeExtraSet = conds, conds != nil
	if !w.routeExtraSet {
		return
	}
	for _, k := range holding {
		if _, ok := conds[k]; !ok {
			w.enqueueExtra(k)
		}
	}
	for k, c := range conds {
		if !wasSet || !sameRouteConditions(old[k], c) {
			w.enqueueExtra(k)
		}
	}
	for k := range old {
		if _, ok := conds[k]; !ok {
			w.enqueueExtra(k)
		}
	}
}

func sameRouteConditions(a, b []RouteParentCondition) bool {
	return slices.EqualFunc(a, b, func(x, y RouteParentCondition) bool {
		return x.Gateway == y.Gateway && sameConditions([]metav1.Condition{x.Condition}, []metav1.Condition{y.Condition})
	})
}

// withRouteExtra returns the desired route status s (of a route in
// namespace ns) with the extra conditions of the route k on its entries,
// or, before the source has reported, the live conditions of the managed
// types. Called with w.mu held; s is not modified.
func (w *Writer) withRouteExtra(k, ns string, s *gwv1.RouteStatus, generation int64, live *gwv1.RouteStatus) *gwv1.RouteStatus {
	if len(w.routeExtraTypes) == 0 || s == nil {
		return s
	}
	conds := w.routeExtra[k]
	if w.routeExtraSet && len(conds) == 0 {
		return s
	}
	out := gwv1.RouteStatus{Parents: slices.Clone(s.Parents)}
	for i := range out.Parents {
		p := &out.Parents[i]
		var add []metav1.Condition
		if w.routeExtraSet {
			ref := refs.ParentOf(ns, p.ParentRef)
			if !ref.IsGateway() {
				continue
			}
			for _, c := range conds {
				if c.Gateway.Namespace == ref.Namespace && c.Gateway.Name == ref.Name {
					c.Condition.ObservedGeneration = generation
					add = append(add, c.Condition)
				}
			}
		} else if live != nil {
			key := refs.EntryOf(refs.StoredParentRef(p.ParentRef))
			for _, l := range live.Parents {
				if string(l.ControllerName) != w.cfg.ControllerName || refs.EntryOf(l.ParentRef) != key {
					continue
				}
				for _, c := range l.Conditions {
					if slices.Contains(w.routeExtraTypes, c.Type) {
						add = append(add, c)
					}
				}
			}
		}
		if len(add) > 0 {
			p.Conditions = append(slices.Clone(p.Conditions), add...)
		}
	}
	return &out
}

// routesHolding lists the keys of the routes of the informer cache whose
// entries of ours hold a condition of one of types.
func (w *Writer) routesHolding(types []string) []string {
	if w.cfg.Reader == nil || len(types) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.WriteTimeout)
	defer cancel()
	var out []string
	for _, kind := range sharedKinds {
		list, err := newList(kind)
		if err != nil {
			continue
		}
		if err := w.cfg.Reader.List(ctx, list); err != nil {
			w.cfg.Log.Warn("status: listing routes for their extra conditions failed", "kind", kind, "err", err)
			continue
		}
		_ = apimeta.EachListItem(list, func(o runtime.Object) error {
			obj, ok := o.(client.Object)
			if !ok {
				return nil
			}
			rs := routeStatusOf(obj)
			if rs == nil {
				return nil
			}
			for _, p := range rs.Parents {
				if string(p.ControllerName) != w.cfg.ControllerName {
					continue
				}
				if slices.ContainsFunc(p.Conditions, func(c metav1.Condition) bool { return slices.Contains(types, c.Type) }) {
					out = append(out, (&gatewayapi.Status{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}).Key())
					return nil
				}
			}
			return nil
		})
	}
	return out
}
