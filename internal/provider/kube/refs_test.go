package kube

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/testenv/workload"
)

// The event filter (contribOf, collectRefs) and the translator resolve
// references through package refs. These tests check that they agree on
// whole snapshots: the filter never drops an event the translation
// depends on, and on input whose every reference resolves both list the
// same Services and Secrets.

// refWorld makes random snapshots whose routes, Gateways and ListenerSets
// reference Services and Secrets in every way the API allows: defaults,
// explicit group/kind/namespace (also empty), other kinds and groups,
// other namespaces with and without a ReferenceGrant, RequestMirror
// filters of rules and of backendRefs, missing objects and ports.
type refWorld struct {
	rng *rand.Rand
	// valid makes only references that resolve: every Service and Secret
	// exists, cross-namespace ones are granted, no per-backend filters.
	valid bool
}

var refNamespaces = []string{"ns0", "ns1", "ns2"}

func (w *refWorld) pick(s ...string) string { return s[w.rng.IntN(len(s))] }

func (w *refWorld) namespace(own string) *gwv1.Namespace {
	switch w.rng.IntN(5) {
	case 0:
		return ptr.To(gwv1.Namespace(""))
	case 1:
		return ptr.To(gwv1.Namespace(own))
	case 2:
		return ptr.To(gwv1.Namespace(w.pick(refNamespaces...)))
	}
	return nil
}

func (w *refWorld) backend(own string) gwv1.BackendObjectReference {
	ref := gwv1.BackendObjectReference{Name: gwv1.ObjectName(w.pick("svc0", "svc1", "svc2", "nope")), Port: ptr.To(gwv1.PortNumber(8080))}
	if w.valid {
		ref.Name = gwv1.ObjectName(w.pick("svc0", "svc1", "svc2"))
	}
	ref.Namespace = w.namespace(own)
	if w.valid {
		return ref
	}
	switch w.rng.IntN(8) {
	case 0:
		ref.Kind = ptr.To(gwv1.Kind("Other"))
	case 1:
		ref.Group = ptr.To(gwv1.Group("example.com"))
	case 2:
		ref.Group, ref.Kind = ptr.To(gwv1.Group("")), ptr.To(gwv1.Kind("Service"))
	case 3:
		ref.Port = nil
	case 4:
		ref.Port = ptr.To(gwv1.PortNumber(9999))
	}
	return ref
}

func (w *refWorld) httpMirror(own string) gwv1.HTTPRouteFilter {
	return gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: w.backend(own)}}
}

func (w *refWorld) grpcMirror(own string) gwv1.GRPCRouteFilter {
	return gwv1.GRPCRouteFilter{Type: gwv1.GRPCRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{BackendRef: w.backend(own)}}
}

func (w *refWorld) parents() []gwv1.ParentReference {
	var out []gwv1.ParentReference
	for range 1 + w.rng.IntN(2) {
		ref := gwv1.ParentReference{Namespace: ptr.To(gwv1.Namespace("ns0")), Name: gwv1.ObjectName(w.pick("gw0", "gw1"))}
		if w.rng.IntN(3) == 0 {
			ref = gwv1.ParentReference{Kind: ptr.To(gwv1.Kind("ListenerSet")), Namespace: ptr.To(gwv1.Namespace("ns1")), Name: "ls"}
		}
		if !slices.ContainsFunc(out, func(p gwv1.ParentReference) bool { return p.Name == ref.Name }) {
			out = append(out, ref)
		}
	}
	return out
}

func (w *refWorld) certificates(own string) *gwv1.ListenerTLSConfig {
	cfg := &gwv1.ListenerTLSConfig{}
	for range 1 + w.rng.IntN(2) {
		ref := gwv1.SecretObjectReference{Name: gwv1.ObjectName(w.pick("sec0", "sec1", "nope"))}
		if w.valid {
			ref.Name = gwv1.ObjectName(w.pick("sec0", "sec1"))
		}
		ref.Namespace = w.namespace(own)
		if !w.valid {
			switch w.rng.IntN(6) {
			case 0:
				ref.Kind = ptr.To(gwv1.Kind("ConfigMap"))
			case 1:
				ref.Group = ptr.To(gwv1.Group("example.com"))
			case 2:
				ref.Group, ref.Kind = ptr.To(gwv1.Group("")), ptr.To(gwv1.Kind("Secret"))
			}
		}
		cfg.CertificateRefs = append(cfg.CertificateRefs, ref)
	}
	return cfg
}

