// Package status writes the statuses the translator computes to the API
// server, decoupled from translation.
//
// The translation loop calls Publish, which records the latest desired status
// per object and enqueues the keys that changed; it never waits on the API
// server, and its cost grows with the number of changed statuses, not with
// the number of objects: the published gatewayapi.StatusSet shares what the
// translator carried over from its previous result, and
// gatewayapi.DiffStatuses skips what two sets share.
// Workers take keys from a workqueue (one entry per object, so memory is
// bounded by the number of objects and intermediate states coalesce),
// compare with the informer cache and skip no-op writes. A route's status
// (status.parents, shared with other controllers) is updated with
// optimistic concurrency, reading the live object only after a conflict; the
// statuses Portico owns wholly (GatewayClass, Gateway, ListenerSet) are
// merge-patched without a resourceVersion precondition, so that writers of
// a shared Gateway's spec cannot starve them.
//
// Writes of one object are at least Config.WriteInterval apart: the first
// change after a quiet interval is written at once, later ones wait for the
// end of the interval and coalesce. A Gateway whose attachedRoutes changes
// with every new route is so written about once per interval during a
// burst of creations, and a fight with another writer over one object costs
// at most one write per interval. Retries after a failed write do not wait
// for the interval (they back off exponentially).
//
// Only the leader writes; followers keep the desired statuses current so
// that a new leader writes every pending status at once. A route that no
// longer has a status of ours (deleted, or no longer naming our Gateways)
// keeps a removal entry until the leader removed our parents from it, or,
// on a follower, until the informer cache shows nothing of ours on it.
//
// The translator never reads status, so it cannot know of entries of ours
// left on a route that no longer names our parents while no replica ran
// (or written there by an older replica). The writer finds them: at the
// start of every term, once a first set was published, a sweep lists the
// routes of the informer cache and gives a removal entry to each that
// holds entries of ours but has no desired status; and Observe does the
// same for a route whose status changed on the server.
package status

import (
	"context"
	"fmt"
	"github.com/portico-dev/portico/internal/resource"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
)

// Defaults of Config.
const (
	DefaultWorkers       = 8
	DefaultWriteInterval = time.Second
)

// Config configures a Writer.
type Config struct {
	// Client writes status subresources and reads live objects. Its rate
	// limiter bounds the writer's load on the API server.
	Client client.Client
	// Reader, when set, is the informer cache: the first attempt for an
	// object compares with (and writes on top of) the cached object, which
	// costs no request when nothing changed; a retry after a conflict or
	// error reads the live object through Client.
	Reader         client.Reader
	ControllerName string
	// Workers is the number of concurrent writes (default DefaultWorkers).
	Workers int
	// WriteInterval is the shortest time between two writes of the same
	// object (default DefaultWriteInterval; negative: no limit).
	WriteInterval time.Duration
	// WriteTimeout bounds one API call, so a hung API server costs a retry,
	// not a stuck worker. Default 10s.
	WriteTimeout time.Duration
	// BaseDelay and MaxDelay bound the exponential backoff of retries.
	BaseDelay, MaxDelay time.Duration
	Metrics             *Metrics
	Log                 *slog.Logger
	// Clock gives lastTransitionTime for conditions whose status changed.
	Clock func() time.Time
}

// Writer is the asynchronous status writer. Publish, Observe and SetLeading
// are safe for concurrent use and never block on the API server.
type Writer struct {
	cfg   Config
	queue workqueue.TypedRateLimitingInterface[string]
	clock clock.Clock // of the write interval (and of the queue's delays)

	mu      sync.Mutex
	desired map[string]*entry
	// published is the argument of the last Publish: every object of
	// desired has a status in it, or is a route's removal entry.
	published gatewayapi.StatusSet
	// leadCtx is the context of the current term; nil when not leading. It
	// is cancelled when leadership is lost, which aborts in-flight writes.
	leadCtx context.Context
	// publishedOnce: Publish was called; sweepWanted: a term started
	// before, and its sweep waits for the first Publish.
	publishedOnce, sweepWanted bool
	// extra are the Gateway conditions of other sources, by key, and
	// extraTypes the types they manage (extra.go).
	extra      map[string][]metav1.Condition
	extraTypes []string
	// routeExtra are the route conditions of other sources, by key, once
	// routeExtraSet, and routeExtraTypes the types they manage.
	routeExtra      map[string][]RouteParentCondition
	routeExtraSet   bool
	routeExtraTypes []string
}

// sweepKey is the queue item of a sweep for stale entries of ours; it
// cannot be an object's key.
const sweepKey = "\x00sweep"

