package server

import (
	"strconv"
	"strings"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// deltaCache serves the resources of one type of one Gateway to delta xDS
// streams, in place of go-control-plane's LinearCache, for two reasons:
//
//   - Cost. A LinearCache answers each watch by walking every resource of
//     its type (wildcard watches, as Envoy's CDS and LDS are) and cloning
//     the map of what the client knows, both for every change and for
//     every new watch (each ACK opens one): with 1,000 proxies on a
//     Gateway of 10,000 clusters, a change of one cluster costs tens of
//     millions of map operations. Here an update visits only the watches
//     interested in the names it changes and looks only at those names;
//     a watch opened by an ACK looks only at the names changed since the
//     stream's last response (a bounded log of recent updates), or at
//     nothing when nothing changed; and the map of what the client knows
//     is updated in place.
//   - VHDS. Envoy subscribes to the virtual hosts of a route config by the
//     route config's name and expects every resource "<name>/…" (it
//     matches by namespace, the text before the last '/'); a LinearCache
//     matches names exactly. A namespaced deltaCache keeps, per
//     namespace, the names in it; a newly subscribed namespace is answered
//     at once, even when empty, so that Envoy's route config finishes
//     initializing.
//
// Updating the client's known-versions map in place departs from
// go-control-plane's rule that a cache must not alter it; it is safe with
// its delta server, which reads and writes that map only on the stream's
// goroutine after cancelling the stream's watch of the type (cancel takes
// the lock a deltaCache is used under, gatewayCache.mu) or after receiving
// the response that carries the map; and the map the server sets back
// after a response is the same map. Two keys of the map are the cache's
// own: seqKey, the update the stream's view reflects; and, in a namespaced
// cache, each answered namespace (its name, with nsAnswered).
//
// A deltaCache has no lock of its own: gatewayCache.mu guards it.
type deltaCache struct {
	typeURL    string
	namespaced bool
	// version is the system version of responses: the Gateway's version.
	version string
	seq     uint64
	res     map[string]*deltaResource
	// members are the names in each namespace (namespaced caches only).
	members map[string]map[string]struct{}
	// wildcard are the watches of every resource; broad those of more
	// than maxIndexed names, which an update checks by subscription
	// (indexing them would cost each ACK its stream's every name); byKey
	// the others by subscribed name (namespace, in a namespaced cache).
	wildcard, broad map[*deltaWatch]struct{}
	byKey           map[string]map[*deltaWatch]struct{}
	// log are the names changed by the latest updates, oldest first.
	log     []deltaChange
	logSize int
	// fullCompares counts the watches compared in full (for tests).
	fullCompares int
}

type deltaResource struct {
	version string
	res     types.Resource
	any     *anypb.Any // encoded on first use
}

type deltaChange struct {
	seq   uint64
	names []string
}

type deltaWatch struct {
	req *cachev3.DeltaRequest
	sub cachev3.Subscription
	ch  chan cachev3.DeltaResponse
}

// Bounds of the log of recent updates: a stream whose last response is
// older than what the log holds is compared in full.
const (
	maxLogUpdates = 256
	maxLogNames   = 16384
	// maxIndexed is the most names of a watch indexed by name.
	maxIndexed = 32
)

const (
	seqKey     = "\x00seq"
	nsAnswered = "\x00ns"
)

func newDeltaCache(typeURL string, namespaced bool) *deltaCache {
	d := &deltaCache{
		typeURL: typeURL, namespaced: namespaced,
		res:      map[string]*deltaResource{},
		wildcard: map[*deltaWatch]struct{}{},
		broad:    map[*deltaWatch]struct{}{},
		byKey:    map[string]map[*deltaWatch]struct{}{},
	}
	if namespaced {
		d.members = map[string]map[string]struct{}{}
	}
	return d
}

// key is what a watch subscribes to for the resource name: the name, or
// its namespace.
func (d *deltaCache) key(name string) string {
	if !d.namespaced {
		return name
	}
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		return name[:i]
	}
	return ""
}

