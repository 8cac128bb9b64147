package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/provider/kube"
	"github.com/portico-dev/portico/internal/statustree"
	"github.com/portico-dev/portico/internal/testenv"
)

// appYAML is the HTTPRoute default/app attached to default/gw, sending to
// the Service app (port 80) with one ready endpoint.
const appYAML = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: app
  namespace: default
spec:
  parentRefs:
  - name: gw
  rules:
  - backendRefs:
    - name: app
      port: 80
---
apiVersion: v1
kind: Service
metadata:
  name: app
  namespace: default
spec:
  ports:
  - name: http
    port: 80
    targetPort: 8080
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: app-1
  namespace: default
  labels:
    kubernetes.io/service-name: app
addressType: IPv4
endpoints:
- addresses: [10.0.0.1]
ports:
- name: http
  port: 8080
`

// brokenRouteYAML is an HTTPRoute attached to default/gw whose backend
// Service does not exist.
const brokenRouteYAML = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: broken
  namespace: default
spec:
  parentRefs:
  - name: gw
    sectionName: http
  rules:
  - backendRefs:
    - name: gone
      port: 80
`

func TestStatusFromFiles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "gw.yaml", gatewayYAML)
	writeFile(t, dir, "app.yaml", appYAML)
	writeFile(t, dir, "broken.yaml", brokenRouteYAML)

	const listener = `Gateway default/gw  class portico
  Accepted=True Accepted: the Gateway is valid
  Programmed=True Programmed: the Gateway's configuration was generated
  Listener http  HTTP port 8080  attachedRoutes 2
    Accepted=True Accepted: the listener is valid
    Programmed=True Programmed: the listener's configuration was generated
    ResolvedRefs=True ResolvedRefs: all references are resolved
    Conflicted=False NoConflicts: the listener does not conflict with other listeners
`
	const app = `    HTTPRoute default/app
      Accepted=True Accepted: the route is attached
      ResolvedRefs=True ResolvedRefs: all references are resolved
      backend Service default/app:80  resolved, 1 ready endpoint
`
	const broken = `    HTTPRoute default/broken  sectionName http
      Accepted=True Accepted: the route is attached
    ! ResolvedRefs=False BackendNotFound: Service default/gone does not exist
    ! backend Service default/gone:80  unresolved: BackendNotFound: Service default/gone does not exist
`
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"default namespace", []string{"-f", dir}, listener + app + broken},
		{"gateway by name, flags after it", []string{"gw", "-f", dir}, listener + app + broken},
		{"gateway by namespace/name", []string{"-f", dir, "default/gw"}, listener + app + broken},
		{"one route", []string{"-f", dir, "--route", "httproute/default/broken"}, listener + broken},
		{"one route in -n's namespace", []string{"-f", dir, "-n", "default", "--route", "HTTPRoute/app"}, listener + app},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(append([]string{"status"}, tc.args...), &out, &errb); code != exitOK {
				t.Fatalf("exit %d; stderr:\n%s", code, errb.String())
			}
			if out.String() != tc.want {
				t.Errorf("output:\n%s\nwant:\n%s", out.String(), tc.want)
			}
		})
	}

	t.Run("json", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := run([]string{"status", "-f", dir, "-o", "json", "--route", "HTTPRoute/default/broken"}, &out, &errb); code != exitOK {
			t.Fatalf("exit %d; stderr:\n%s", code, errb.String())
		}
		var tree statustree.Tree
		if err := json.Unmarshal(out.Bytes(), &tree); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		if tree.Source != "files" || len(tree.Gateways) != 1 || len(tree.Gateways[0].Listeners) != 1 || len(tree.Gateways[0].Listeners[0].Routes) != 1 {
			t.Fatalf("tree:\n%s", out.String())
		}
		b := tree.Gateways[0].Listeners[0].Routes[0].Backends
		if len(b) != 1 || b[0].State != statustree.BackendUnresolved || b[0].Reason != "BackendNotFound" {
			t.Errorf("backends = %+v", b)
		}
	})

	t.Run("nothing in another namespace", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := run([]string{"status", "-f", dir, "-n", "other"}, &out, &errb); code != exitOK {
			t.Fatalf("exit %d; stderr:\n%s", code, errb.String())
		}
		if out.Len() != 0 || !strings.Contains(errb.String(), "in namespace other (-A: every namespace)") {
			t.Errorf("stdout %q, stderr %q", out.String(), errb.String())
		}
	})
}