// entry is the desired status of one object, guarded by Writer.mu. A route
// entry with a nil status.Route asks for our parents to be removed.
type entry struct {
	status gatewayapi.Status
	// version counts the changes of status.
	version uint64
	// written is when a write of the object was last issued (zero: never).
	written time.Time
	// busy: a worker is checking or writing the object; again: it changed
	// meanwhile, and is enqueued when the worker is done.
	busy, again bool
}

// removal reports whether e asks for our parents to be removed from a route.
func (e *entry) removal() bool { return isRemoval(&e.status) }

func isRemoval(s *gatewayapi.Status) bool {
	return (isRoute(s.Kind) && s.Route == nil) || (s.Kind == resource.KindBackendTLSPolicy && s.Policy == nil)
}

func isRoute(kind resource.Kind) bool { return kind.IsRoute() }

// isShared reports whether objects of kind have a status shared with other
// controllers, entry by entry: routes (status.parents) and
// BackendTLSPolicies (status.ancestors). Ours are removed from them
// (removal entries) rather than forgotten.
func isShared(kind resource.Kind) bool {
	return kind.IsRoute() || kind == resource.KindBackendTLSPolicy
}

// sharedKinds are the kinds isShared holds, as the sweep lists them.
var sharedKinds = append(slices.Clone(resource.RouteKinds), resource.KindBackendTLSPolicy)

// New returns a Writer; Run starts its workers.
func New(cfg Config) *Writer { return newWriter(cfg, clock.RealClock{}) }

func newWriter(cfg Config, clk clock.WithTicker) *Writer {
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.WriteInterval == 0 {
		cfg.WriteInterval = DefaultWriteInterval
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.BaseDelay <= 0 {
		cfg.BaseDelay = 50 * time.Millisecond
	}
	if cfg.MaxDelay <= 0 {
		cfg.MaxDelay = 30 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	rl := workqueue.NewTypedItemExponentialFailureRateLimiter[string](cfg.BaseDelay, cfg.MaxDelay)
	return &Writer{
		cfg:   cfg,
		clock: clk,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[string]{
			Name: "status", Clock: clk,
		}),
		desired: map[string]*entry{},
	}
}

// Publish records the desired statuses of one translation. Objects whose
// desired status changed are enqueued. A route that had a desired status and
// has none now is enqueued to remove our entries from its status.parents.
// Other kinds that disappear are forgotten (their objects were deleted or
// are no longer ours).
//
// The changes since the previous call are found with
// gatewayapi.DiffStatuses: the parts of the set shared with the previous
// one (what an incremental translation carried over) are not looked at, so
// the cost is that of the changes. A status that changed only its pointers
// is compared with the desired one and enqueued
// only if it differs.
func (w *Writer) Publish(statuses gatewayapi.StatusSet) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for old, cur := range gatewayapi.DiffStatuses(w.published, statuses) {
		if cur == nil {
			w.remove(old.Key())
		} else {
			w.set(cur)
		}
	}
	w.published = statuses
	w.publishedOnce = true
	if w.sweepWanted {
		w.sweepWanted = false
		w.queue.Add(sweepKey)
	}
	w.cfg.Metrics.QueueDepth.Set(float64(w.queue.Len()))
}

// set makes s the desired status of its object, enqueuing it if that
// changes anything but condition times.
func (w *Writer) set(s *gatewayapi.Status) {
	k := s.Key()
	e := w.desired[k]
	if e == nil {
		e = &entry{}
		w.desired[k] = e
	} else if sameDesired(&e.status, s) {
		e.status = *s
		return
	}
	e.status = *s
	e.version++
	w.enqueue(k, e)
}

// remove handles an object whose status is no longer published: a route
// gets a removal entry, other kinds are forgotten.
func (w *Writer) remove(k string) {
	e := w.desired[k]
	switch {
	case e == nil || e.removal():
	case isShared(e.status.Kind):
		e.status.Route, e.status.Policy = nil, nil
		e.version++
		w.enqueue(k, e)
	default:
		delete(w.desired, k)
	}
}

// enqueue queues k, at once unless a write of it was issued less than
// WriteInterval ago: then at the end of the interval.
func (w *Writer) enqueue(k string, e *entry) {
	if e.busy {
		// Decided when the worker is done: it may issue a write now.
		e.again = true
		return
	}
	if iv := w.cfg.WriteInterval; iv > 0 && !e.written.IsZero() {
		if d := e.written.Add(iv).Sub(w.clock.Now()); d > 0 {
			w.queue.AddAfter(k, d)
			return
		}
	}
	w.queue.Add(k)
}

