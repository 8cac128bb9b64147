package kube

// Watches of the objects of a ByReference kind (CA ConfigMaps): one
// informer per referenced object, selecting it by name in its namespace
// (field selector metadata.name), started when a BackendTLSPolicy or a
// Gateway's spec.tls.frontend comes to reference it and stopped when the
// last reference goes. The cluster's other ConfigMaps (most of them
// application configuration) are never listed, watched or held. The
// controller-runtime cache keeps its own ConfigMap informer for the ones
// Portico provisions (selected by label), which is not an input.
//
// The informers' stores together are the kind's store for snapshots. An
// event of one is a change of that object and always wakes the pipeline
// (it is referenced, by construction). When a watch starts, its object
// reaches a snapshot once listed (the add event); until then the
// translation sees it missing, and fails closed (a backend whose CA is
// unknown is not reached). At start-up the watches of the first
// snapshot's references are synced before the provider reports synced,
// so that a restart does not make that gap.

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// refWatcher holds the watches of one ByReference kind (ConfigMaps).
type refWatcher struct {
	cs kubernetes.Interface
	// event is called with each object an informer adds, updates or
	// deletes, and with the key of a watch stopped.
	event func(key types.NamespacedName, obj client.Object)

	mu      sync.Mutex
	ctx     context.Context // of Run; nil before
	watches map[types.NamespacedName]*refWatch
	// want is the latest set asked for, started once ctx is known.
	want map[types.NamespacedName]bool
}

type refWatch struct {
	inf  toolscache.SharedIndexInformer
	stop context.CancelFunc
}

func newRefWatcher(cs kubernetes.Interface, event func(types.NamespacedName, client.Object)) *refWatcher {
	return &refWatcher{cs: cs, event: event, watches: map[types.NamespacedName]*refWatch{}}
}

// start lets the watcher run its informers until ctx is done.
func (w *refWatcher) start(ctx context.Context) {
	w.mu.Lock()
	w.ctx = ctx
	var stopped []types.NamespacedName
	if w.want != nil {
		stopped = w.applyLocked(w.want)
	}
	w.mu.Unlock()
	w.stopped(stopped)
}

// set makes the watched objects exactly keys. It must not be called with
// a lock the event function takes.
func (w *refWatcher) set(keys map[types.NamespacedName]bool) {
	w.mu.Lock()
	w.want = keys
	var stopped []types.NamespacedName
	if w.ctx != nil {
		stopped = w.applyLocked(keys)
	}
	w.mu.Unlock()
	w.stopped(stopped)
}

// stopped reports the objects of stopped watches as changed (gone from
// the next snapshot).
func (w *refWatcher) stopped(keys []types.NamespacedName) {
	for _, k := range keys {
		w.event(k, nil)
	}
}

// applyLocked starts and stops watches so that keys are watched, and
// returns the keys of the watches it stopped.
func (w *refWatcher) applyLocked(keys map[types.NamespacedName]bool) []types.NamespacedName {
	var stopped []types.NamespacedName
	for k, rw := range w.watches {
		if !keys[k] {
			rw.stop()
			delete(w.watches, k)
			stopped = append(stopped, k)
		}
	}
	if w.ctx.Err() != nil {
		return stopped
	}
	for k := range keys {
		if w.watches[k] == nil {
			w.watches[k] = w.run(k)
		}
	}
	return stopped
}

// run starts the informer of one ConfigMap.
func (w *refWatcher) run(k types.NamespacedName) *refWatch {
	sel := fields.OneTermEqualSelector("metadata.name", k.Name).String()
	lw := toolscache.NewFilteredListWatchFromClient(w.cs.CoreV1().RESTClient(), "configmaps", k.Namespace,
		func(o *metav1.ListOptions) { o.FieldSelector = sel })
	inf := toolscache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, toolscache.Indexers{})
	_ = inf.SetTransform(func(obj any) (any, error) {
		if o, ok := obj.(metav1.Object); ok {
			o.SetManagedFields(nil)
		}
		return obj, nil
	})
	report := func(obj any) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if o, ok := obj.(client.Object); ok {
			w.event(k, o)
		}
	}
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: report,
		UpdateFunc: func(oldObj, newObj any) {
			o1, ok1 := oldObj.(client.Object)
			o2, ok2 := newObj.(client.Object)
			if ok1 && ok2 && o1.GetResourceVersion() == o2.GetResourceVersion() {
				return
			}
			report(newObj)
		},
		DeleteFunc: report,
	})
	ctx, cancel := context.WithCancel(w.ctx)
	go inf.Run(ctx.Done())
	return &refWatch{inf: inf, stop: cancel}
}

// waitSynced waits until every watch listed its object, or ctx is done.
func (w *refWatcher) waitSynced(ctx context.Context) bool {
	w.mu.Lock()
	var synced []toolscache.InformerSynced
	for _, rw := range w.watches {
		synced = append(synced, rw.inf.HasSynced)
	}
	w.mu.Unlock()
	return toolscache.WaitForCacheSync(ctx.Done(), synced...)
}

// GetByKey is the object of key ("namespace/name"), if watched and
// present.
func (w *refWatcher) GetByKey(key string) (any, bool, error) {
	ns, name, err := toolscache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, false, err
	}
	w.mu.Lock()
	rw := w.watches[types.NamespacedName{Namespace: ns, Name: name}]
	w.mu.Unlock()
	if rw == nil {
		return nil, false, nil
	}
	return rw.inf.GetStore().GetByKey(key)
}

// List is every watched object present.
func (w *refWatcher) List() []any {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []any
	for _, rw := range w.watches {
		out = append(out, rw.inf.GetStore().List()...)
	}
	return out
}

// watching lists the watched keys (for tests).
func (w *refWatcher) watching() map[types.NamespacedName]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[types.NamespacedName]bool, len(w.watches))
	for k := range w.watches {
		out[k] = true
	}
	return out
}