// objects returns the objects of a random world, by kind.
func (w *refWorld) objects() map[resource.Kind][]any {
	epoch := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	meta := func(ns, name string, i int) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1, CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(i) * time.Second))}
	}
	all := gwv1.NamespacesFromAll
	allowed := &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}}
	out := map[resource.Kind][]any{}
	add := func(k resource.Kind, o any) { out[k] = append(out[k], o) }
	add(resource.KindGatewayClass, &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "portico", Generation: 1},
		Spec: gwv1.GatewayClassSpec{ControllerName: workload.ControllerName}})
	for i, ns := range refNamespaces {
		add(resource.KindNamespace, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		for j, name := range []string{"svc0", "svc1", "svc2"} {
			if !w.valid && w.rng.IntN(4) == 0 {
				continue
			}
			svc := &corev1.Service{ObjectMeta: meta(ns, name, 0), Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}}}}
			add(resource.KindService, svc)
			add(resource.KindEndpointSlice, &discoveryv1.EndpointSlice{
				ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
				AddressType: discoveryv1.AddressTypeIPv4,
				Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(80)), Protocol: ptr.To(corev1.ProtocolTCP)}},
				Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{fmt.Sprintf("10.0.%d.%d", i, j+1)}}},
			})
		}
		for _, name := range []string{"sec0", "sec1"} {
			if !w.valid && w.rng.IntN(4) == 0 {
				continue
			}
			add(resource.KindSecret, &corev1.Secret{ObjectMeta: meta(ns, name, 0), Type: corev1.SecretTypeTLS,
				Data: map[string][]byte{corev1.TLSCertKey: []byte(workload.TestCertPEM), corev1.TLSPrivateKeyKey: []byte(workload.TestKeyPEM)}})
		}
		// An unreferenced Service and Secret in every namespace.
		add(resource.KindService, &corev1.Service{ObjectMeta: meta(ns, "unused", 0), Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}})
		add(resource.KindSecret, &corev1.Secret{ObjectMeta: meta(ns, "unused", 0), Type: corev1.SecretTypeTLS})
		if w.valid || w.rng.IntN(2) == 0 {
			g := &gwv1beta1.ReferenceGrant{ObjectMeta: meta(ns, "grant", 0)}
			for _, from := range refNamespaces {
				for _, kind := range []gwv1.Kind{"HTTPRoute", "GRPCRoute", "Gateway", "ListenerSet"} {
					g.Spec.From = append(g.Spec.From, gwv1.ReferenceGrantFrom{Group: gwv1.GroupName, Kind: kind, Namespace: gwv1.Namespace(from)})
				}
			}
			g.Spec.To = []gwv1.ReferenceGrantTo{{Kind: "Service"}, {Kind: "Secret"}}
			add(resource.KindReferenceGrant, g)
		}
	}
	for i, name := range []string{"gw0", "gw1"} {
		host := gwv1.Hostname(fmt.Sprintf("*.%s.example.com", name))
		g := &gwv1.Gateway{ObjectMeta: meta("ns0", name, i), Spec: gwv1.GatewaySpec{
			GatewayClassName: "portico",
			Listeners: []gwv1.Listener{
				{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType, AllowedRoutes: allowed},
				{Name: "https", Port: 443, Protocol: gwv1.HTTPSProtocolType, Hostname: &host, AllowedRoutes: allowed, TLS: w.certificates("ns0")},
			},
			AllowedListeners: &gwv1.AllowedListeners{Namespaces: &gwv1.ListenerNamespaces{From: &all}},
		}}
		add(resource.KindGateway, g)
	}
	lsHost := gwv1.Hostname("*.ls.example.com")
	add(resource.KindListenerSet, &gwv1.ListenerSet{ObjectMeta: meta("ns1", "ls", 0), Spec: gwv1.ListenerSetSpec{
		ParentRef: gwv1.ParentGatewayReference{Namespace: ptr.To(gwv1.Namespace("ns0")), Name: "gw0"},
		Listeners: []gwv1.ListenerEntry{{Name: "tls", Port: 8443, Protocol: gwv1.HTTPSProtocolType, Hostname: &lsHost,
			AllowedRoutes: allowed, TLS: w.certificates("ns1")}},
	}})
	for i := range 8 {
		ns := w.pick(refNamespaces...)
		r := &gwv1.HTTPRoute{ObjectMeta: meta(ns, fmt.Sprintf("r%d", i), i)}
		r.Spec.ParentRefs = w.parents()
		if w.valid {
			// A hostname for every listener, none a GRPCRoute has: every
			// route attaches to every parent.
			for _, d := range []string{"http.example.org", "ls.example.com", "gw0.example.com", "gw1.example.com"} {
				r.Spec.Hostnames = append(r.Spec.Hostnames, gwv1.Hostname(fmt.Sprintf("r%d.%s", i, d)))
			}
		}
		for range 1 + w.rng.IntN(2) {
			var rule gwv1.HTTPRouteRule
			if w.rng.IntN(3) == 0 {
				rule.Filters = append(rule.Filters, w.httpMirror(ns))
			}
			for range 1 + w.rng.IntN(2) {
				b := gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: w.backend(ns)}}
				if !w.valid && w.rng.IntN(5) == 0 {
					b.Filters = append(b.Filters, w.httpMirror(ns))
				}
				rule.BackendRefs = append(rule.BackendRefs, b)
			}
			r.Spec.Rules = append(r.Spec.Rules, rule)
		}
		add(resource.KindHTTPRoute, r)
	}
	for i := range 4 {
		ns := w.pick(refNamespaces...)
		r := &gwv1.GRPCRoute{ObjectMeta: meta(ns, fmt.Sprintf("g%d", i), i)}
		r.Spec.ParentRefs = w.parents()
		r.Spec.Hostnames = []gwv1.Hostname{gwv1.Hostname(fmt.Sprintf("grpc%d.gw0.example.com", i)), gwv1.Hostname(fmt.Sprintf("grpc%d.ls.example.com", i))}
		var rule gwv1.GRPCRouteRule
		rule.Matches = []gwv1.GRPCRouteMatch{{Method: &gwv1.GRPCMethodMatch{Service: ptr.To(fmt.Sprintf("pkg.S%d", i))}}}
		if w.rng.IntN(3) == 0 {
			rule.Filters = append(rule.Filters, w.grpcMirror(ns))
		}
		b := gwv1.GRPCBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: w.backend(ns)}}
		if !w.valid && w.rng.IntN(5) == 0 {
			b.Filters = append(b.Filters, w.grpcMirror(ns))
		}
		rule.BackendRefs = append(rule.BackendRefs, b)
		r.Spec.Rules = append(r.Spec.Rules, rule)
		add(resource.KindGRPCRoute, r)
	}
	return out
}