// sameContent reports whether two statuses of the same object share their
// content: the translator carried the status over unchanged.
func sameContent(a, b *gatewayapi.Status) bool {
	return a.Generation == b.Generation && a.GatewayClass == b.GatewayClass && a.Gateway == b.Gateway &&
		a.ListenerSet == b.ListenerSet && a.Route == b.Route && a.Policy == b.Policy
}

// sameDesired compares two desired statuses (which carry no condition
// times: the writer stamps them).
func sameDesired(a, b *gatewayapi.Status) bool {
	if a.Generation != b.Generation || a.Kind != b.Kind {
		return false
	}
	return sameContent(a, b) || reflect.DeepEqual(a, b)
}

// Observe tells the writer that an object's status changed on the server
// (an informer event). If the object has a desired status it is re-checked,
// so a status edited by someone else is corrected (drift self-heals).
func (w *Writer) Observe(kind resource.Kind, key types.NamespacedName) {
	k := (&gatewayapi.Status{Kind: kind, Namespace: key.Namespace, Name: key.Name}).Key()
	w.mu.Lock()
	defer w.mu.Unlock()
	// Our own writes come back here too: re-checked after the interval,
	// they cost no request (the cache holds what we wrote).
	if e, ok := w.desired[k]; ok {
		w.enqueue(k, e)
		return
	}
	// A route without a desired status may hold entries of ours: a
	// removal entry checks it (without a write when it holds none).
	if isShared(kind) && w.publishedOnce {
		w.addRemoval(&gatewayapi.Status{Kind: kind, Namespace: key.Namespace, Name: key.Name})
	}
}

// addRemoval gives a route without a desired status a removal entry, and
// enqueues it. Called with w.mu held.
func (w *Writer) addRemoval(s *gatewayapi.Status) {
	k := s.Key()
	if _, ok := w.desired[k]; ok {
		return
	}
	e := &entry{status: gatewayapi.Status{Kind: s.Kind, Namespace: s.Namespace, Name: s.Name}, version: 1}
	w.desired[k] = e
	w.enqueue(k, e)
}

// sweep gives a removal entry to every route of the informer cache that
// holds entries of ours and has no desired status.
func (w *Writer) sweep(ctx context.Context) {
	if w.cfg.Reader == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, w.cfg.WriteTimeout)
	defer cancel()
	controller := gwv1.GatewayController(w.cfg.ControllerName)
	var stale []gatewayapi.Status
	for _, kind := range sharedKinds {
		list, err := newList(kind)
		if err != nil {
			continue
		}
		if err := w.cfg.Reader.List(ctx, list); err != nil {
			w.cfg.Log.Warn("status sweep: list failed", "kind", kind, "err", err)
			continue
		}
		_ = apimeta.EachListItem(list, func(o runtime.Object) error {
			if obj, ok := o.(client.Object); ok && hasOurParents(obj, controller) {
				stale = append(stale, gatewayapi.Status{Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName()})
			}
			return nil
		})
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range stale {
		w.addRemoval(&stale[i])
	}
}

// SetLeading starts (ctx non-nil) or ends (ctx nil) a term of leadership.
// Writes happen only while leading and are aborted when ctx is cancelled. At
// the start of a term every desired status is enqueued, GatewayClasses,
// Gateways and ListenerSets before routes: the new leader compares each
// with the live object and writes the differences.
func (w *Writer) SetLeading(ctx context.Context) {
	w.mu.Lock()
	w.leadCtx = ctx
	var keys []string
	if ctx != nil {
		if w.publishedOnce {
			keys = append(keys, sweepKey)
		} else {
			w.sweepWanted = true
		}
		keys = make([]string, 0, len(w.desired))
		var routes []string
		for k, e := range w.desired {
			if isShared(e.status.Kind) {
				routes = append(routes, k)
			} else {
				keys = append(keys, k)
			}
		}
		keys = append(keys, routes...)
	}
	w.mu.Unlock()
	for _, k := range keys {
		w.queue.Add(k)
	}
	w.cfg.Metrics.QueueDepth.Set(float64(w.queue.Len()))
}

// SetReader sets Config.Reader (the informer cache, created after the
// writer); call it before Run.
func (w *Writer) SetReader(r client.Reader) { w.cfg.Reader = r }

// Pending is the number of objects ready to be checked or written; objects
// waiting for the end of their write interval are not counted.
func (w *Writer) Pending() int { return w.queue.Len() }

// Run runs the workers until ctx is done.
func (w *Writer) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range w.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w.processNext() {
			}
		}()
	}
	<-ctx.Done()
	w.queue.ShutDownWithDrain()
	wg.Wait()
	// ShutDownWithDrain leaves the queue's loop of delayed keys running.
	w.queue.ShutDown()
}

