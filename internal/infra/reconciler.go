package infra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/proxyspec"
)

// ClientCerts issues and removes the xDS client certificate Secret of a
// Gateway's proxies.
type ClientCerts interface {
	EnsureClientCert(ctx context.Context, ns, gw string) error
	DeleteClientCert(ctx context.Context, ns, gw string) error
}

// Config configures a Reconciler.
type Config struct {
	// Client applies and deletes objects (server-side apply, field manager
	// "portico").
	Client client.Client
	// Reader lists the objects Portico provisioned (the informer cache).
	Reader  client.Reader
	Params  Params
	Certs   ClientCerts // may be nil (no xDS mTLS)
	Metrics *Metrics
	Log     *slog.Logger
	// BaseDelay and MaxDelay bound the retry backoff.
	BaseDelay, MaxDelay time.Duration
}

// Reconciler creates, updates, restores and deletes the proxies of every
// Gateway of ours. Like the status writer, it records desired state from
// each translation without waiting and writes only while leading.
type Reconciler struct {
	cfg   Config
	queue workqueue.TypedRateLimitingInterface[types.NamespacedName]

	mu      sync.Mutex
	desired map[types.NamespacedName]*desiredGW
	// blocked are the Gateways whose last write was refused because an
	// object of their name belongs to someone else; they are retried with
	// backoff, and at once when a provisioned object of that name changes.
	blocked map[types.NamespacedName]blockedGW
	leadCtx context.Context
	// render is RenderSpec (replaced in tests, to count renderings).
	render func(proxyspec.Spec, Params) (*Objects, error)
	// processed, when set (tests), is called after each write or removal
	// of a Gateway's objects, with its result.
	processed func(types.NamespacedName, error)
}

type desiredGW struct {
	spec    proxyspec.Spec
	objects *Objects
}

// blockedGW is a Gateway whose provisioned name is taken (see
// proxyspec.CheckOwner).
type blockedGW struct {
	// name is the object name that is taken, in the Gateway's namespace.
	name string
}

// New returns a Reconciler; Run starts it.
func New(cfg Config) *Reconciler {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	if cfg.BaseDelay <= 0 {
		cfg.BaseDelay = 100 * time.Millisecond
	}
	if cfg.MaxDelay <= 0 {
		cfg.MaxDelay = 30 * time.Second
	}
	rl := workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](cfg.BaseDelay, cfg.MaxDelay)
	return &Reconciler{
		cfg:     cfg,
		queue:   workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "infra"}),
		desired: map[types.NamespacedName]*desiredGW{},
		blocked: map[types.NamespacedName]blockedGW{},
		render:  RenderSpec,
	}
}

// SetCerts sets the issuer of the proxies' xDS client certificates; call
// it before Run.
func (r *Reconciler) SetCerts(c ClientCerts) { r.cfg.Certs = c }

// SetReader sets the reader of provisioned objects (the informer cache,
// created after the reconciler). Call it before Run.
func (r *Reconciler) SetReader(rd client.Reader) { r.cfg.Reader = rd }

// Publish records the Gateways of one translation. A Gateway whose rendered
// objects changed is enqueued; one that disappeared is enqueued for removal.
// A Gateway whose spec is the one of the previous call (the same Gateway
// object, proxy configuration, TCP and UDP ports) is not rendered again: a
// translation caused by a route or an endpoint costs no rendering. A spec
// that fails proxyspec.CheckProxyConfig (the translator refused it) is not
// rendered: the Gateway's objects stay as they are.
func (r *Reconciler) Publish(specs []proxyspec.Spec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[types.NamespacedName]bool{}
	for _, s := range specs {
		if s.Gateway == nil {
			continue
		}
		k := types.NamespacedName{Namespace: s.Gateway.Namespace, Name: s.Gateway.Name}
		seen[k] = true
		if old, ok := r.desired[k]; ok && sameSpec(&old.spec, &s) {
			continue
		}
		if err := proxyspec.CheckProxyConfig(s.Proxy); err != nil {
			// The Gateway's (or its class's) status says so; what runs
			// stays until the ProxyConfig is fixed.
			r.cfg.Log.Error("not rendering proxies of a refused ProxyConfig", "gateway", k, "err", err)
			continue
		}
		objs, err := r.render(s, r.cfg.Params)
		if err != nil {
			r.cfg.Log.Error("cannot render proxies", "gateway", k, "err", err)
			continue
		}
		if old, ok := r.desired[k]; ok && reflect.DeepEqual(old.objects, objs) {
			continue
		}
		r.desired[k] = &desiredGW{spec: s, objects: objs}
		r.queue.Add(k)
	}
	for k := range r.desired {
		if !seen[k] {
			delete(r.desired, k)
			r.queue.Add(k)
		}
	}
}