func TestStatusCommandErrors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "gw.yaml", gatewayYAML)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-f", dir, "a", "b"}, exitUsage, "at most one GATEWAY"},
		{[]string{"-f", dir, "a/b/c"}, exitUsage, "want NAME or NAMESPACE/NAME"},
		{[]string{"-f", dir, "-A", "-n", "x"}, exitUsage, "exclude each other"},
		{[]string{"-f", dir, "--route", "Ingress/default/x"}, exitUsage, "unknown kind"},
		{[]string{"-f", dir, "--route", "x"}, exitUsage, "want KIND/NAMESPACE/NAME"},
		{[]string{"-f", dir, "-o", "yaml"}, exitUsage, "must be one of table, json"},
		{[]string{"-f", dir, "--route", "HTTPRoute/default/none"}, exitError, "no HTTPRoute default/none"},
		{[]string{"-f", dir, "default/none"}, exitError, "no Gateway default/none"},
		{[]string{"-f", dir + "/missing"}, exitError, "missing"},
		{[]string{"--kubeconfig", dir + "/no-kubeconfig"}, exitError, "no-kubeconfig"},
	} {
		var out, errb bytes.Buffer
		code := run(append([]string{"status"}, tc.args...), &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.msg) {
			t.Errorf("status %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errb.String(), tc.code, tc.msg)
		}
	}
}

