package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/gatewayapi"
)

// Shape of the workload on the cluster.
const (
	InfraNamespace = "bench-infra" // Gateways, their proxies and client certificates
	ClassName      = "portico-bench"
	Gateways       = 4  // gw0…gw3; routes round-robin over them
	RouteNS        = 10 // bench-0…bench-9; routes round-robin over them
	HostsPerGW     = 50 // hostnames per Gateway
	LiveReplicas   = 2  // kwok pods behind each namespace's "live" Service
	// One route in LiveEvery (in every namespace) sends its health rule to
	// the namespace's "live" Service, whose Pods churn restarts.
	LiveEvery = 5
	// ProbeGateway is the Gateway the ADS client follows; probes attach
	// to it.
	ProbeGateway = "gw0"
	benchLabel   = "bench.portico.dev/kind"
)

// RouteNamespace is the namespace of route i.
func RouteNamespace(i int) string { return fmt.Sprintf("bench-%d", i%RouteNS) }

// GatewayName is gateway g.
func GatewayName(g int) string { return fmt.Sprintf("gw%d", g) }

// Hostname of route i: spread over HostsPerGW names of its Gateway.
func Hostname(i int) string {
	return fmt.Sprintf("app%d.gw%d.bench.example", (i/Gateways)%HostsPerGW, i%Gateways)
}

func parentRef(gw string) gwv1.ParentReference {
	return gwv1.ParentReference{Namespace: ptr.To(gwv1.Namespace(InfraNamespace)), Name: gwv1.ObjectName(gw)}
}

func backend(name string) []gwv1.HTTPBackendRef {
	return []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
		Name: gwv1.ObjectName(name), Port: ptr.To(gwv1.PortNumber(8080))}}}}
}

// RouteRules of route i: a prefix match with a header match (to the
// route's Service, with a header modifier on every fifth route) and an
// exact match with a query match (to the route's Service, or the
// namespace's live Service on one route in LiveEvery). variant changes
// the header value, as churn does.
func RouteRules(i, variant int) []gwv1.HTTPRouteRule {
	prefix, health := fmt.Sprintf("/r%d/api", i), fmt.Sprintf("/r%d/health", i)
	r0 := gwv1.HTTPRouteRule{
		Matches: []gwv1.HTTPRouteMatch{{
			Path:    &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: &prefix},
			Headers: []gwv1.HTTPHeaderMatch{{Name: "x-tenant", Value: fmt.Sprintf("t%d-v%d", i%97, variant)}},
		}},
		BackendRefs: backend(serviceName(i)),
	}
	if i%5 == 0 {
		r0.Filters = []gwv1.HTTPRouteFilter{{
			Type:                  gwv1.HTTPRouteFilterRequestHeaderModifier,
			RequestHeaderModifier: &gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{{Name: "x-route", Value: fmt.Sprint(i)}}},
		}}
	}
	target := serviceName(i)
	if (i/RouteNS)%LiveEvery == 0 {
		target = "live"
	}
	r1 := gwv1.HTTPRouteRule{
		Matches: []gwv1.HTTPRouteMatch{{
			Path:        &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchExact), Value: &health},
			QueryParams: []gwv1.HTTPQueryParamMatch{{Name: "probe", Value: "1"}},
		}},
		BackendRefs: backend(target),
	}
	return []gwv1.HTTPRouteRule{r0, r1}
}

func serviceName(i int) string { return fmt.Sprintf("svc%d", i) }

// Route is route i of the workload.
func Route(i int) *gwv1.HTTPRoute {
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: RouteNamespace(i), Name: fmt.Sprintf("route%d", i),
			Labels: map[string]string{benchLabel: "route"}},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{parentRef(GatewayName(i % Gateways))}},
			Hostnames:       []gwv1.Hostname{gwv1.Hostname(Hostname(i))},
			Rules:           RouteRules(i, 0),
		},
	}
}

// ProbeRoute is a route on ProbeGateway (on an existing hostname, so it
// changes an existing route table) whose only path is marker.
func ProbeRoute(ns, name, marker string, i int) *gwv1.HTTPRoute {
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{benchLabel: "probe"}},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{parentRef(ProbeGateway)}},
			Hostnames:       []gwv1.Hostname{gwv1.Hostname(Hostname(i * Gateways))},
			Rules: []gwv1.HTTPRouteRule{{
				Matches:     []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To(marker)}}},
				BackendRefs: backend("live"),
			}},
		},
	}
}