func (w *Writer) processNext() bool {
	key, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(key)
	defer func() { w.cfg.Metrics.QueueDepth.Set(float64(w.queue.Len())) }()
	if key == sweepKey {
		w.queue.Forget(key)
		w.mu.Lock()
		lead := w.leadCtx
		w.mu.Unlock()
		if lead != nil && lead.Err() == nil {
			w.sweep(lead)
		}
		return true
	}

	w.mu.Lock()
	e := w.desired[key]
	lead := w.leadCtx
	var st gatewayapi.Status
	var version uint64
	if e != nil {
		st, version = e.status, e.version
		e.busy = true
	}
	w.mu.Unlock()
	if e == nil {
		w.queue.Forget(key)
		return true
	}
	defer w.done(key, e)
	if lead == nil || lead.Err() != nil {
		// Not leading: a new term re-enqueues every key.
		w.queue.Forget(key)
		if isRemoval(&st) {
			w.settleRemoval(key, e, &st, version)
		}
		return true
	}
	err := w.write(lead, e, &st, w.queue.NumRequeues(key) == 0)
	switch {
	case err == nil, apierrors.IsNotFound(err):
		w.queue.Forget(key)
		if isRemoval(&st) {
			w.drop(key, e, version) // nothing of ours is left on it
		}
	case lead.Err() != nil:
		// Leadership ended during the write; the next leader owns it.
		w.queue.Forget(key)
	case apierrors.IsConflict(err):
		// Someone else wrote first: re-read and retry promptly.
		w.cfg.Metrics.Writes.WithLabelValues(st.Kind.String(), ResultConflict).Inc()
		w.queue.AddRateLimited(key)
	default:
		w.cfg.Metrics.Writes.WithLabelValues(st.Kind.String(), ResultError).Inc()
		w.cfg.Log.Warn("status write failed, will retry", "object", key, "err", err,
			"retries", w.queue.NumRequeues(key))
		w.queue.AddRateLimited(key)
	}
	return true
}

// done ends a worker's turn on e, enqueuing it if it changed meanwhile.
func (w *Writer) done(key string, e *entry) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e.busy = false
	if e.again {
		e.again = false
		if w.desired[key] == e {
			w.enqueue(key, e)
		}
	}
}

// drop forgets the removal entry e of key unless it changed since version.
func (w *Writer) drop(key string, e *entry, version uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.desired[key] == e && e.version == version {
		delete(w.desired, key)
	}
}

// settleRemoval, on a follower, forgets a removal entry once the informer
// cache shows the route gone or without parents of ours: no leader will
// have anything to remove. Otherwise the entry waits for a term, or for the
// informer event of the leader's write (Observe).
func (w *Writer) settleRemoval(key string, e *entry, s *gatewayapi.Status, version uint64) {
	if w.cfg.Reader == nil {
		return
	}
	obj, err := newObject(s.Kind)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.WriteTimeout)
	defer cancel()
	err = w.cfg.Reader.Get(ctx, types.NamespacedName{Namespace: s.Namespace, Name: s.Name}, obj)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return
	case hasOurParents(obj, gwv1.GatewayController(w.cfg.ControllerName)):
		return
	}
	w.drop(key, e, version)
}

// hasOurParents reports whether a route's (or a policy's) status has
// entries of controller.
func hasOurParents(obj client.Object, controller gwv1.GatewayController) bool {
	if p, ok := obj.(*gwv1.BackendTLSPolicy); ok {
		for i := range p.Status.Ancestors {
			if p.Status.Ancestors[i].ControllerName == controller {
				return true
			}
		}
		return false
	}
	var parents []gwv1.RouteParentStatus
	if rs := routeStatusOf(obj); rs != nil {
		parents = rs.Parents
	}
	for i := range parents {
		if parents[i].ControllerName == controller {
			return true
		}
	}
	return false
}