// sameSpec reports whether two specs render the same objects without
// rendering them: informer objects are never modified in place, so the same
// Gateway pointer is the same Gateway.
func sameSpec(a, b *proxyspec.Spec) bool {
	return a.Gateway == b.Gateway && slices.Equal(a.Ports, b.Ports) && slices.Equal(a.UDPPorts, b.UDPPorts) &&
		equality.Semantic.DeepEqual(a.Proxy, b.Proxy)
}

// Observe enqueues the Gateway owning a provisioned object that changed or
// was deleted, so that the leader restores it, and the Gateways blocked by
// an object of that name (it may be gone).
func (r *Reconciler) Observe(obj client.Object) {
	l := obj.GetLabels()
	if l[proxyspec.LabelManagedBy] != proxyspec.ManagedByValue || l[proxyspec.LabelGatewayName] == "" {
		return
	}
	r.queue.Add(types.NamespacedName{Namespace: l[proxyspec.LabelGatewayNamespace], Name: l[proxyspec.LabelGatewayName]})
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, b := range r.blocked {
		if k.Namespace == obj.GetNamespace() && (b.name == obj.GetName() || proxyspec.ClientCertSecretName(k.Name) == obj.GetName()) {
			r.queue.Add(k)
		}
	}
}

// SetLeading starts (ctx non-nil) or ends a term. A new term re-applies
// every Gateway's proxies and sweeps objects of Gateways that no longer
// exist.
func (r *Reconciler) SetLeading(ctx context.Context) {
	r.mu.Lock()
	r.leadCtx = ctx
	var keys []types.NamespacedName
	if ctx != nil {
		for k := range r.desired {
			keys = append(keys, k)
		}
	} else {
		// Only the leader counts blocked Gateways.
		clear(r.blocked)
		r.cfg.Metrics.Blocked.Set(0)
	}
	r.mu.Unlock()
	if ctx == nil {
		return
	}
	for _, k := range keys {
		r.queue.Add(k)
	}
	for _, k := range r.orphans(ctx) {
		r.queue.Add(k)
	}
}

// provisionedLists are empty lists of every kind Portico provisions for a
// Gateway but the client certificate Secret (see ClientCerts).
func provisionedLists() []client.ObjectList {
	return []client.ObjectList{
		&appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &corev1.ServiceAccountList{},
		&policyv1.PodDisruptionBudgetList{}, &autoscalingv2.HorizontalPodAutoscalerList{},
	}
}

