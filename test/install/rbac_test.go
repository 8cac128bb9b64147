package install

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/controller"
	"github.com/portico-dev/portico/internal/provider/kube"
	"github.com/portico-dev/portico/internal/proxyspec"
	"github.com/portico-dev/portico/internal/resource"
)

// serviceAccount is the user the chart's RBAC is granted to.
const serviceAccount = "system:serviceaccount:" + Namespace + ":portico"

// TestControllerWithChartRBAC runs the controller as the chart's
// ServiceAccount (impersonation) with exactly install.yaml's RBAC objects
// and write guard (ValidatingAdmissionPolicy portico-writes), and checks
// that it does its whole job: leader election, the PKI, statuses,
// provisioning and removal of a Gateway's proxies and client certificate,
// without a single forbidden request; that its caches hold no Secret but
// TLS ones; and that it may write no object it did not provision.
func TestControllerWithChartRBAC(t *testing.T) {
	cfg := apiServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	admin, err := client.New(cfg, client.Options{Scheme: kube.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}

	// Exactly the chart's identity, RBAC and write guard, nothing else of
	// install.yaml.
	for _, o := range installObjects(t) {
		switch o.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
			"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			if err := admin.Create(ctx, o.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	}
	as := rest.CopyConfig(cfg)
	as.Impersonate = rest.ImpersonationConfig{UserName: serviceAccount}
	sa, err := client.New(as, client.Options{Scheme: kube.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	checkIdentity(ctx, t, as)
	// RBAC objects take effect asynchronously: wait until both bindings do.
	eventually(t, 30*time.Second, "the chart's RBAC to take effect", func() (bool, string) {
		err1 := sa.List(ctx, &gwv1.GatewayList{})
		err2 := sa.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: "portico-leader"}, &coordinationv1.Lease{})
		if apierrors.IsNotFound(err2) {
			err2 = nil
		}
		return err1 == nil && err2 == nil, fmt.Sprintf("list gateways: %v; get lease: %v", err1, err2)
	})

	waitForWriteGuard(ctx, t, admin, sa)

	f := newWorld(ctx, t, admin)
	// A tenant's Secrets next to the Gateway: a certificate (type
	// kubernetes.io/tls, which Portico watches) and a password (Opaque,
	// which it must never hold), and a Deployment of the tenant's own.
	f.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "tenant-cert"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: []byte("cert"), corev1.TLSPrivateKeyKey: []byte("key")},
	})
	f.create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "tenant-password"},
		StringData: map[string]string{"password": "hunter2"},
	})
	tenantApp := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "tenant-app"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "tenant"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "tenant"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app"}}},
			},
		},
	}
	f.create(tenantApp)
	tenantPDB := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "tenant-app"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)), Selector: tenantApp.Spec.Selector},
	}
	f.create(tenantPDB)
	tenantHPA := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "tenant-app"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 3, ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{
			APIVersion: "apps/v1", Kind: "Deployment", Name: tenantApp.Name}},
	}
	f.create(tenantHPA)
	// Nothing the controller or client-go does may be refused. (Checked
	// after the controller stopped, and also when the test failed.)
	logStart := logs.Offset()
	t.Cleanup(func() {
		lines, _ := logs.Since(logStart)
		var refused []string
		for _, l := range lines {
			if strings.Contains(strings.ToLower(l), "forbidden") {
				refused = append(refused, l)
			}
		}
		if len(refused) > 0 {
			t.Errorf("requests of the controller were refused with the chart's RBAC:\n%s", strings.Join(refused, "\n"))
		}
	})
	c := runController(ctx, t, as, f.controller)
	go fakeControllerManager(ctx, admin, f.ns)

	eventually(t, 60*time.Second, "the controller to lead and write statuses", func() (bool, string) {
		var lease coordinationv1.Lease
		if err := admin.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: "portico-leader"}, &lease); err != nil {
			return false, "lease: " + err.Error()
		}
		if h := ptr.Deref(lease.Spec.HolderIdentity, ""); h != c.Identity() {
			return false, fmt.Sprintf("lease held by %q", h)
		}
		return f.statusesWritten()
	})
	proxies := []client.Object{&corev1.ServiceAccount{}, &corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{},
		&policyv1.PodDisruptionBudget{}, &autoscalingv2.HorizontalPodAutoscaler{}, &corev1.Secret{}}
	name := proxyspec.Name("gw")
	nameOf := func(o client.Object) string {
		if _, ok := o.(*corev1.Secret); ok {
			return proxyspec.ClientCertSecretName("gw")
		}
		return name
	}
	eventually(t, 30*time.Second, "the Gateway's proxies and client certificate, applied by portico", func() (bool, string) {
		for _, o := range proxies {
			if err := admin.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: nameOf(o)}, o); err != nil {
				return false, fmt.Sprintf("%T: %v", o, err)
			}
			if !slices.ContainsFunc(o.GetManagedFields(), func(m metav1.ManagedFieldsEntry) bool {
				return m.Manager == proxyspec.FieldManager && m.Operation == metav1.ManagedFieldsOperationApply
			}) {
				return false, fmt.Sprintf("%T %s not applied by %s", o, name, proxyspec.FieldManager)
			}
		}
		return true, ""
	})

	// Impersonation is in effect: the ServiceAccount may not do what the
	// chart does not grant.
	forbidden(t, "delete a Gateway", sa.Delete(ctx, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "gw"}}))
	var route gwv1.HTTPRoute
	if err := sa.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: "route"}, &route); err != nil {
		t.Fatalf("get HTTPRoute as %s: %v", serviceAccount, err)
	}
	route.Spec.Hostnames = []gwv1.Hostname{"changed.example"}
	forbidden(t, "update an HTTPRoute's spec", sa.Update(ctx, &route))
	forbidden(t, "create a Lease outside its namespace", sa.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "portico-leader"}}))
	forbidden(t, "get another Lease", sa.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: "other"}, &coordinationv1.Lease{}))
	forbidden(t, "create a ClusterRole", sa.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "portico-escalate"}}))
	forbidden(t, "list Pods", sa.List(ctx, &corev1.PodList{}))

	// Its caches hold the tenant's TLS Secret and not the Opaque one.
	snap, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Secrets.Value(resource.Key{Namespace: f.ns, Name: "tenant-cert"}) == nil {
		t.Error("the tenant's TLS Secret is not in the controller's snapshot")
	}
	if snap.Secrets.Value(resource.Key{Namespace: f.ns, Name: "tenant-password"}) != nil {
		t.Error("the tenant's Opaque Secret is in the controller's snapshot")
	}
	for k := range snap.Secrets.Keys() {
		if sec := snap.Secrets.Value(k); sec.Type != corev1.SecretTypeTLS {
			t.Errorf("Secret %s of type %s in the controller's snapshot", k, sec.Type)
		}
	}

	// The write guard: the ServiceAccount may write what Portico
	// provisions, and nothing else, in a Gateway's namespace or its own.
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+proxyspec.LabelManagedBy+`":"`+proxyspec.ManagedByValue+`"}}}`))
	denied(t, "patch a tenant's TLS Secret", sa.Patch(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "tenant-cert"}}, patch))
	denied(t, "delete a tenant's Opaque Secret", sa.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "tenant-password"}}))
	denied(t, "create an Opaque Secret in a tenant's namespace", sa.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "portico-ca"}, StringData: map[string]string{"ca.key": "x"}}))
	denied(t, "create a Secret labelled as Portico's without a Gateway owner", sa.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: proxyspec.ClientCertSecretName("forged"), Labels: proxyspec.Labels(f.ns, "forged")},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: []byte("c"), corev1.TLSPrivateKeyKey: []byte("k")},
	}))
	denied(t, "patch a tenant's Deployment", sa.Patch(ctx, tenantApp.DeepCopy(), patch))
	denied(t, "patch a tenant's PodDisruptionBudget", sa.Patch(ctx, tenantPDB.DeepCopy(), patch))
	denied(t, "delete a tenant's HorizontalPodAutoscaler", sa.Delete(ctx, tenantHPA.DeepCopy()))
	denied(t, "delete a tenant's Service", sa.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "web"}}))
	denied(t, "create another Secret in its own namespace", sa.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "portico-extra"}, StringData: map[string]string{"k": "v"}}))
	for _, n := range []string{"tenant-cert", "tenant-password"} {
		if err := admin.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: n}, &corev1.Secret{}); err != nil {
			t.Errorf("tenant Secret %s: %v", n, err)
		}
	}

	// The Gateway goes: Portico itself removes its proxies (envtest runs no
	// garbage collector).
	if err := admin.Delete(ctx, &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "gw"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the deleted Gateway's proxies and client certificate to be removed", func() (bool, string) {
		for _, o := range proxies {
			err := admin.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: nameOf(o)}, o)
			if !apierrors.IsNotFound(err) {
				return false, fmt.Sprintf("%T %s: %v", o, nameOf(o), err)
			}
		}
		return true, ""
	})
}