// write compares the desired status s of entry e with the object (cached
// or live), merges, and updates its status unless that changes nothing.
func (w *Writer) write(ctx context.Context, e *entry, s *gatewayapi.Status, fromCache bool) error {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.WriteTimeout)
	defer cancel()
	obj, err := newObject(s.Kind)
	if err != nil {
		return err
	}
	nn := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	if fromCache && w.cfg.Reader != nil {
		if err := w.cfg.Reader.Get(ctx, nn, obj); err != nil {
			return err
		}
		// The cache shares its objects: never modify one.
		obj = obj.DeepCopyObject().(client.Object)
	} else if err := w.cfg.Client.Get(ctx, nn, obj); err != nil {
		return err
	}
	now := metav1.NewTime(w.cfg.Clock().Truncate(time.Second))
	var orig client.Object
	if !isShared(s.Kind) {
		orig = obj.DeepCopyObject().(client.Object)
	}
	if gw, ok := obj.(*gwv1.Gateway); ok && s.Gateway != nil {
		w.mu.Lock()
		with := *s
		with.Gateway = w.withExtra(s.Key(), s.Gateway, s.Generation, &gw.Status)
		w.mu.Unlock()
		s = &with
	}
	if s.Route != nil {
		w.mu.Lock()
		with := *s
		with.Route = w.withRouteExtra(s.Key(), s.Namespace, s.Route, s.Generation, routeStatusOf(obj))
		w.mu.Unlock()
		s = &with
	}
	if !applyDesired(obj, s, gwv1.GatewayController(w.cfg.ControllerName), now) {
		w.cfg.Metrics.Writes.WithLabelValues(s.Kind.String(), ResultSkipped).Inc()
		return nil
	}
	// A change published meanwhile waits for the interval (see done).
	w.mu.Lock()
	e.written = w.clock.Now()
	w.mu.Unlock()
	if err := w.update(ctx, obj, orig); err != nil {
		return err
	}
	w.cfg.Metrics.Writes.WithLabelValues(s.Kind.String(), ResultWritten).Inc()
	w.cfg.Log.Debug("status written", "object", s.Key(), "resourceVersion", obj.GetResourceVersion())
	return nil
}

// update writes obj's status. A route's status.parents is an atomic list
// shared with other controllers: the update carries the resourceVersion we
// read, so a concurrent write makes it fail with a conflict (and we merge
// again) instead of being overwritten. The status of a GatewayClass, Gateway
// or ListenerSet is wholly its controller's: it is written as a merge patch
// of what changed since orig, without a resourceVersion precondition, so
// that clients applying the object's spec (many tools sharing one Gateway)
// cannot make it lose every race. The patch replaces the lists it names
// (conditions, listeners, addresses) as a whole and nulls removed fields.
func (w *Writer) update(ctx context.Context, obj, orig client.Object) error {
	if orig == nil {
		return w.cfg.Client.Status().Update(ctx, obj)
	}
	return w.cfg.Client.Status().Patch(ctx, obj, client.MergeFrom(orig))
}

func newList(kind resource.Kind) (client.ObjectList, error) {
	if d := resource.KindOf(kind); d != nil && d.HasStatus {
		if list, ok := d.NewList().(client.ObjectList); ok {
			return list, nil
		}
	}
	return nil, fmt.Errorf("status: no list of kind %q", kind)
}

func newObject(kind resource.Kind) (client.Object, error) {
	if d := resource.KindOf(kind); d != nil && d.HasStatus {
		return d.New(), nil
	}
	return nil, fmt.Errorf("status: unknown kind %q", kind)
}

// applyDesired merges the desired status into obj and reports whether obj's
// status changed.
func applyDesired(obj client.Object, s *gatewayapi.Status, controller gwv1.GatewayController, now metav1.Time) bool {
	switch o := obj.(type) {
	case *gwv1.GatewayClass:
		if s.GatewayClass == nil {
			return false
		}
		next := mergeGatewayClass(o.Status, s.GatewayClass, now)
		return replace(&o.Status, next)
	case *gwv1.Gateway:
		if s.Gateway == nil {
			return false
		}
		next := mergeGateway(o.Status, s.Gateway, now)
		return replace(&o.Status, next)
	case *gwv1.ListenerSet:
		if s.ListenerSet == nil {
			return false
		}
		next := mergeListenerSet(o.Status, s.ListenerSet, now)
		return replace(&o.Status, next)
	case *gwv1.BackendTLSPolicy:
		return replace(&o.Status, mergePolicy(o.Status, s.Policy, controller, now))
	}
	if rs := routeStatusOf(obj); rs != nil {
		return replace(rs, mergeRoute(*rs, s.Route, controller, now))
	}
	return false
}

// routeStatusOf returns the status of a route object, or nil for another
// kind.
func routeStatusOf(obj client.Object) *gwv1.RouteStatus {
	if _, v, ok := resource.RouteOf(obj); ok {
		return v.Status
	}
	return nil
}

// replace sets *dst to next if they differ semantically and reports whether
// it did.
func replace[T any](dst *T, next T) bool {
	if equality.Semantic.DeepEqual(*dst, next) {
		return false
	}
	*dst = next
	return true
}