// orphans are Gateways that own provisioned objects but have no desired
// state: their Gateway was deleted (possibly while no leader ran).
func (r *Reconciler) orphans(ctx context.Context) []types.NamespacedName {
	found := map[types.NamespacedName]bool{}
	for _, list := range provisionedLists() {
		if err := r.cfg.Reader.List(ctx, list, client.MatchingLabels{proxyspec.LabelManagedBy: proxyspec.ManagedByValue}); err != nil {
			r.cfg.Log.Warn("listing provisioned objects", "err", err)
			continue
		}
		_ = eachItem(list, func(o client.Object) {
			l := o.GetLabels()
			if l[proxyspec.LabelGatewayName] != "" {
				found[types.NamespacedName{Namespace: l[proxyspec.LabelGatewayNamespace], Name: l[proxyspec.LabelGatewayName]}] = true
			}
		})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []types.NamespacedName
	for k := range found {
		if _, ok := r.desired[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

// Run processes the queue with one worker until ctx is done.
func (r *Reconciler) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for r.processNext() {
		}
	}()
	<-ctx.Done()
	r.queue.ShutDownWithDrain()
	<-done
}

func (r *Reconciler) processNext() bool {
	k, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(k)
	r.mu.Lock()
	d := r.desired[k]
	lead := r.leadCtx
	r.mu.Unlock()
	if lead == nil || lead.Err() != nil {
		r.queue.Forget(k)
		return true
	}
	ctx, cancel := context.WithTimeout(lead, 30*time.Second)
	defer cancel()
	var err error
	if d == nil {
		err = r.remove(ctx, k)
	} else {
		err = r.apply(ctx, k, d)
	}
	r.setBlocked(k, err)
	if r.processed != nil {
		r.processed(k, err)
	}
	if errors.Is(err, errUnprovisionable) {
		// Not retried: the Gateway's status says why (a new spec is
		// published, and tried, when the Gateway changes).
		r.cfg.Log.Warn("not provisioning", "gateway", k, "err", err)
		r.queue.Forget(k)
		return true
	}
	if err == nil || lead.Err() != nil {
		r.queue.Forget(k)
		return true
	}
	var conflict *proxyspec.ConflictError
	if errors.As(err, &conflict) {
		// Its status says so (Programmed=False); retried with backoff
		// until the holder of the name is gone.
		r.cfg.Log.Debug("provisioned name taken, not writing", "gateway", k, "err", err)
	} else {
		r.cfg.Log.Warn("provisioning failed, will retry", "gateway", k, "err", err)
	}
	r.queue.AddRateLimited(k)
	return true
}

// setBlocked records whether Gateway k's write was refused for a taken
// name, and logs the first refusal.
func (r *Reconciler) setBlocked(k types.NamespacedName, err error) {
	var conflict *proxyspec.ConflictError
	r.mu.Lock()
	defer r.mu.Unlock()
	_, was := r.blocked[k]
	if errors.As(err, &conflict) {
		r.blocked[k] = blockedGW{name: conflict.Name}
		if !was {
			r.cfg.Log.Warn("provisioned name taken: not writing the Gateway's proxies", "gateway", k, "err", err)
		}
	} else if err == nil || errors.Is(err, errUnprovisionable) {
		delete(r.blocked, k)
	}
	r.cfg.Metrics.Blocked.Set(float64(len(r.blocked)))
}

// errUnprovisionable marks a Gateway whose proxies cannot be provisioned
// whatever happens elsewhere (its status says why).
var errUnprovisionable = errors.New("cannot provision")

// checkOwnership fails with a *proxyspec.ConflictError when an object
// Portico would write for Gateway gw exists and is not gw's (see
// proxyspec.CheckOwner); the HorizontalPodAutoscaler counts only when
// autoscaled (Portico writes none otherwise). It reads the informer cache, and the API server for
// objects the cache does not have: the caches hold only labelled
// Deployments, ConfigMaps, ServiceAccounts, PodDisruptionBudgets and
// HorizontalPodAutoscalers and TLS Secrets, and lag behind writes.
func (r *Reconciler) checkOwnership(ctx context.Context, gw *gwv1.Gateway, autoscaled bool) error {
	name := proxyspec.Name(gw.Name)
	type target struct {
		kind string
		obj  client.Object
		name string
	}
	targets := []target{
		{"ServiceAccount", &corev1.ServiceAccount{}, name},
		{"ConfigMap", &corev1.ConfigMap{}, name},
		{"Deployment", &appsv1.Deployment{}, name},
		{"Service", &corev1.Service{}, name},
		{"PodDisruptionBudget", &policyv1.PodDisruptionBudget{}, name},
	}
	if autoscaled {
		targets = append(targets, target{"HorizontalPodAutoscaler", &autoscalingv2.HorizontalPodAutoscaler{}, name})
	}
	if r.cfg.Certs != nil {
		targets = append(targets, target{"Secret", &corev1.Secret{}, proxyspec.ClientCertSecretName(gw.Name)})
	}
	for _, t := range targets {
		found, err := r.read(ctx, types.NamespacedName{Namespace: gw.Namespace, Name: t.name}, t.obj)
		if err != nil {
			return err
		}
		if found {
			if err := proxyspec.CheckOwner(t.obj, t.kind, gw); err != nil {
				return err
			}
		}
	}
	return nil
}

// read gets an object from the informer cache, else from the API server;
// found is false when neither has it.
func (r *Reconciler) read(ctx context.Context, key types.NamespacedName, obj client.Object) (found bool, err error) {
	if r.cfg.Reader != nil {
		err = r.cfg.Reader.Get(ctx, key, obj)
		if err == nil {
			return true, nil
		}
		if !apierrors.IsNotFound(err) {
			return false, err
		}
	}
	err = r.cfg.Client.Get(ctx, key, obj)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, err
}

func (r *Reconciler) apply(ctx context.Context, k types.NamespacedName, d *desiredGW) error {
	if len(k.Name) > proxyspec.MaxGatewayNameLength {
		return fmt.Errorf("%w: the Gateway name has more than %d characters, the limit of a label value", errUnprovisionable, proxyspec.MaxGatewayNameLength)
	}
	// Nothing is written, not even the client certificate, unless every
	// object of the Gateway's name is the Gateway's or absent.
	if err := r.checkOwnership(ctx, d.spec.Gateway, d.spec.Proxy.Autoscaling != nil); err != nil {
		return err
	}
	if r.cfg.Certs != nil {
		if err := r.cfg.Certs.EnsureClientCert(ctx, k.Namespace, k.Name); err != nil {
			return err
		}
	}
	// Apply freshly rendered objects: Apply writes the server's answer
	// back into the configuration it is given, which must not leak into
	// the desired state kept for comparison.
	objs, err := RenderSpec(d.spec, r.cfg.Params)
	if err != nil {
		return err
	}
	opts := []client.ApplyOption{client.FieldOwner(proxyspec.FieldManager), client.ForceOwnership}
	write := func(objs ...runtime.ApplyConfiguration) error {
		for _, obj := range objs {
			if err := r.cfg.Client.Apply(ctx, obj, opts...); err != nil {
				r.cfg.Metrics.Writes.WithLabelValues("apply", "error").Inc()
				return err
			}
			r.cfg.Metrics.Writes.WithLabelValues("apply", "ok").Inc()
		}
		return nil
	}
	if err := write(objs.ServiceAccount, objs.ConfigMap); err != nil {
		return err
	}
	// Replicas: without autoscaling Portico's (the HorizontalPodAutoscaler
	// of a previous spec goes first, so that it scales nothing after
	// Portico set them); with autoscaling the HorizontalPodAutoscaler's,
	// handed over without a reset (replicas.go).
	if objs.HorizontalPodAutoscaler == nil {
		if err := r.deleteAutoscaler(ctx, d.spec.Gateway); err != nil {
			return err
		}
	} else if err := r.handOverReplicas(ctx, k.Namespace, *objs.Deployment.Name); err != nil {
		return err
	}
	if err := write(objs.Deployment); err != nil {
		return err
	}
	if err := write(objs.Service); err != nil {
		sp := objs.Service.Spec
		if !(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)) || sp == nil || (sp.ClusterIP == nil && len(sp.ExternalIPs) == 0) {
			return err
		}
		// Requested addresses the API server refuses: a static Cluster
		// address outside the ServiceCIDR, taken, or another than the
		// existing Service's (which cannot change); external IPs an
		// admission policy forbids (DenyServiceExternalIPs). The Service
		// is applied without them, keeping the ClusterIP it has or is
		// given, and the translator reports those requests unsatisfied;
		// the rest of the Service is served.
		r.cfg.Log.Info("requested Service addresses refused; applying the Service without them", "gateway", k, "error", err)
		sp.ClusterIP, sp.ExternalIPs = nil, nil
		if err := write(objs.Service); err != nil {
			return err
		}
	}
	if err := write(objs.PodDisruptionBudget); err != nil {
		return err
	}
	if objs.HorizontalPodAutoscaler != nil {
		if err := write(objs.HorizontalPodAutoscaler); err != nil {
			return err
		}
	}
	r.cfg.Log.Debug("proxies applied", "gateway", k)
	return nil
}

// remove deletes the provisioned objects of a Gateway that is gone (or no
// longer ours). Garbage collection would remove them too, through the owner
// references, but not for a Gateway that only stopped being ours, and not
// promptly.
func (r *Reconciler) remove(ctx context.Context, k types.NamespacedName) error {
	sel := client.MatchingLabels{proxyspec.LabelManagedBy: proxyspec.ManagedByValue, proxyspec.LabelGatewayName: k.Name, proxyspec.LabelGatewayNamespace: k.Namespace}
	in := client.InNamespace(k.Namespace)
	var errs []error
	for _, list := range provisionedLists() {
		if err := r.cfg.Reader.List(ctx, list, sel, in); err != nil {
			errs = append(errs, err)
			continue
		}
		_ = eachItem(list, func(o client.Object) {
			if !proxyspec.ControlledByName(o, k.Name) {
				return // labelled as the Gateway's, but not its own
			}
			err := r.cfg.Client.Delete(ctx, o, client.PropagationPolicy("Background"))
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
				r.cfg.Metrics.Writes.WithLabelValues("delete", "error").Inc()
				return
			}
			r.cfg.Metrics.Writes.WithLabelValues("delete", "ok").Inc()
		})
	}
	if r.cfg.Certs != nil {
		// The Secret's name is shared by every Gateway whose name maps to
		// proxyspec.Name(k.Name): delete it only if it is this Gateway's.
		var sec corev1.Secret
		found, err := r.read(ctx, types.NamespacedName{Namespace: k.Namespace, Name: proxyspec.ClientCertSecretName(k.Name)}, &sec)
		switch {
		case err != nil:
			errs = append(errs, err)
		case found && proxyspec.ControlledByName(&sec, k.Name):
			if err := r.cfg.Certs.DeleteClientCert(ctx, k.Namespace, k.Name); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return errs[0]
	}
	r.cfg.Log.Info("proxies removed", "gateway", k)
	return nil
}

// Metrics of the infra reconciler.
type Metrics struct {
	Writes *prometheus.CounterVec
	// Blocked is the number of Gateways whose proxies are not written
	// because an object of their name belongs to someone else.
	Blocked prometheus.Gauge
}

// NewMetrics creates the metrics and registers them with reg when not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portico_infra_writes_total",
			Help: "Writes of provisioned proxy objects by operation (apply, delete) and result.",
		}, []string{"op", "result"}),
		Blocked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "portico_infra_blocked_gateways",
			Help: "Gateways whose proxies are not provisioned because an object of their provisioned name belongs to another Gateway or to no Gateway (the leader's count).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.Writes, m.Blocked)
	}
	return m
}
