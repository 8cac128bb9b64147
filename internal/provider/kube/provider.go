// Package kube is the Kubernetes provider: controller-runtime informer caches
// for every input kind of the translator, feeding the pipeline.
//
// The caches hold what translation and provisioning read, and no more: of
// Secrets only those of type kubernetes.io/tls (SecretFieldSelector), of
// Deployments, ConfigMaps, ServiceAccounts, PodDisruptionBudgets and
// HorizontalPodAutoscalers only those Portico provisioned (its managed-by
// label), without managedFields; of ConfigMaps also those a CA certificate
// reference names (a BackendTLSPolicy's, a Gateway's spec.tls.frontend),
// each by a watch of its own (refwatch.go). ClusterTrustBundles and
// BackendTLSPolicies are read as empty when the API server does not serve
// them. RBAC cannot express these selections
// (the ServiceAccount may list every Secret); they keep the rest of the
// cluster's Secrets out of the process's memory, snapshots and debug
// views.
//
// Informer events update the cache (controller-runtime does that) and then
// pass through a filter that says whether the event matters for
// translation. An event that matters marks the input dirty and notifies the
// pipeline, which debounces and then asks for a snapshot. A status-only
// change of one of our objects does not re-translate; it is handed to the
// status writer, which corrects drift.
//
// Provisioned objects (a Gateway's ServiceAccount, ConfigMap, Deployment,
// Service, PodDisruptionBudget and HorizontalPodAutoscaler) edited by
// someone else or deleted are reported to Config.InfraObserve, so that
// the leader restores them; their status changes are not (a Deployment's
// rollout, an autoscaler's current metrics, a budget's allowed
// disruptions are written every few seconds). Every kind Portico writes
// must be cached, selected by its label: the reconciler lists and reads
// them from the cache, and a kind missing from cacheOptions would be
// informed lazily on first read, unselected, cluster-wide.
//
// Snapshots are built once per translation, not once per event, and cost
// what changed, not the size of the cache: the first one lists every
// input object from the informers' stores; each later one starts from the
// previous snapshot (resource.Snapshot.Edit: the persistent maps and
// indexes are shared but for the paths to the changed objects, O(log n)
// each; snapshots stay immutable) and reads from the stores only the
// objects the events named since then. The references that drive the
// event filter are kept per route, Gateway and ListenerSet, and updated
// for the changed ones only. Should reading a changed object fail or give
// something inconsistent, the snapshot is rebuilt from the stores.
package kube

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/internal/proxyspec"
	"github.com/portico-dev/portico/internal/resource"
)

// Config configures a Provider.
type Config struct {
	RESTConfig *rest.Config
	Scheme     *runtime.Scheme
	// Notify is called (from informer goroutines) when the input changed in
	// a way that matters. It must not block; the pipeline calls Snapshot
	// when it is ready to translate.
	Notify func()
	// Observe is called when only the status of one of our objects changed.
	// It must not block.
	Observe func(kind resource.Kind, key types.NamespacedName)
	// InfraObserve is called when an object Portico provisioned for a
	// Gateway (labelled as ours) was changed by someone or deleted, so the
	// leader can restore it. It must not block. May be nil.
	InfraObserve func(obj client.Object)
	Log          *slog.Logger
}

// Provider watches the API server.
type Provider struct {
	cfg     Config
	cache   cache.Cache
	synced  atomic.Bool
	syncedC chan struct{} // closed once synced

	// stores are the informers' stores of the input kinds, set by Run
	// before syncedC is closed. Snapshots share their objects.
	stores map[resource.Kind]store

	// snapMu serialises Snapshot and guards base and owners.
	snapMu sync.Mutex
	// base is the last snapshot built, the start of the next one.
	base *resource.Snapshot
	// owners are the references of each route, Gateway and ListenerSet
	// of base (what refs counts).
	owners map[resource.Ref]contrib

	mu   sync.Mutex
	refs refs // what base references; guarded by mu
	// byRef watches the referenced objects of the ByReference kinds (CA
	// ConfigMaps, refwatch.go); nil in tests without an API server.
	byRef *refWatcher
	// changes lists the objects changed since base (see
	// resource.Snapshot.Changes); refresh the objects whose other
	// updates (status only, Namespace labels kept) are not listed there
	// but must reach the next snapshot all the same. Guarded by mu.
	changes *resource.Changes
	refresh map[resource.Ref]struct{}
}

// store is what Snapshot reads of an informer's store
// (k8s.io/client-go/tools/cache.Store): the cache's own objects, not
// copies.
type store interface {
	GetByKey(key string) (item any, exists bool, err error)
	List() []any
}