// update applies a change: changed resources (by name, with their
// versions) and removed names; and answers the watches it concerns.
func (d *deltaCache) update(version string, changed map[string]versioned, removed []string) {
	d.version = version
	if len(changed) == 0 && len(removed) == 0 {
		return
	}
	d.seq++
	names := make([]string, 0, len(changed)+len(removed))
	for name, v := range changed {
		if old, ok := d.res[name]; ok && old.version == v.version {
			continue
		}
		d.res[name] = &deltaResource{version: v.version, res: v.res}
		if d.namespaced {
			k := d.key(name)
			if d.members[k] == nil {
				d.members[k] = map[string]struct{}{}
			}
			d.members[k][name] = struct{}{}
		}
		names = append(names, name)
	}
	for _, name := range removed {
		if _, ok := d.res[name]; !ok {
			continue
		}
		delete(d.res, name)
		if d.namespaced {
			k := d.key(name)
			delete(d.members[k], name)
			if len(d.members[k]) == 0 {
				delete(d.members, k)
			}
		}
		names = append(names, name)
	}
	d.record(names)
	if len(names) == 0 {
		return
	}
	affected := make(map[*deltaWatch]struct{}, len(d.wildcard)+len(d.broad))
	for w := range d.wildcard {
		affected[w] = struct{}{}
	}
	for w := range d.broad {
		affected[w] = struct{}{}
	}
	for _, name := range names {
		for w := range d.byKey[d.key(name)] {
			affected[w] = struct{}{}
		}
	}
	for w := range affected {
		if d.answer(w, names, false) {
			d.unregister(w)
		}
	}
}

type versioned struct {
	version string
	res     types.Resource
}

// record appends the names of update d.seq to the log, dropping the
// oldest updates beyond its bounds.
func (d *deltaCache) record(names []string) {
	d.log = append(d.log, deltaChange{seq: d.seq, names: names})
	d.logSize += len(names)
	for len(d.log) > maxLogUpdates || (d.logSize > maxLogNames && len(d.log) > 1) {
		d.logSize -= len(d.log[0].names)
		d.log[0] = deltaChange{}
		d.log = d.log[1:]
	}
}

// since returns the names changed after update seq, or false when the log
// no longer holds all of them.
func (d *deltaCache) since(seq uint64) ([]string, bool) {
	if seq == d.seq {
		return nil, true
	}
	if seq > d.seq || len(d.log) == 0 || d.log[0].seq > seq+1 {
		return nil, false
	}
	var out []string
	for _, c := range d.log {
		if c.seq > seq {
			out = append(out, c.names...)
		}
	}
	return out, true
}

// watch opens a watch for a request of a stream whose subscription is sub:
// it is answered at once when the stream lacks something, else when an
// update concerns it. It returns the cancel function, nil when answered.
func (d *deltaCache) watch(req *cachev3.DeltaRequest, sub cachev3.Subscription, ch chan cachev3.DeltaResponse) func() {
	w := &deltaWatch{req: req, sub: sub, ch: ch}
	known := sub.ReturnedResources()
	var names []string
	full := true
	if s, err := strconv.ParseUint(known[seqKey], 10, 64); err == nil && known[seqKey] != "" {
		var complete bool
		names, complete = d.since(s)
		full = !complete
	}
	// Names the request (un)subscribes are looked at in any case.
	names = append(names, req.GetResourceNamesSubscribe()...)
	names = append(names, req.GetResourceNamesUnsubscribe()...)
	// Envoy expects an answer to the first request of a wildcard
	// subscription to finish initializing, even an empty one.
	mustAnswer := sub.IsWildcard() && req.GetResponseNonce() == ""
	if full {
		d.fullCompares++
		names = d.allNames(w)
	}
	if d.answer(w, names, mustAnswer) {
		return nil
	}
	d.register(w)
	return func() { d.unregister(w) }
}

// allNames are the names a full comparison of w looks at: every resource
// it may be interested in, and every name it knows.
func (d *deltaCache) allNames(w *deltaWatch) []string {
	known := w.sub.ReturnedResources()
	var out []string
	if w.sub.IsWildcard() {
		out = make([]string, 0, len(d.res)+len(known))
		for name := range d.res {
			out = append(out, name)
		}
	} else {
		for k := range w.sub.SubscribedResources() {
			if d.namespaced {
				for name := range d.members[k] {
					out = append(out, name)
				}
				out = append(out, k)
			} else {
				out = append(out, k)
			}
		}
	}
	for name := range known {
		out = append(out, name)
	}
	return out
}