// waitForWriteGuard waits until the ValidatingAdmissionPolicy portico-writes
// is in force (policies take effect asynchronously): the ServiceAccount's
// creation of an Opaque Secret in a namespace of no Gateway is denied by it.
// A probe that got through before is deleted again.
func waitForWriteGuard(ctx context.Context, t *testing.T, admin, sa client.Client) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "guard-probe-"}}
	if err := admin.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the write guard to take effect", func() (bool, string) {
		probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "probe"}, StringData: map[string]string{"k": "v"}}
		err := sa.Create(ctx, probe)
		if err == nil {
			_ = admin.Delete(ctx, probe)
			return false, "the probe Secret was created"
		}
		return isGuardDenial(err), fmt.Sprintf("creating the probe Secret: %v", err)
	})
}

// isGuardDenial reports whether err is a denial by portico-writes.
func isGuardDenial(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "portico-writes")
}

// denied checks that a write was refused by the write guard (RBAC allows
// it: the provisioner ClusterRole writes these kinds everywhere).
func denied(t *testing.T, what string, err error) {
	t.Helper()
	if !isGuardDenial(err) {
		t.Errorf("%s as %s: got %v, want a denial by the ValidatingAdmissionPolicy portico-writes", what, serviceAccount, err)
	}
}

// checkIdentity verifies that requests with as are made as the chart's
// ServiceAccount, with a ServiceAccount's groups.
func checkIdentity(ctx context.Context, t *testing.T, as *rest.Config) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(as)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	u := r.Status.UserInfo
	if u.Username != serviceAccount || !slices.Contains(u.Groups, "system:serviceaccounts:"+Namespace) ||
		slices.Contains(u.Groups, "system:masters") {
		t.Fatalf("requests are made as %q %v, want %s with a ServiceAccount's groups", u.Username, u.Groups, serviceAccount)
	}
}