// New creates the provider and its cache. Nothing is watched until Run.
func New(cfg Config) (*Provider, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Notify == nil {
		cfg.Notify = func() {}
	}
	if cfg.Observe == nil {
		cfg.Observe = func(resource.Kind, types.NamespacedName) {}
	}
	if cfg.InfraObserve == nil {
		cfg.InfraObserve = func(client.Object) {}
	}
	c, err := cache.New(cfg.RESTConfig, cacheOptions(cfg))
	if err != nil {
		return nil, fmt.Errorf("kube provider: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("kube provider: %w", err)
	}
	p := &Provider{cfg: cfg, cache: c, syncedC: make(chan struct{}), refs: newRefs()}
	p.byRef = newRefWatcher(cs, p.referencedEvent)
	return p, nil
}

// SecretFieldSelector selects the Secrets the cache watches: those of type
// kubernetes.io/tls, the only type translation reads (listener
// certificates) and the type of the proxies' client certificates. Other
// Secrets of the cluster (tokens, passwords, registry credentials) are
// never listed, watched or held in memory. Portico's CA (an Opaque Secret)
// is read by name, live, by the leader's certificate manager.
var SecretFieldSelector = fields.OneTermEqualSelector("type", string(corev1.SecretTypeTLS))

// cacheOptions are the informers' selections and transforms.
func cacheOptions(cfg Config) cache.Options {
	// Of the kinds Portico provisions but Services only those it
	// provisioned are watched.
	ours := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{proxyspec.LabelManagedBy: proxyspec.ManagedByValue})}
	return cache.Options{
		ByObject: map[client.Object]cache.ByObject{
			&appsv1.Deployment{}:                     ours,
			&corev1.ConfigMap{}:                      ours,
			&corev1.ServiceAccount{}:                 ours,
			&policyv1.PodDisruptionBudget{}:          ours,
			&autoscalingv2.HorizontalPodAutoscaler{}: ours,
			&corev1.Secret{}:                         {Field: SecretFieldSelector},
		},
		Scheme: cfg.Scheme,
		// Nothing of ours reads managedFields; they are most of the size
		// of many objects.
		DefaultTransform: cache.TransformStripManagedFields(),
		// The translator never modifies its inputs, so reads share the
		// cache's objects instead of deep-copying the world.
		DefaultUnsafeDisableDeepCopy: ptr.To(true),
	}
}

// SetInfraObserver sets Config.InfraObserve; call it before Run.
func (p *Provider) SetInfraObserver(f func(client.Object)) { p.cfg.InfraObserve = f }

// Cache is the provider's informer cache (read-only use).
func (p *Provider) Cache() cache.Cache { return p.cache }

// Synced reports whether every informer finished its initial list.
func (p *Provider) Synced() bool { return p.synced.Load() }

// kinds are the watched kinds, each with how its events matter: every
// kind of the snapshot (resource.Kinds; the kinds of route need nothing
// of their own), then the other kinds Portico provisions.
func (p *Provider) kinds() []watched {
	// How the events of the input kinds that are not routes matter.
	inputs := map[resource.Kind]watched{
		resource.KindNamespace: {matters: namespaceMatters},
		resource.KindService: {infra: true, referenced: func(r *refs, o client.Object) bool {
			return r.service(key(o)) || isProvisioned(o)
		}},
		resource.KindEndpointSlice: {referenced: func(r *refs, o client.Object) bool {
			svc := o.GetLabels()[discoveryv1.LabelServiceName]
			return r.service(types.NamespacedName{Namespace: o.GetNamespace(), Name: svc})
		}},
		resource.KindSecret: {referenced: func(r *refs, o client.Object) bool {
			return r.secret(key(o))
		}},
		// Provisioned objects: the Deployment is an input of Gateway
		// status (its available replicas); all are restored when edited.
		resource.KindDeployment: {infra: true, matters: deploymentMatters},
	}
	var out []watched
	for d := range resource.Kinds() {
		w := inputs[d.Kind]
		w.obj, w.kind, w.input, w.hasStatus, w.byRef = d.New(), d.GVK.Kind, d.Kind, d.HasStatus, d.ByReference
		out = append(out, w)
	}
	return append(out,
		watched{obj: &corev1.ConfigMap{}, kind: "ConfigMap", infra: true, referenced: never},
		watched{obj: &corev1.ServiceAccount{}, kind: "ServiceAccount", infra: true, referenced: never},
		watched{obj: &policyv1.PodDisruptionBudget{}, kind: "PodDisruptionBudget", infra: true, referenced: never},
		watched{obj: &autoscalingv2.HorizontalPodAutoscaler{}, kind: "HorizontalPodAutoscaler", infra: true, referenced: never},
	)
}