// TestStatusFromCluster runs `portico status` against a real API server
// (envtest) holding objects whose status is set as a controller would: the
// live status is what it prints. The ListenerSet and UDPRoute CRDs are
// removed first: kinds the cluster does not serve are skipped.
func TestStatusFromCluster(t *testing.T) {
	cfg, kubeconfig := testenv.StartAPIServer(t)
	scheme := kube.NewScheme()
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for _, crd := range []string{"listenersets.gateway.networking.k8s.io", "udproutes.gateway.networking.k8s.io"} {
		if err := c.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crd}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "CRD "+crd+" to go", func() bool {
			err := c.Get(ctx, client.ObjectKey{Name: crd}, &apiextensionsv1.CustomResourceDefinition{})
			return apierrors.IsNotFound(err)
		})
	}

	create := func(obj client.Object) {
		t.Helper()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
	// setStatus writes obj's status (set by mutate) through the status
	// subresource.
	setStatus := func(obj client.Object, mutate func()) {
		t.Helper()
		mutate()
		if err := c.Status().Update(ctx, obj); err != nil {
			t.Fatalf("status of %T %s: %v", obj, obj.GetName(), err)
		}
	}
	now := metav1.Now()
	cond := func(typ string, ok bool, reason, msg string, gen int64) metav1.Condition {
		st := metav1.ConditionFalse
		if ok {
			st = metav1.ConditionTrue
		}
		return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: now}
	}
	ptr := func(s string) *string { return &s }

	for _, ns := range []string{"infra", "team"} {
		create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	create(&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "portico"},
		Spec: gwv1.GatewayClassSpec{ControllerName: gatewayControllerName}})
	create(&gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Spec: gwv1.GatewayClassSpec{ControllerName: "example.com/other"}})

	all := gwv1.NamespacesFromAll
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "gw", Namespace: "infra"}, Spec: gwv1.GatewaySpec{
		GatewayClassName: "portico",
		Listeners: []gwv1.Listener{
			{Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 80,
				AllowedRoutes: &gwv1.AllowedRoutes{Namespaces: &gwv1.RouteNamespaces{From: &all}}},
			{Name: "admin", Protocol: gwv1.HTTPProtocolType, Port: 8080},
		},
	}}
	create(gw)
	httpKinds := []gwv1.RouteGroupKind{{Kind: "HTTPRoute"}, {Kind: "GRPCRoute"}}
	listenerStatus := func(name string, attached int32) gwv1.ListenerStatus {
		return gwv1.ListenerStatus{Name: gwv1.SectionName(name), SupportedKinds: httpKinds, AttachedRoutes: attached,
			Conditions: []metav1.Condition{cond("Accepted", true, "Accepted", "the listener is valid", 1), cond("Programmed", true, "Programmed", "generated", 1)}}
	}
	setStatus(gw, func() {
		gw.Status = gwv1.GatewayStatus{
			Conditions: []metav1.Condition{
				cond("Accepted", true, "Accepted", "the Gateway is valid", 1),
				cond("Programmed", true, "Programmed", "the Gateway's configuration was generated", 1),
			},
			Listeners: []gwv1.ListenerStatus{listenerStatus("http", 1), listenerStatus("admin", 0)},
		}
	})
	// A Gateway of another class is not shown.
	create(&gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: "infra"}, Spec: gwv1.GatewaySpec{
		GatewayClassName: "other", Listeners: []gwv1.Listener{{Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 80}}}})

	infra := gwv1.Namespace("infra")
	parent := func(section string) gwv1.ParentReference {
		p := gwv1.ParentReference{Name: "gw", Namespace: &infra}
		if section != "" {
			s := gwv1.SectionName(section)
			p.SectionName = &s
		}
		return p
	}
	backend := func(ns, name string, port int32) gwv1.HTTPBackendRef {
		ref := gwv1.HTTPBackendRef{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{Name: gwv1.ObjectName(name), Port: &port}}}
		if ns != "" {
			n := gwv1.Namespace(ns)
			ref.Namespace = &n
		}
		return ref
	}
	route := func(name string, p gwv1.ParentReference, backends ...gwv1.HTTPBackendRef) *gwv1.HTTPRoute {
		r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"}, Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{p}},
			Rules:           []gwv1.HTTPRouteRule{{BackendRefs: backends}},
		}}
		create(r)
		return r
	}
	entry := func(p gwv1.ParentReference, controller string, conds ...metav1.Condition) gwv1.RouteParentStatus {
		return gwv1.RouteParentStatus{ParentRef: p, ControllerName: gwv1.GatewayController(controller), Conditions: conds}
	}

	app := route("app", parent(""), backend("", "app", 80), backend("backends", "db", 5432))
	setStatus(app, func() {
		app.Status.Parents = []gwv1.RouteParentStatus{
			entry(parent(""), gatewayControllerName,
				cond("Accepted", true, "Accepted", "the route is attached", 1),
				cond("ResolvedRefs", false, "RefNotPermitted", "no ReferenceGrant in namespace backends allows a HTTPRoute of namespace team to use Service backends/db", 1)),
			// Another controller's entry for the same parentRef is not Portico's to show.
			entry(parent(""), "example.com/other", cond("Accepted", false, "NotAllowedByListeners", "not ours", 1)),
		}
	})
	typo := route("typo", parent("htps"), backend("", "app", 80))
	setStatus(typo, func() {
		typo.Status.Parents = []gwv1.RouteParentStatus{entry(parent("htps"), gatewayControllerName,
			cond("Accepted", false, "NoMatchingParent", `Gateway infra/gw has no listener named "htps"`, 1),
			cond("ResolvedRefs", true, "ResolvedRefs", "all references are resolved", 1))}
	})
	route("fresh", parent(""), backend("", "missing", 80)) // no status yet

	create(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "team"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}})
	port := int32(8080)
	create(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "app-1", Namespace: "team", Labels: map[string]string{discoveryv1.LabelServiceName: "app"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("http"), Port: &port}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}, {Addresses: []string{"10.0.0.2"}}},
	})

	const header = `Gateway infra/gw  class portico
  Accepted=True Accepted: the Gateway is valid
  Programmed=True Programmed: the Gateway's configuration was generated
  Listener http  HTTP port 80  attachedRoutes 1
    Accepted=True Accepted: the listener is valid
    Programmed=True Programmed: generated
    HTTPRoute team/app
      Accepted=True Accepted: the route is attached
    ! ResolvedRefs=False RefNotPermitted: no ReferenceGrant in namespace backends allows a HTTPRoute of namespace team to use Service backends/db
      backend Service team/app:80  resolved, 2 ready endpoints
    ! backend Service backends/db:5432  unresolved: RefNotPermitted: no ReferenceGrant in namespace backends allows a HTTPRoute of namespace team to use Service backends/db
`
	const admin = `  Listener admin  HTTP port 8080  attachedRoutes 0
    Accepted=True Accepted: the listener is valid
    Programmed=True Programmed: generated
`
	const unattached = `  Not attached to a listener
    HTTPRoute team/fresh
    ! no status.parents entry of portico.dev/gateway-controller for this parentRef: the controller has not taken the route up (yet)
    ! backend Service team/missing:80  unresolved: BackendNotFound: Service team/missing does not exist
    HTTPRoute team/typo  sectionName htps
    ! Accepted=False NoMatchingParent: Gateway infra/gw has no listener named "htps"
      ResolvedRefs=True ResolvedRefs: all references are resolved
      backend Service team/app:80  resolved, 2 ready endpoints
`
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"every namespace", []string{"-A"}, header + admin + unattached},
		{"the Gateway", []string{"infra/gw"}, header + admin + unattached},
		{"the Gateways of -n", []string{"-n", "infra"}, header + admin + unattached},
		{"one route", []string{"--route", "HTTPRoute/team/typo"}, `Gateway infra/gw  class portico
  Accepted=True Accepted: the Gateway is valid
  Programmed=True Programmed: the Gateway's configuration was generated
  Not attached to a listener
    HTTPRoute team/typo  sectionName htps
    ! Accepted=False NoMatchingParent: Gateway infra/gw has no listener named "htps"
      ResolvedRefs=True ResolvedRefs: all references are resolved
      backend Service team/app:80  resolved, 2 ready endpoints
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := runContext(ctx, append([]string{"status", "--kubeconfig", kubeconfig}, tc.args...), &out, &errb)
			if code != exitOK {
				t.Fatalf("exit %d; stderr:\n%s", code, errb.String())
			}
			if out.String() != tc.want {
				t.Errorf("output:\n%s\nwant:\n%s", out.String(), tc.want)
			}
			if errb.Len() != 0 {
				t.Errorf("stderr: %s", errb.String())
			}
		})
	}

	// The kubeconfig's context namespace ("default" here) is the default:
	// it holds no Gateway.
	var out, errb bytes.Buffer
	if code := runContext(ctx, []string{"status", "--kubeconfig", kubeconfig}, &out, &errb); code != exitOK || out.Len() != 0 ||
		!strings.Contains(errb.String(), "in namespace default") {
		t.Errorf("status without namespace: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := runContext(ctx, []string{"status", "--kubeconfig", kubeconfig, "-o", "json", "infra/gw"}, &out, &errb); code != exitOK {
		t.Fatalf("json: exit %d; stderr:\n%s", code, errb.String())
	}
	var tree statustree.Tree
	if err := json.Unmarshal(out.Bytes(), &tree); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if tree.Source != "cluster" || len(tree.Gateways) != 1 || len(tree.Gateways[0].Unattached) != 2 || !tree.Gateways[0].Unattached[0].NoStatus {
		t.Errorf("json tree:\n%s", out.String())
	}

	// A tenant who may list routes, Services, EndpointSlices and
	// ReferenceGrants in namespace team only, and Gateways in infra: the
	// kinds it may not list everywhere are read where the command line
	// and the route's parentRefs point, and the backend in a namespace it
	// may not read is unknown.
	tenant := tenantKubeconfig(t, ctx, c, cfg.Host, cfg.CAData)
	out.Reset()
	errb.Reset()
	if code := runContext(ctx, []string{"status", "--kubeconfig", tenant, "--route", "HTTPRoute/app"}, &out, &errb); code != exitOK {
		t.Fatalf("tenant: exit %d; stderr:\n%s", code, errb.String())
	}
	const tenantWant = `Gateway infra/gw  class portico
  Accepted=True Accepted: the Gateway is valid
  Programmed=True Programmed: the Gateway's configuration was generated
  Listener http  HTTP port 80  attachedRoutes 1
    Accepted=True Accepted: the listener is valid
    Programmed=True Programmed: generated
    HTTPRoute team/app
      Accepted=True Accepted: the route is attached
    ! ResolvedRefs=False RefNotPermitted: no ReferenceGrant in namespace backends allows a HTTPRoute of namespace team to use Service backends/db
      backend Service team/app:80  resolved, 2 ready endpoints
    ! backend Service backends/db:5432  unknown: the Services of namespace backends could not be read
`
	if out.String() != tenantWant {
		t.Errorf("tenant output:\n%s\nwant:\n%s", out.String(), tenantWant)
	}
	for _, w := range []string{
		"may not list GatewayClasses",
		"may not list Namespaces",
		"may not list HTTPRoutes, GRPCRoutes, TLSRoutes, TCPRoutes in every namespace: read namespace(s) team only",
		"may not list Gateways in every namespace: read namespace(s) infra, team only",
		"may not list Gateways in team",
		"namespace(s) backends: their backends are shown as unknown",
	} {
		if !strings.Contains(errb.String(), w) {
			t.Errorf("tenant stderr lacks %q:\n%s", w, errb.String())
		}
	}
}

// tenantKubeconfig writes a kubeconfig (context namespace team) with the
// token of a ServiceAccount that may list the routes, Services,
// EndpointSlices and ReferenceGrants of namespace team and the Gateways
// of namespace infra, and nothing else.
func tenantKubeconfig(t *testing.T, ctx context.Context, c client.Client, host string, ca []byte) string {
	t.Helper()
	create := func(obj client.Object) {
		t.Helper()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: "team"}}
	create(sa)
	grant := func(ns string, rules ...rbacv1.PolicyRule) {
		create(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns}, Rules: rules})
		create(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "team", Name: "tenant"}}})
	}
	list := []string{"list"}
	grant("team",
		rbacv1.PolicyRule{APIGroups: []string{gwv1.GroupName}, Resources: []string{"httproutes", "grpcroutes", "tlsroutes", "tcproutes", "udproutes", "referencegrants"}, Verbs: list},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: list},
		rbacv1.PolicyRule{APIGroups: []string{discoveryv1.GroupName}, Resources: []string{"endpointslices"}, Verbs: list})
	grant("infra", rbacv1.PolicyRule{APIGroups: []string{gwv1.GroupName}, Resources: []string{"gateways", "listenersets"}, Verbs: list})

	tr := &authenticationv1.TokenRequest{}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: ca}
	kc.AuthInfos["tenant"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["tenant"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "tenant", Namespace: "team"}
	kc.CurrentContext = "tenant"
	path := filepath.Join(t.TempDir(), "tenant-kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	// The bindings take effect asynchronously.
	tc, err := client.New(&rest.Config{Host: host, TLSClientConfig: rest.TLSClientConfig{CAData: ca}, BearerToken: tr.Status.Token}, client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the tenant's Roles to take effect", func() bool {
		return tc.List(ctx, &gwv1.GatewayList{}, client.InNamespace("infra")) == nil &&
			tc.List(ctx, &corev1.ServiceList{}, client.InNamespace("team")) == nil
	})
	return path
}

// gatewayControllerName is Portico's controllerName.
const gatewayControllerName = "portico.dev/gateway-controller"
