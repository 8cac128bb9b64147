package gatewayapi

import (
	"slices"

	"github.com/portico-dev/portico/internal/gatewayapi/inputs"
	"github.com/portico-dev/portico/internal/resource"
)

// Reattach translates changed routes against Gateways translated before:
// the Gateways keep their translated state (listeners, ListenerSets, the
// other routes attached to them) from prev; the changed routes are
// detached from their listeners, compiled and attached again, and only the
// statuses of those routes and of their Gateways and ListenerSets, and the
// IR of those Gateways, are computed again (the IR reusing the virtual
// hosts whose routes did not change). Unchanged routes are not looked at,
// even those attached to the same Gateways.
//
// gateways are the Gateways the changed routes named and name, sets their
// ListenerSets (sorted), routes the changed routes (sorted by
// CompareRouteRefs). It is exact only when nothing but those routes (and
// EndpointSlices) changed since prev was translated: the caller's promise.
//
// It returns nil, having changed nothing but cache, when it cannot give
// what a translation of those Gateways would: a listener holding routes of
// two kinds placed in virtual hosts (whose routes may take hostnames from
// each other), or a Gateway budget that could bind. Otherwise prev's states of
// those Gateways and ListenerSets are changed in place, and the Partial's
// States hold them and the changed routes.
func Reattach(snap *resource.Snapshot, opts Options, prev *States, gateways, sets []resource.Key, routes []resource.Ref, cache Cache, rec inputs.Recorder) *Partial {
	t := newTranslator(snap, opts, rec, cache)
	for _, g := range gateways {
		if gs := prev.gateways[g]; gs != nil {
			t.gateways[g] = gs
			t.gwOrder = append(t.gwOrder, gs)
		}
	}
	slices.SortFunc(t.gwOrder, func(a, b *gatewayState) int { return resource.CompareKeys(a.key(), b.key()) })
	for _, k := range sets {
		if s := prev.sets[k]; s != nil {
			t.sets = append(t.sets, s)
		}
	}
	// The changed routes, as they are now.
	old := set[*routeState]{}
	for _, r := range routes {
		if rs := prev.routes[r]; rs != nil {
			old.add(rs)
		}
	}
	for _, r := range routes {
		if rs := t.translateRoute(r, nil); rs != nil {
			t.routes = append(t.routes, rs)
		}
	}

	// The listeners whose attachments change, with their new attachments
	// in translation order (routes sorted, then parents in order).
	added := map[*listener][]*attachment{}
	var touched []*listener
	touch := func(l *listener) {
		if _, ok := added[l]; !ok {
			added[l] = nil
			touched = append(touched, l)
		}
	}
	for rs := range old {
		for _, ps := range rs.parents {
			for _, at := range ps.atts {
				touch(at.listener)
			}
		}
	}
	for _, rs := range t.routes {
		for i, ps := range rs.parents {
			for _, at := range ps.atts {
				at.parent = i
				touch(at.listener)
				added[at.listener] = append(added[at.listener], at)
			}
		}
	}
	for _, l := range touched {
		if mixedKinds(l, old, added[l]) {
			return nil
		}
	}
	// A Gateway budget binds across routes: whenever it could, the
	// caller translates the Gateway as a whole instead.
	if !t.fastPathWithinBudgets(old) {
		return nil
	}

	// From here on the saved states change.
	t.reattached = make(map[*listener][]string, len(touched))
	for _, l := range touched {
		hosts := []string{}
		for _, at := range added[l] {
			hosts = append(hosts, at.hostnames...)
		}
		for rs := range old {
			for _, ps := range rs.parents {
				for _, at := range ps.atts {
					if at.listener == l {
						hosts = append(hosts, at.hostnames...)
					}
				}
			}
		}
		t.reattached[l] = hosts
	}
	for _, l := range touched {
		replaceAttachments(l, old, added[l])
		l.routes, l.lastRoute = 0, nil
		for _, at := range l.attachments {
			if at.route != l.lastRoute {
				l.lastRoute = at.route
				l.routes++
			}
		}
	}
	t.routeStatuses()
	t.gatewayStatuses()
	return t.partial(t.buildIR(), true)
}

// mixedKinds reports whether listener l holds, or would hold once the
// attachments of the old routes are replaced by added, routes of two kinds
// placed in virtual hosts.
func mixedKinds(l *listener, old set[*routeState], added []*attachment) bool {
	before := l.kindCount
	after := before
	for rs := range old {
		for _, ps := range rs.parents {
			for _, at := range ps.atts {
				if at.listener == l {
					after[kindIndex(rs.kind)]--
				}
			}
		}
	}
	for _, at := range added {
		after[kindIndex(at.route.kind)]++
	}
	return mixedVhostKinds(before) || mixedVhostKinds(after)
}

// replaceAttachments replaces, in the attachments of l and its host
// index, those of the old routes by added, in translation order. The lists
// are sorted: attachments are found and placed by binary search.
func replaceAttachments(l *listener, old set[*routeState], added []*attachment) {
	l.attachments = slices.Clone(l.attachments)
	remove := func(list []*attachment, at *attachment) []*attachment {
		if i, ok := slices.BinarySearchFunc(list, at, compareAttachments); ok && list[i] == at {
			return slices.Delete(list, i, i+1)
		}
		return list
	}
	insert := func(list []*attachment, at *attachment) []*attachment {
		i, _ := slices.BinarySearchFunc(list, at, compareAttachments)
		return slices.Insert(list, i, at)
	}
	for rs := range old {
		for _, ps := range rs.parents {
			for _, at := range ps.atts {
				if at.listener != l {
					continue
				}
				l.attachments = remove(l.attachments, at)
				l.kindCount[kindIndex(rs.kind)]--
				if l.byHost != nil {
					for _, h := range at.hostnames {
						if list := remove(l.byHost[h], at); len(list) > 0 {
							l.byHost[h] = list
						} else {
							delete(l.byHost, h)
						}
					}
				}
			}
		}
	}
	for _, at := range added {
		l.attachments = insert(l.attachments, at)
		l.kindCount[kindIndex(at.route.kind)]++
		if l.byHost != nil {
			for _, h := range at.hostnames {
				l.byHost[h] = insert(slices.Clip(l.byHost[h]), at)
			}
		}
	}
}

// compareAttachments orders attachments as a translation makes them:
// by kind (resource.RouteKinds), namespace and name, then parent.
func compareAttachments(a, b *attachment) int {
	if c := CompareRouteRefs(a.route.ref(), b.route.ref()); c != 0 {
		return c
	}
	return a.parent - b.parent
}