// Run registers the event handlers, starts the cache and blocks until ctx is
// done. Once every informer has synced it notifies the pipeline for the
// first full translation.
func (p *Provider) Run(ctx context.Context) error {
	stores := map[resource.Kind]store{}
	for _, w := range p.kinds() {
		if w.byRef {
			stores[w.input] = p.byRef // its informers are refwatch.go's
			continue
		}
		inf, err := p.cache.GetInformer(ctx, w.obj)
		if apimeta.IsNoMatchError(err) && w.input != 0 && optionalKinds[w.input] {
			// The API server does not serve the kind (an older cluster
			// without ClusterTrustBundles, a Gateway API install
			// without BackendTLSPolicies): there are none.
			p.cfg.Log.Warn("kind not served by the API server; none are read", "kind", w.kind, "err", err)
			stores[w.input] = emptyStore{}
			continue
		}
		if err != nil {
			return fmt.Errorf("kube provider: informer for %s: %w", w.kind, err)
		}
		if w.input != 0 {
			si, ok := inf.(interface{ GetStore() toolscache.Store })
			if !ok {
				return fmt.Errorf("kube provider: informer for %s (%T) has no store", w.kind, inf)
			}
			stores[w.input] = si.GetStore()
		}
		if _, err := inf.AddEventHandler(p.handler(w)); err != nil {
			return fmt.Errorf("kube provider: handler for %s: %w", w.kind, err)
		}
	}
	p.stores = stores
	errc := make(chan error, 1)
	go func() { errc <- p.cache.Start(ctx) }()
	if !p.cache.WaitForCacheSync(ctx) {
		if err := ctx.Err(); err != nil {
			<-errc
			return nil
		}
		return fmt.Errorf("kube provider: caches did not sync")
	}
	// The CA ConfigMaps the objects reference, watched and listed before
	// the first snapshot (refwatch.go).
	p.byRef.start(ctx)
	p.byRef.set(p.initialConfigMaps())
	if !p.byRef.waitSynced(ctx) {
		<-errc
		return nil
	}
	p.markSynced()
	p.cfg.Log.Info("caches synced")
	p.cfg.Notify()
	return <-errc
}

// changed records that an object of an input kind changed.
func (p *Provider) changed(w watched, o client.Object) {
	if w.input == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.changes == nil {
		p.changes = resource.NewChanges(0)
	}
	p.changes.Add(w.input, key(o))
}

// refreshed records that an object of an input kind changed in a way that
// does not matter for translation: the next snapshot holds the new
// version, but does not list it in its Changes.
func (p *Provider) refreshed(w watched, o client.Object) {
	if w.input == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refresh == nil {
		p.refresh = map[resource.Ref]struct{}{}
	}
	p.refresh[resource.Ref{Kind: w.input, Key: key(o)}] = struct{}{}
}

// markSynced records that every informer synced.
func (p *Provider) markSynced() {
	if p.synced.CompareAndSwap(false, true) {
		close(p.syncedC)
	}
}

// watched is one watched kind.
type watched struct {
	obj  client.Object
	kind string
	// input is the kind of snapshot object; 0 for kinds that are not
	// inputs of translation.
	input     resource.Kind
	hasStatus bool
	// matters decides for an update of a kind without status whether it
	// matters; nil means every change matters.
	matters func(oldObj, newObj client.Object) bool
	// referenced says whether an object is referenced by the last
	// snapshot; nil means every object matters.
	referenced func(r *refs, o client.Object) bool
	// infra kinds may be provisioned by Portico: a change of one of those
	// by someone else (or a deletion) is reported to InfraObserve.
	infra bool
	// byRef: a ByReference kind, watched per referenced object
	// (refwatch.go), not by the cache.
	byRef bool
}

// optionalKinds are the input kinds the API server may not serve; they
// are then empty instead of an error.
var optionalKinds = map[resource.Kind]bool{
	resource.KindClusterTrustBundle: true,
	resource.KindBackendTLSPolicy:   true,
}

// emptyStore is the store of a kind the API server does not serve.
type emptyStore struct{}

func (emptyStore) GetByKey(string) (any, bool, error) { return nil, false, nil }
func (emptyStore) List() []any                        { return nil }

// referencedEvent is the event of a watch of a referenced object
// (refwatch.go): obj changed, or its watch stopped (obj nil). Either is a
// change of the input, and matters.
func (p *Provider) referencedEvent(k types.NamespacedName, obj client.Object) {
	p.mu.Lock()
	if p.changes == nil {
		p.changes = resource.NewChanges(0)
	}
	p.changes.Add(resource.KindConfigMap, k)
	p.mu.Unlock()
	if p.synced.Load() {
		p.cfg.Notify()
	}
}

