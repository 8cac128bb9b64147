// Package status writes the statuses the translator computes to the API
// server, decoupled from translation.
//
// The translation loop calls Publish, which records the latest desired status
// per object and enqueues the keys that changed; it never waits on the API
// server. Workers take keys from a workqueue (one entry per object, so memory
// is bounded by the number of objects and intermediate states coalesce), read
// the live object, merge, skip no-op writes and update the status subresource
// with optimistic concurrency. Only the leader writes; followers keep the
// desired statuses current so that a new leader writes every pending status at
// once.
package status

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/gatewayapi"
)

// Config configures a Writer.
type Config struct {
	// Client writes status subresources and reads live objects.
	Client client.Client
	// Reader, when set, is the informer cache: the first attempt for an
	// object compares with (and writes on top of) the cached object, which
	// costs no request when nothing changed; a retry after a conflict or
	// error reads the live object through Client.
	Reader         client.Reader
	ControllerName string
	Workers        int
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

	mu      sync.Mutex
	desired map[string]*entry
	// leadCtx is the context of the current term; nil when not leading. It
	// is cancelled when leadership is lost, which aborts in-flight writes.
	leadCtx context.Context
}

// entry is the desired status of one object. A route entry with a nil
// status.Route asks for our parents to be removed.
type entry struct {
	status gatewayapi.Status
}

// New returns a Writer; Run starts its workers.
func New(cfg Config) *Writer {
	if cfg.Workers <= 0 {
		cfg.Workers = 4
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
		cfg:     cfg,
		queue:   workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[string]{Name: "status"}),
		desired: map[string]*entry{},
	}
}

// Publish records the desired statuses of one translation. Objects whose
// desired status changed are enqueued. A route that had a desired status and
// has none now is enqueued to remove our entries from its status.parents.
// Other kinds that disappear are forgotten (their objects were deleted or
// are no longer ours).
func (w *Writer) Publish(statuses []gatewayapi.Status) {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := make(map[string]struct{}, len(statuses))
	for i := range statuses {
		s := statuses[i]
		k := s.Key()
		seen[k] = struct{}{}
		if old, ok := w.desired[k]; ok && sameDesired(&old.status, &s) {
			continue
		}
		w.desired[k] = &entry{status: s}
		w.queue.Add(k)
	}
	for k, e := range w.desired {
		if _, ok := seen[k]; ok {
			continue
		}
		isRoute := e.status.Kind == gatewayapi.KindHTTPRoute || e.status.Kind == gatewayapi.KindGRPCRoute
		if isRoute && e.status.Route != nil {
			e2 := &entry{status: e.status}
			e2.status.Route = nil
			w.desired[k] = e2
			w.queue.Add(k)
			continue
		}
		delete(w.desired, k)
	}
	w.cfg.Metrics.QueueDepth.Set(float64(w.queue.Len()))
}

// sameDesired compares two desired statuses ignoring condition transition
// times, which the translator stamps with its own clock.
func sameDesired(a, b *gatewayapi.Status) bool {
	if a.Generation != b.Generation || a.Kind != b.Kind {
		return false
	}
	return reflect.DeepEqual(stripTimes(a), stripTimes(b))
}

// Observe tells the writer that an object's status changed on the server
// (an informer event). If the object has a desired status it is re-checked,
// so a status edited by someone else is corrected (drift self-heals).
func (w *Writer) Observe(kind string, key types.NamespacedName) {
	k := (&gatewayapi.Status{Kind: kind, Namespace: key.Namespace, Name: key.Name}).Key()
	w.mu.Lock()
	_, ok := w.desired[k]
	w.mu.Unlock()
	if ok {
		w.queue.Add(k)
	}
}

// SetLeading starts (ctx non-nil) or ends (ctx nil) a term of leadership.
// Writes happen only while leading and are aborted when ctx is cancelled. At
// the start of a term every desired status is enqueued: the new leader
// compares each with the live object and writes the differences.
func (w *Writer) SetLeading(ctx context.Context) {
	w.mu.Lock()
	w.leadCtx = ctx
	var keys []string
	if ctx != nil {
		keys = make([]string, 0, len(w.desired))
		for k := range w.desired {
			keys = append(keys, k)
		}
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

// Pending is the number of objects waiting to be checked or written.
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
}

func (w *Writer) processNext() bool {
	key, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(key)
	defer func() { w.cfg.Metrics.QueueDepth.Set(float64(w.queue.Len())) }()

	w.mu.Lock()
	e := w.desired[key]
	lead := w.leadCtx
	w.mu.Unlock()
	if e == nil || lead == nil || lead.Err() != nil {
		// Nothing to write, or not leading: a new term re-enqueues every key.
		w.queue.Forget(key)
		return true
	}
	err := w.write(lead, e, w.queue.NumRequeues(key) == 0)
	switch {
	case err == nil:
		w.queue.Forget(key)
	case lead.Err() != nil:
		// Leadership ended during the write; the next leader owns it.
		w.queue.Forget(key)
	case apierrors.IsNotFound(err):
		w.queue.Forget(key)
	case apierrors.IsConflict(err):
		// Someone else wrote first: re-read and retry promptly.
		w.cfg.Metrics.Writes.WithLabelValues(e.status.Kind, ResultConflict).Inc()
		w.queue.AddRateLimited(key)
	default:
		w.cfg.Metrics.Writes.WithLabelValues(e.status.Kind, ResultError).Inc()
		w.cfg.Log.Warn("status write failed, will retry", "object", key, "err", err,
			"retries", w.queue.NumRequeues(key))
		w.queue.AddRateLimited(key)
	}
	return true
}

// write reads the live object, merges, and updates its status unless that
// changes nothing.
func (w *Writer) write(ctx context.Context, e *entry, fromCache bool) error {
	ctx, cancel := context.WithTimeout(ctx, w.cfg.WriteTimeout)
	defer cancel()
	s := &e.status
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
	if !applyDesired(obj, s, gwv1.GatewayController(w.cfg.ControllerName), now) {
		w.cfg.Metrics.Writes.WithLabelValues(s.Kind, ResultSkipped).Inc()
		return nil
	}
	// Update carries the resourceVersion we read: a concurrent write makes
	// it fail with a conflict instead of being overwritten.
	if err := w.cfg.Client.Status().Update(ctx, obj); err != nil {
		return err
	}
	w.cfg.Metrics.Writes.WithLabelValues(s.Kind, ResultWritten).Inc()
	w.cfg.Log.Debug("status written", "object", s.Key(), "resourceVersion", obj.GetResourceVersion())
	return nil
}

func newObject(kind string) (client.Object, error) {
	switch kind {
	case gatewayapi.KindGatewayClass:
		return &gwv1.GatewayClass{}, nil
	case gatewayapi.KindGateway:
		return &gwv1.Gateway{}, nil
	case gatewayapi.KindListenerSet:
		return &gwv1.ListenerSet{}, nil
	case gatewayapi.KindHTTPRoute:
		return &gwv1.HTTPRoute{}, nil
	case gatewayapi.KindGRPCRoute:
		return &gwv1.GRPCRoute{}, nil
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
	case *gwv1.HTTPRoute:
		next := mergeRoute(o.Status.RouteStatus, s.Route, controller, now)
		return replace(&o.Status.RouteStatus, next)
	case *gwv1.GRPCRoute:
		next := mergeRoute(o.Status.RouteStatus, s.Route, controller, now)
		return replace(&o.Status.RouteStatus, next)
	}
	return false
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