func forbidden(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s as %s: got %v, want Forbidden", what, serviceAccount, err)
	}
}

// runController runs a replica as the ServiceAccount until the test ends,
// with short lease timings and provisioning on (the chart's default).
func runController(ctx context.Context, t *testing.T, as *rest.Config, controllerName string) *controller.Controller {
	t.Helper()
	xdsLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adminLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := controller.New(controller.Options{
		RESTConfig:     as,
		Namespace:      Namespace,
		ControllerName: controllerName,
		LeaseDuration:  4 * time.Second,
		RenewDeadline:  3 * time.Second,
		RetryPeriod:    500 * time.Millisecond,
		Debounce:       20 * time.Millisecond,
		MaxDelay:       200 * time.Millisecond,
		Provision:      true,
		XDSTLS:         true, // as the chart runs it (--xds-tls defaults to true)
		XDSListener:    xdsLis,
		AdminListener:  adminLis,
		Log:            slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, ctx, c)
	return c
}

// runUntilCleanup runs c until the test ends, then stops it and checks
// that it stopped cleanly within 30 s.
func runUntilCleanup(t *testing.T, ctx context.Context, c *controller.Controller) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("controller: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("controller did not stop within 30s")
		}
	})
}

// world is the test's Gateway API objects, in their own namespace with
// their own controller name.
type world struct {
	t          *testing.T
	ctx        context.Context
	c          client.Client
	ns         string
	class      string
	controller string
}