// refSnapshot builds a snapshot of objs, without those keep rejects.
func refSnapshot(t *testing.T, objs map[resource.Kind][]any, keep func(resource.Kind, metav1.Object) bool) *resource.Snapshot {
	t.Helper()
	s := resource.New()
	for k, list := range objs {
		for _, o := range list {
			m := o.(metav1.Object)
			if !keep(k, m) {
				continue
			}
			key := resource.Key{Namespace: m.GetNamespace(), Name: m.GetName()}
			switch o := o.(type) {
			case *gwv1.GatewayClass:
				s.GatewayClasses.Set(o.Name, o)
			case *corev1.Namespace:
				s.Namespaces.Set(o.Name, o)
			case *gwv1.Gateway:
				s.Gateways.Set(key, o)
			case *gwv1.ListenerSet:
				s.ListenerSets.Set(key, o)
			case *gwv1.HTTPRoute:
				s.HTTPRoutes.Set(key, o)
			case *gwv1.GRPCRoute:
				s.GRPCRoutes.Set(key, o)
			case *gwv1beta1.ReferenceGrant:
				s.ReferenceGrants.Set(key, o)
			case *corev1.Service:
				s.Services.Set(key, o)
			case *discoveryv1.EndpointSlice:
				s.EndpointSlices.Set(key, o)
			case *corev1.Secret:
				s.Secrets.Set(key, o)
			default:
				t.Fatalf("unexpected %T", o)
			}
		}
	}
	return s.Build()
}

func keepAll(resource.Kind, metav1.Object) bool { return true }