// interested reports whether w's subscription covers the resource name.
func (d *deltaCache) interested(w *deltaWatch, name string) bool {
	if w.sub.IsWildcard() {
		return true
	}
	_, ok := w.sub.SubscribedResources()[d.key(name)]
	return ok
}

// answer compares what w's stream knows of names with the cache, updates
// its known versions and sends a response when something differs (or
// when must). It reports whether it sent one.
func (d *deltaCache) answer(w *deltaWatch, names []string, must bool) bool {
	known := w.sub.ReturnedResources()
	var send []string
	var removed []string
	seen := make(map[string]struct{}, len(names))
	for _, name := range names {
		if _, dup := seen[name]; dup || name == seqKey {
			continue
		}
		seen[name] = struct{}{}
		if d.namespaced {
			if _, sub := w.sub.SubscribedResources()[name]; sub && known[name] != nsAnswered {
				// A namespace the stream has not been answered for: all
				// of it, at once, even empty.
				for m := range d.members[name] {
					if _, dup := seen[m]; !dup {
						seen[m] = struct{}{}
						send = append(send, m)
					}
				}
				known[name] = nsAnswered
				must = true
				continue
			}
			if known[name] == nsAnswered {
				if _, sub := w.sub.SubscribedResources()[name]; !sub {
					delete(known, name)
				}
				continue
			}
		}
		r, exists := d.res[name]
		v, isKnown := known[name]
		switch {
		case !d.interested(w, name):
			// Unsubscribed: forgotten, so that it is sent again if
			// subscribed again.
			if isKnown {
				delete(known, name)
			}
		case exists && (!isKnown || v != r.version):
			send = append(send, name)
		case !exists && isKnown:
			removed = append(removed, name)
		}
	}
	known[seqKey] = strconv.FormatUint(d.seq, 10)
	if len(send) == 0 && len(removed) == 0 && !must {
		return false
	}
	out := &discoveryv3.DeltaDiscoveryResponse{
		SystemVersionInfo: d.version,
		TypeUrl:           d.typeURL,
		RemovedResources:  removed,
		Resources:         make([]*discoveryv3.Resource, 0, len(send)),
	}
	for _, name := range send {
		r := d.res[name]
		a, err := d.encoded(r)
		if err != nil {
			// Not encodable (never for translated resources): left
			// out, so that the stream asks again rather than hangs.
			delete(known, name)
			continue
		}
		out.Resources = append(out.Resources, &discoveryv3.Resource{Name: name, Version: r.version, Resource: a})
		known[name] = r.version
	}
	for _, name := range removed {
		delete(known, name)
	}
	w.ch <- &cachev3.DeltaPassthroughResponse{DeltaRequest: w.req, NextVersionMap: known, DeltaDiscoveryResponse: out}
	return true
}

func (d *deltaCache) encoded(r *deltaResource) (*anypb.Any, error) {
	if r.any == nil {
		b, err := cachev3.MarshalResource(r.res)
		if err != nil {
			return nil, err
		}
		r.any = &anypb.Any{TypeUrl: d.typeURL, Value: b}
	}
	return r.any, nil
}

func (d *deltaCache) register(w *deltaWatch) {
	switch {
	case w.sub.IsWildcard():
		d.wildcard[w] = struct{}{}
		return
	case len(w.sub.SubscribedResources()) > maxIndexed:
		d.broad[w] = struct{}{}
		return
	}
	for k := range w.sub.SubscribedResources() {
		if d.byKey[k] == nil {
			d.byKey[k] = map[*deltaWatch]struct{}{}
		}
		d.byKey[k][w] = struct{}{}
	}
}

func (d *deltaCache) unregister(w *deltaWatch) {
	if _, ok := d.wildcard[w]; ok {
		delete(d.wildcard, w)
		return
	}
	if _, ok := d.broad[w]; ok {
		delete(d.broad, w)
		return
	}
	for k := range w.sub.SubscribedResources() {
		if m := d.byKey[k]; m != nil {
			delete(m, w)
			if len(m) == 0 {
				delete(d.byKey, k)
			}
		}
	}
}

// watches is the number of open watches.
func (d *deltaCache) watches() int {
	seen := map[*deltaWatch]struct{}{}
	for _, m := range d.byKey {
		for w := range m {
			seen[w] = struct{}{}
		}
	}
	return len(d.wildcard) + len(d.broad) + len(seen)
}