func newWorld(ctx context.Context, t *testing.T, admin client.Client) *world {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	w := &world{t: t, ctx: ctx, c: admin, ns: "rbac-" + id, class: "portico-" + id, controller: "portico.dev/rbac-" + id}
	w.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}})
	// Proxies reachable at their ClusterIP: no load-balancer implementation
	// in envtest. Autoscaled: every kind Portico provisions is written.
	w.create(&v1alpha1.ProxyConfig{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "proxies"},
		Spec: v1alpha1.ProxyConfigSpec{
			Service:     v1alpha1.ProxyService{Type: corev1.ServiceTypeClusterIP, AddressFromClusterIP: true},
			Autoscaling: &v1alpha1.ProxyAutoscaling{MaxReplicas: 3},
		},
	})
	w.create(&gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: w.class},
		Spec: gwv1.GatewayClassSpec{
			ControllerName: gwv1.GatewayController(w.controller),
			ParametersRef: &gwv1.ParametersReference{
				Group: gwv1.Group(v1alpha1.GroupVersion.Group), Kind: v1alpha1.Kind, Name: "proxies",
				Namespace: ptr.To(gwv1.Namespace(w.ns)),
			},
		},
	})
	w.create(&gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "gw"},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: gwv1.ObjectName(w.class),
			Listeners:        []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}},
		},
	})
	w.create(&corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "http", Port: 80, TargetPort: intstr.FromString("http"),
		}}},
	})
	w.create(&discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: w.ns, Name: "web-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
		Endpoints: []discoveryv1.Endpoint{{
			Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
	})
	w.create(&gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "route"},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw"}}},
			Rules: []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
				BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: ptr.To[gwv1.PortNumber](80)},
			}}}}},
		},
	})
	return w
}

func (w *world) create(o client.Object) {
	w.t.Helper()
	if err := w.c.Create(w.ctx, o); err != nil {
		w.t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

// statusesWritten: GatewayClass Accepted, Gateway Accepted and Programmed
// with an address, route Accepted with resolved refs, all at the current
// generation.
func (w *world) statusesWritten() (bool, string) {
	var gc gwv1.GatewayClass
	var gw gwv1.Gateway
	var rt gwv1.HTTPRoute
	if err := errors.Join(
		w.c.Get(w.ctx, types.NamespacedName{Name: w.class}, &gc),
		w.c.Get(w.ctx, types.NamespacedName{Namespace: w.ns, Name: "gw"}, &gw),
		w.c.Get(w.ctx, types.NamespacedName{Namespace: w.ns, Name: "route"}, &rt),
	); err != nil {
		return false, err.Error()
	}
	if !condTrue(gc.Status.Conditions, string(gwv1.GatewayClassConditionStatusAccepted), gc.Generation) {
		return false, fmt.Sprintf("GatewayClass conditions %+v", gc.Status.Conditions)
	}
	if !condTrue(gw.Status.Conditions, string(gwv1.GatewayConditionAccepted), gw.Generation) ||
		!condTrue(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed), gw.Generation) ||
		len(gw.Status.Addresses) == 0 {
		return false, fmt.Sprintf("Gateway conditions %+v, addresses %v", gw.Status.Conditions, gw.Status.Addresses)
	}
	for _, p := range rt.Status.Parents {
		if string(p.ControllerName) == w.controller &&
			condTrue(p.Conditions, string(gwv1.RouteConditionAccepted), rt.Generation) &&
			condTrue(p.Conditions, string(gwv1.RouteConditionResolvedRefs), rt.Generation) {
			return true, ""
		}
	}
	return false, fmt.Sprintf("HTTPRoute parents %+v", rt.Status.Parents)
}

func condTrue(conds []metav1.Condition, typ string, gen int64) bool {
	c := meta.FindStatusCondition(conds, typ)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == gen
}

// fakeControllerManager plays the parts of Kubernetes that envtest lacks,
// for the Deployments and Services of namespace ns: a Deployment's replicas
// become available, a LoadBalancer Service gets an ingress address.
func fakeControllerManager(ctx context.Context, c client.Client, ns string) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var deps appsv1.DeploymentList
		if c.List(ctx, &deps, client.InNamespace(ns)) == nil {
			for i := range deps.Items {
				d := &deps.Items[i]
				n := ptr.Deref(d.Spec.Replicas, 1)
				if d.Status.ObservedGeneration == d.Generation && d.Status.AvailableReplicas == n {
					continue
				}
				d.Status = appsv1.DeploymentStatus{
					ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n,
					ReadyReplicas: n, AvailableReplicas: n,
					Conditions: []appsv1.DeploymentCondition{{
						Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
						LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now(),
					}},
				}
				_ = c.Status().Update(ctx, d)
			}
		}
		var svcs corev1.ServiceList
		if c.List(ctx, &svcs, client.InNamespace(ns)) == nil {
			for i := range svcs.Items {
				s := &svcs.Items[i]
				if s.Spec.Type == corev1.ServiceTypeLoadBalancer && len(s.Status.LoadBalancer.Ingress) == 0 {
					s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
					_ = c.Status().Update(ctx, s)
				}
			}
		}
	}
}

// eventually polls cond until it holds or timeout passes; the failure
// names what was awaited and cond's last explanation.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