// translated returns the Services and Secrets of a translation's IR.
func translated(res *gatewayapi.Result) (services, secrets map[types.NamespacedName]bool) {
	services, secrets = map[types.NamespacedName]bool{}, map[types.NamespacedName]bool{}
	for _, gw := range res.Gateways {
		for _, c := range gw.Clusters {
			services[types.NamespacedName{Namespace: c.ServiceNamespace, Name: c.ServiceName}] = true
		}
		for _, s := range gw.Secrets {
			// Named "namespace/name" (resolveCertificate).
			ns, name, _ := strings.Cut(s.Name, "/")
			secrets[types.NamespacedName{Namespace: ns, Name: name}] = true
		}
	}
	return services, secrets
}

var refOpts = gatewayapi.Options{ControllerName: workload.ControllerName}

// TestFilterCoversTranslation: whatever the event filter drops cannot
// change a translation. A snapshot without the Services, EndpointSlices
// and Secrets the filter would not wake the pipeline for translates
// exactly like the whole one, and every Service and Secret in the IR is
// one the filter counts.
func TestFilterCoversTranslation(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 3))
	runs := 150
	if testing.Short() {
		runs = 40
	}
	used := 0
	for run := range runs {
		w := &refWorld{rng: rng}
		objs := w.objects()
		whole := refSnapshot(t, objs, keepAll)
		r := collectRefs(whole)
		res := gatewayapi.Translate(whole, refOpts)
		services, secrets := translated(res)
		for k := range services {
			if !r.service(k) {
				t.Fatalf("run %d: the IR uses Service %s, which the filter does not count (%v)", run, k, r.services)
			}
		}
		for k := range secrets {
			if !r.secret(k) {
				t.Fatalf("run %d: the IR uses Secret %s, which the filter does not count (%v)", run, k, r.secrets)
			}
		}
		used += len(services) + len(secrets)
		filtered := refSnapshot(t, objs, func(k resource.Kind, o metav1.Object) bool {
			key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
			switch k {
			case resource.KindService:
				return r.service(key)
			case resource.KindEndpointSlice:
				return r.service(types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetLabels()[discoveryv1.LabelServiceName]})
			case resource.KindSecret:
				return r.secret(key)
			}
			return true
		})
		if filtered.Services.Len() == whole.Services.Len() || filtered.Secrets.Len() == whole.Secrets.Len() {
			t.Fatalf("run %d: the filter dropped nothing: the unused objects are referenced?", run)
		}
		if got, want := rendered(t, gatewayapi.Translate(filtered, refOpts)), rendered(t, res); !bytes.Equal(got, want) {
			t.Fatalf("run %d: without the objects the filter drops, the translation differs:\n%s\nwant\n%s", run, got, want)
		}
	}
	if used == 0 {
		t.Fatal("no translation used a Service or Secret: the worlds test nothing")
	}
}

// TestFilterEqualsTranslation: when every reference resolves, the filter
// and the translation list the same Services and Secrets.
func TestFilterEqualsTranslation(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	for run := range 40 {
		w := &refWorld{rng: rng, valid: true}
		snap := refSnapshot(t, w.objects(), keepAll)
		r := collectRefs(snap)
		res := gatewayapi.Translate(snap, refOpts)
		services, secrets := translated(res)
		for _, st := range res.StatusSet.All() {
			if st.Route == nil {
				continue
			}
			for _, p := range st.Route.Parents {
				for _, c := range p.Conditions {
					if c.Status != metav1.ConditionTrue {
						t.Fatalf("run %d: %s: in a valid world, %s is %s: %s", run, st.Key(), c.Type, c.Status, c.Message)
					}
				}
			}
		}
		count := func(m map[types.NamespacedName]int) map[types.NamespacedName]bool {
			out := map[types.NamespacedName]bool{}
			for k := range m {
				out[k] = true
			}
			return out
		}
		if want := count(r.services); !maps.Equal(services, want) {
			t.Fatalf("run %d: Services: translation %v, filter %v", run, slices.Sorted(keysOf(services)), slices.Sorted(keysOf(want)))
		}
		if want := count(r.secrets); !maps.Equal(secrets, want) {
			t.Fatalf("run %d: Secrets: translation %v, filter %v", run, slices.Sorted(keysOf(secrets)), slices.Sorted(keysOf(want)))
		}
	}
}

func keysOf(m map[types.NamespacedName]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k.String()) {
				return
			}
		}
	}
}