// Service i has no selector: the suite writes its EndpointSlice (two
// ready endpoints), so 10,000 of them cost the cluster no controller work.
//
// It is headless. Portico routes to a backend's EndpointSlices and never
// reads its ClusterIP, while the API server allocates ClusterIPs one at a
// time: on the 2-core machine, Service creates fell to about 8 per second
// at 20,000 Services (each allocation about 0.1 s, the 32 creating workers
// queued behind it), so the 50,000-route stage measured the allocator, not
// the controller. A headless Service costs the controller's cache the same.
func Service(i int) (*corev1.Service, *discoveryv1.EndpointSlice) {
	ns, name := RouteNamespace(i), serviceName(i)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{benchLabel: "service"}},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Ports:     []corev1.ServicePort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}},
		},
	}
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-bench", Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "bench.portico.dev"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for e := range 2 {
		n := i*2 + e
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.250.%d.%d", n>>8&255, n&255)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	return svc, es
}

// kwokPod is a pod template kwok runs (no container ever starts).
func kwokPod(labels map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.invalid/fake:1"}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
}

// Base creates what every stage needs: namespaces, the GatewayClass with
// its ProxyConfig, the Gateways (the probe Gateway with TCP listeners too,
// ProbeGatewayObject), and per route namespace a "live" Service
// backed by a Deployment of LiveReplicas kwok Pods.
func Base(ctx context.Context, c client.Client) error {
	create := func(o client.Object) error {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
		return nil
	}
	nss := []string{ControllerNamespace, InfraNamespace}
	for k := range RouteNS {
		nss = append(nss, RouteNamespace(k))
	}
	for _, ns := range nss {
		if err := create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	objs := []client.Object{
		&v1alpha1.ProxyConfig{
			ObjectMeta: metav1.ObjectMeta{Namespace: InfraNamespace, Name: "proxies"},
			Spec: v1alpha1.ProxyConfigSpec{
				Replicas: ptr.To[int32](1),
				Service:  v1alpha1.ProxyService{Type: corev1.ServiceTypeClusterIP, AddressFromClusterIP: true},
			},
		},
		&gwv1.GatewayClass{
			ObjectMeta: metav1.ObjectMeta{Name: ClassName},
			Spec: gwv1.GatewayClassSpec{
				ControllerName: gatewayapi.DefaultControllerName,
				ParametersRef: &gwv1.ParametersReference{Group: "portico.dev", Kind: v1alpha1.Kind, Name: "proxies",
					Namespace: ptr.To(gwv1.Namespace(InfraNamespace))},
			},
		},
	}
	// The probe Gateway (with the TCP listeners of the TCPRoute probes)
	// is written after the others, replacing an older spec.
	for g := range Gateways {
		if GatewayName(g) != ProbeGateway {
			objs = append(objs, Gateway(GatewayName(g)))
		}
	}
	for k := range RouteNS {
		ns := RouteNamespace(k)
		labels := map[string]string{"app": "live"}
		objs = append(objs,
			&corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "live"},
				Spec: corev1.ServiceSpec{Selector: labels,
					Ports: []corev1.ServicePort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}},
			},
			&appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "live"},
				Spec: appsv1.DeploymentSpec{
					Replicas: ptr.To[int32](LiveReplicas),
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: kwokPod(labels),
				},
			})
	}
	// The endpoint probes' Service selects single Pods the suite creates.
	objs = append(objs, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: RouteNamespace(0), Name: "epprobe"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"bench-probe": "endpoint"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}},
	}, &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: RouteNamespace(0), Name: "epprobe"},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{parentRef(ProbeGateway)}},
			Hostnames:       []gwv1.Hostname{"epprobe.gw0.bench.example"},
			Rules:           []gwv1.HTTPRouteRule{{BackendRefs: backend("epprobe")}},
		},
	})
	for _, o := range objs {
		if err := create(o); err != nil {
			return err
		}
	}
	if err := upsertGateway(ctx, c, ProbeGatewayObject()); err != nil {
		return fmt.Errorf("writing the probe Gateway %s: %w", ProbeGateway, err)
	}
	return nil
}

// Gateway is a Gateway of the bench class with one HTTP listener.
func Gateway(name string) *gwv1.Gateway {
	all := gwv1.NamespacesFromAll
	return &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: InfraNamespace, Name: name},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: ClassName,
			Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType,
				AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}}}},
		},
	}
}

// Grow creates routes [from, to) with their Services and EndpointSlices,
// with workers concurrent requests.
func Grow(ctx context.Context, c client.Client, from, to, workers int) error {
	return parallel(ctx, from, to, workers, func(i int) error {
		svc, es := Service(i)
		for _, o := range []client.Object{svc, es, Route(i)} {
			if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating %T %s/%s: %w", o, o.GetNamespace(), o.GetName(), err)
			}
		}
		return nil
	})
}

// parallel runs f(i) for i in [from, to) on workers goroutines and returns
// the first error (the rest are skipped once one fails).
func parallel(ctx context.Context, from, to, workers int, f func(i int) error) error {
	var next atomic.Int64
	next.Store(int64(from))
	var once sync.Once
	var first error
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() && ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					failed.Store(true)
				}
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}