// initialConfigMaps are the ConfigMaps the cache's objects reference, read
// from the stores before the first snapshot.
func (p *Provider) initialConfigMaps() map[types.NamespacedName]bool {
	r := newRefs()
	for _, k := range refOwnerKinds() {
		st := p.stores[k]
		if st == nil {
			continue
		}
		for _, item := range st.List() {
			r.add(contribOf(k, item), 1)
		}
	}
	return r.configMapKeys()
}

func never(*refs, client.Object) bool { return false }

// isProvisioned reports whether Portico provisioned obj for a Gateway.
func isProvisioned(o client.Object) bool {
	return o.GetLabels()[proxyspec.LabelManagedBy] == proxyspec.ManagedByValue && o.GetLabels()[proxyspec.LabelGatewayName] != ""
}

// infraChanged reports whether an update of a provisioned object changed
// more than its status: the generation (Deployments), labels, annotations,
// the spec of kinds whose generation may not follow it, or the data of
// kinds without status.
func infraChanged(a, b client.Object) bool {
	if specChanged(a, b) {
		return true
	}
	switch x := a.(type) {
	case *corev1.Service:
		y, ok := b.(*corev1.Service)
		return !ok || !equality.Semantic.DeepEqual(x.Spec, y.Spec)
	case *policyv1.PodDisruptionBudget:
		y, ok := b.(*policyv1.PodDisruptionBudget)
		return !ok || !equality.Semantic.DeepEqual(x.Spec, y.Spec)
	case *autoscalingv2.HorizontalPodAutoscaler:
		y, ok := b.(*autoscalingv2.HorizontalPodAutoscaler)
		return !ok || !equality.Semantic.DeepEqual(x.Spec, y.Spec)
	case *corev1.ConfigMap, *corev1.ServiceAccount:
		return true
	}
	return false
}

func (p *Provider) handler(w watched) toolscache.ResourceEventHandler {
	isRef := func(o client.Object) bool {
		if w.referenced == nil {
			return true
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		return w.referenced(&p.refs, o)
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			o, ok := obj.(client.Object)
			if !ok {
				return
			}
			p.changed(w, o)
			if p.synced.Load() && isRef(o) {
				p.cfg.Notify()
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o1, ok1 := oldObj.(client.Object)
			o2, ok2 := newObj.(client.Object)
			if !ok1 || !ok2 || o1.GetResourceVersion() == o2.GetResourceVersion() {
				return // a resync: nothing changed
			}
			if w.infra && isProvisioned(o2) && infraChanged(o1, o2) {
				p.cfg.InfraObserve(o2)
			}
			if w.hasStatus && !specChanged(o1, o2) {
				p.refreshed(w, o2)
				p.cfg.Observe(w.input, key(o2))
				return
			}
			if w.matters != nil && !w.matters(o1, o2) {
				p.refreshed(w, o2)
				return
			}
			p.changed(w, o2)
			if !isRef(o1) && !isRef(o2) {
				return
			}
			if p.synced.Load() {
				p.cfg.Notify()
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			o, ok := obj.(client.Object)
			if ok {
				p.changed(w, o)
			}
			if ok && w.infra && isProvisioned(o) {
				p.cfg.InfraObserve(o)
			}
			if !ok || isRef(o) {
				p.cfg.Notify()
			}
		},
	}
}

// specChanged reports whether anything but the status changed: the
// generation (bumped on spec changes), labels, annotations or deletion.
func specChanged(a, b client.Object) bool {
	return a.GetGeneration() != b.GetGeneration() ||
		!equality.Semantic.DeepEqual(a.GetLabels(), b.GetLabels()) ||
		!equality.Semantic.DeepEqual(a.GetAnnotations(), b.GetAnnotations()) ||
		!a.GetDeletionTimestamp().Equal(b.GetDeletionTimestamp()) ||
		a.GetCreationTimestamp() != b.GetCreationTimestamp()
}

// namespaceMatters: namespaces matter to translation through their labels
// (allowedRoutes and allowedListeners selectors).
func namespaceMatters(a, b client.Object) bool {
	return !equality.Semantic.DeepEqual(a.GetLabels(), b.GetLabels())
}

// deploymentMatters: translation reads of a Deployment only whether it
// has an available replica (a Gateway's proxies are ready). Rollouts and
// scaling rewrite its status many times; re-translating a Gateway for each
// write would cost a full translation of its routes on every replica.
func deploymentMatters(a, b client.Object) bool {
	x, ok1 := a.(*appsv1.Deployment)
	y, ok2 := b.(*appsv1.Deployment)
	if !ok1 || !ok2 {
		return true
	}
	return (x.Status.AvailableReplicas > 0) != (y.Status.AvailableReplicas > 0) ||
		!equality.Semantic.DeepEqual(a.GetLabels(), b.GetLabels()) ||
		!a.GetDeletionTimestamp().Equal(b.GetDeletionTimestamp())
}

func key(o client.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
}
