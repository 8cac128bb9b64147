package install

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite charts/portico/crds/ and install.yaml (hack/render-install.sh)")

// TestInstallYAMLIsRenderedChart: install.yaml is exactly what the chart
// renders (a Namespace, then helm template --include-crds).
func TestInstallYAMLIsRenderedChart(t *testing.T) {
	root := repoRoot(t)
	h := helm(t)
	if *update {
		cmd := exec.Command(filepath.Join(root, "hack", "render-install.sh"))
		cmd.Env = append(os.Environ(), "HELM="+h)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("hack/render-install.sh: %v\n%s", err, out)
		}
	}
	cmd := exec.Command(filepath.Join(root, "hack", "render-install.sh"), "--stdout")
	cmd.Env = append(os.Environ(), "HELM="+h)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/render-install.sh --stdout: %v\n%s", err, stderr.String())
	}
	want, err := os.ReadFile(filepath.Join(root, "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("install.yaml is not the rendered chart (run make manifests, or go test ./test/install -run TestInstallYAML -update, and review the diff):\n%s",
			firstDiff(string(want), string(got)))
	}
}

// firstDiff describes the first line where want and got differ.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g || i >= len(wl) || i >= len(gl) {
			return fmt.Sprintf("line %d:\n  install.yaml: %q\n  chart:        %q", i+1, w, g)
		}
	}
	return "(no line differs)"
}

func TestHelmLint(t *testing.T) {
	cmd := exec.Command(helm(t), "lint", "--strict", filepath.Join(repoRoot(t), "charts", "portico"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
}

// TestChartCRDsMatchSources: charts/portico/crds/ holds exactly the pinned
// Gateway API module's standard CRDs (without its ValidatingAdmissionPolicy)
// and config/crd, byte for byte, so they cannot drift.
func TestChartCRDsMatchSources(t *testing.T) {
	root := repoRoot(t)
	out, err := testenv.GoCommand(context.Background(), "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		t.Fatalf("locating sigs.k8s.io/gateway-api: %v", err)
	}
	want := map[string]string{} // file name → source path
	std, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard", "*.yaml"))
	own, _ := filepath.Glob(filepath.Join(root, "config", "crd", "*.yaml"))
	if len(std) == 0 || len(own) == 0 {
		t.Fatalf("no CRD sources: %d standard, %d in config/crd", len(std), len(own))
	}
	for _, f := range append(std, own...) {
		if strings.Contains(filepath.Base(f), "_vap_") {
			continue
		}
		want[filepath.Base(f)] = f
	}
	got, _ := filepath.Glob(filepath.Join(root, "charts", "portico", "crds", "*"))
	gotNames := sets.New[string]()
	for _, f := range got {
		gotNames.Insert(filepath.Base(f))
	}
	wantNames := sets.KeySet(want)
	if !gotNames.Equal(wantNames) {
		t.Fatalf("charts/portico/crds/: missing %v, extra %v (run make manifests)",
			sets.List(wantNames.Difference(gotNames)), sets.List(gotNames.Difference(wantNames)))
	}
	for name, src := range want {
		a, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(root, "charts", "portico", "crds", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("charts/portico/crds/%s differs from %s (run make manifests)", name, src)
		}
		objs, err := readObjects(b)
		if err != nil || len(objs) != 1 || objs[0].GetKind() != "CustomResourceDefinition" {
			t.Errorf("charts/portico/crds/%s: want one CustomResourceDefinition (err %v)", name, err)
		}
	}
	// install.yaml carries every one of them.
	var crds int
	for _, o := range installObjects(t) {
		if o.GetKind() == "CustomResourceDefinition" {
			crds++
		}
	}
	if crds != len(want) {
		t.Errorf("install.yaml has %d CRDs, want %d", crds, len(want))
	}
}

// TestInstallObjects: the set of objects, their namespaces and labels.
func TestInstallObjects(t *testing.T) {
	objs := installObjects(t)
	if o := objs[0]; o.GetKind() != "Namespace" || o.GetName() != Namespace {
		t.Errorf("first object is %s %s, want Namespace %s", o.GetKind(), o.GetName(), Namespace)
	}
	clusterScoped := sets.New("Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "GatewayClass",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
	var kinds []string
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			kinds = append(kinds, o.GetKind()+"/"+o.GetName())
		}
		switch {
		case clusterScoped.Has(o.GetKind()) && o.GetNamespace() != "":
			t.Errorf("%s %s: cluster-scoped object with namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
		case !clusterScoped.Has(o.GetKind()) && o.GetNamespace() != Namespace:
			t.Errorf("%s %s: namespace %q, want %s", o.GetKind(), o.GetName(), o.GetNamespace(), Namespace)
		}
		// The leader sweeps objects labelled as provisioned by Portico
		// whose Gateway is gone: the install must never look like one.
		if o.GetLabels()["app.kubernetes.io/managed-by"] == "portico" {
			t.Errorf("%s %s is labelled app.kubernetes.io/managed-by=portico", o.GetKind(), o.GetName())
		}
	}
	slices.Sort(kinds)
	want := []string{
		"ClusterRole/portico", "ClusterRole/portico-provisioner", "ClusterRoleBinding/portico",
		"ClusterRoleBinding/portico-provisioner", "Deployment/portico",
		"GatewayClass/portico", "Namespace/portico-system", "PodDisruptionBudget/portico",
		"ProxyConfig/portico", "Role/portico-leader-election", "Role/portico-pki",
		"RoleBinding/portico-leader-election", "RoleBinding/portico-pki",
		"Service/portico-xds", "ServiceAccount/portico",
		"ValidatingAdmissionPolicy/portico-writes", "ValidatingAdmissionPolicyBinding/portico-writes",
	}
	if !slices.Equal(kinds, want) {
		t.Errorf("objects besides CRDs:\n got %v\nwant %v", kinds, want)
	}

	gc := typed(t, find(t, "GatewayClass", "portico"), &gwv1.GatewayClass{})
	if gc.Spec.ControllerName != "portico.dev/gateway-controller" {
		t.Errorf("GatewayClass controllerName %q", gc.Spec.ControllerName)
	}
	ref := gc.Spec.ParametersRef
	if ref == nil || ref.Group != "portico.dev" || ref.Kind != "ProxyConfig" || ref.Name != "portico" ||
		ref.Namespace == nil || *ref.Namespace != Namespace {
		t.Errorf("GatewayClass parametersRef %+v, want ProxyConfig %s/portico", ref, Namespace)
	}
	if pc := find(t, "ProxyConfig", "portico"); pc.GetAPIVersion() != "portico.dev/v1alpha1" {
		t.Errorf("ProxyConfig apiVersion %s", pc.GetAPIVersion())
	}
}

// TestInstallDeployment: replicas, PDB, anti-affinity, probes, ports,
// security and the xDS Service.
func TestInstallDeployment(t *testing.T) {
	d := typed(t, find(t, "Deployment", "portico"), &appsv1.Deployment{})
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas %v, want 2", d.Spec.Replicas)
	}
	podLabels := d.Spec.Template.Labels
	sel := d.Spec.Selector.MatchLabels
	if len(sel) == 0 || !subset(sel, podLabels) {
		t.Fatalf("selector %v does not select the pod labels %v", sel, podLabels)
	}
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != "portico" {
		t.Errorf("serviceAccountName %q", pod.ServiceAccountName)
	}

	pdb := typed(t, find(t, "PodDisruptionBudget", "portico"), &policyv1.PodDisruptionBudget{})
	if pdb.Spec.MinAvailable == nil || *pdb.Spec.MinAvailable != intstr.FromInt32(1) {
		t.Errorf("PDB minAvailable %v, want 1", pdb.Spec.MinAvailable)
	}
	if pdb.Spec.Selector == nil || !equality.Semantic.DeepEqual(pdb.Spec.Selector.MatchLabels, sel) {
		t.Errorf("PDB selector %v, want the Deployment's %v", pdb.Spec.Selector, sel)
	}

	var antiAffinity bool
	if a := pod.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			term := w.PodAffinityTerm
			if term.TopologyKey == corev1.LabelHostname && term.LabelSelector != nil &&
				equality.Semantic.DeepEqual(term.LabelSelector.MatchLabels, sel) {
				antiAffinity = true
			}
		}
	}
	if !antiAffinity {
		t.Errorf("no preferred pod anti-affinity on %s for the controller's pods: %+v", corev1.LabelHostname, pod.Affinity)
	}

	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["xds"] != 18000 || ports["admin"] != 19000 {
		t.Errorf("container ports %v, want xds 18000 and admin 19000", ports)
	}
	probe := func(what string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path ||
			(p.HTTPGet.Port != intstr.FromString("admin") && p.HTTPGet.Port != intstr.FromInt32(19000)) {
			t.Errorf("%s probe %+v, want GET %s on the admin port", what, p, path)
		}
	}
	probe("readiness", c.ReadinessProbe, "/readyz")
	probe("liveness", c.LivenessProbe, "/healthz")

	for _, arg := range []string{
		"--namespace=$(POD_NAMESPACE)", "--controller-name=portico.dev/gateway-controller",
		"--xds-address=:18000", "--admin-address=:19000", "--leader-election-id=portico-leader",
	} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %q lack %s", c.Args, arg)
		}
	}
	if len(c.Args) == 0 || c.Args[0] != "controller" {
		t.Errorf("args %q do not start with the controller subcommand", c.Args)
	}
	var downward bool
	for _, e := range c.Env {
		if e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
			e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
			downward = true
		}
	}
	if !downward {
		t.Error("POD_NAMESPACE is not set from metadata.namespace")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("no CPU and memory requests: %v", c.Resources.Requests)
	}

	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("container has no securityContext")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("root filesystem is writable")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("privilege escalation allowed")
	case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("capabilities %+v, want drop ALL", sc.Capabilities)
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Error("container may run as root")
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("seccomp %+v, want RuntimeDefault", sc.SeccompProfile)
	}
	if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v, want runAsNonRoot and seccomp RuntimeDefault", psc)
	}

	ann := d.Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != "19000" || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("pod annotations %v, want Prometheus scraping of :19000/metrics", ann)
	}

	svc := typed(t, find(t, "Service", "portico-xds"), &corev1.Service{})
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || len(svc.Spec.Ports) != 1 ||
		svc.Spec.Ports[0].Port != 18000 || svc.Spec.Ports[0].TargetPort != intstr.FromString("xds") {
		t.Errorf("Service portico-xds %+v, want ClusterIP 18000 → xds", svc.Spec)
	}
	if len(svc.Spec.Selector) == 0 || !subset(svc.Spec.Selector, podLabels) {
		t.Errorf("Service selector %v does not select the pods %v", svc.Spec.Selector, podLabels)
	}
}

func subset(sub, of map[string]string) bool {
	for k, v := range sub {
		if of[k] != v {
			return false
		}
	}
	return true
}

// TestInstallControllerFlags: every flag the Deployment passes is a flag of
// `portico controller`.
func TestInstallControllerFlags(t *testing.T) {
	root := repoRoot(t)
	bin := filepath.Join(t.TempDir(), "portico")
	build := testenv.GoCommand(context.Background(), "build", "-o", bin, "./cmd/portico")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/portico: %v\n%s", err, out)
	}
	var usage bytes.Buffer
	help := exec.Command(bin, "controller", "-h")
	help.Stdout, help.Stderr = &usage, &usage
	_ = help.Run() // -h exits non-zero with the flag package
	d := typed(t, find(t, "Deployment", "portico"), &appsv1.Deployment{})
	args := d.Spec.Template.Spec.Containers[0].Args
	for _, a := range args[1:] {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "--") || !regexp.MustCompile(`(?m)^\s+-`+regexp.QuoteMeta(name)+`\b`).Match(usage.Bytes()) {
			t.Errorf("argument %q is not a flag of portico controller:\n%s", a, usage.String())
		}
	}
}

// TestInstallRBAC: exactly the permissions the controller needs; no
// wildcards; Gateway API objects are only read, except their status; the
// ClusterRole bound to the controller only reads (and writes statuses);
// writes of provisioned objects are a ClusterRole of their own, confined by
// the ValidatingAdmissionPolicy portico-writes (TestInstallWriteGuard);
// the PKI's own Secrets are a Role of the release namespace.
func TestInstallRBAC(t *testing.T) {
	read := []string{"get", "list", "watch"}
	writes := []string{"create", "patch", "delete"}
	grant := func(want sets.Set[string], group string, resources, verbs []string, names ...string) {
		for _, r := range resources {
			for _, v := range verbs {
				want.Insert(perm(group, r, v, names...)...)
			}
		}
	}
	rulesOf := func(where string, rules []rbacv1.PolicyRule) sets.Set[string] {
		got := sets.New[string]()
		for _, r := range rules {
			checkRule(t, where, r)
			for _, g := range r.APIGroups {
				grant(got, g, r.Resources, r.Verbs, r.ResourceNames...)
			}
		}
		return got
	}
	check := func(where string, got, want sets.Set[string]) {
		t.Helper()
		if !got.Equal(want) {
			t.Errorf("%s:\n extra   %v\n missing %v", where, sets.List(got.Difference(want)), sets.List(want.Difference(got)))
		}
	}

	// portico: what translation, the status writer and the reconciler read,
	// and the statuses.
	cr := typed(t, find(t, "ClusterRole", "portico"), &rbacv1.ClusterRole{})
	want := sets.New[string]()
	// Every route kind Portico translates (resource.RouteKinds): read, and
	// its status updated.
	var routes, routeStatus []string
	for _, k := range resource.RouteKinds {
		plural := strings.ToLower(k.String()) + "s"
		routes, routeStatus = append(routes, plural), append(routeStatus, plural+"/status")
	}
	grant(want, "gateway.networking.k8s.io", append([]string{"gatewayclasses", "gateways", "listenersets", "referencegrants", "backendtlspolicies"}, routes...), read)
	// Statuses shared with other controllers (routes' parents, policies'
	// ancestors): update with the resourceVersion read.
	grant(want, "gateway.networking.k8s.io", append(routeStatus, "backendtlspolicies/status"), []string{"update"})
	grant(want, "certificates.k8s.io", []string{"clustertrustbundles"}, read)
	grant(want, "gateway.networking.k8s.io", []string{"gatewayclasses/status", "gateways/status", "listenersets/status"}, []string{"patch"})
	grant(want, "", []string{"namespaces"}, read)
	grant(want, "discovery.k8s.io", []string{"endpointslices"}, read)
	grant(want, "portico.dev", []string{"proxyconfigs"}, read)
	grant(want, "", []string{"services", "configmaps", "serviceaccounts", "secrets"}, read)
	grant(want, "apps", []string{"deployments"}, read)
	grant(want, "policy", []string{"poddisruptionbudgets"}, read)
	grant(want, "autoscaling", []string{"horizontalpodautoscalers"}, read)
	got := rulesOf("ClusterRole portico", cr.Rules)
	check("ClusterRole portico", got, want)
	for _, p := range sets.List(got) {
		res, verb, _ := strings.Cut(p, " ")
		if !strings.HasSuffix(res, "/status") && !slices.Contains(read, verb) {
			t.Errorf("ClusterRole portico writes something else than a status: %s", p)
		}
	}

	// portico-provisioner: the writes of each Gateway's proxies and client
	// certificate, in the Gateway's namespace.
	prov := typed(t, find(t, "ClusterRole", "portico-provisioner"), &rbacv1.ClusterRole{})
	want = sets.New[string]()
	grant(want, "", []string{"services", "configmaps", "serviceaccounts", "secrets"}, writes)
	grant(want, "apps", []string{"deployments"}, writes)
	grant(want, "policy", []string{"poddisruptionbudgets"}, writes)
	grant(want, "autoscaling", []string{"horizontalpodautoscalers"}, writes)
	check("ClusterRole portico-provisioner", rulesOf("ClusterRole portico-provisioner", prov.Rules), want)

	// portico-pki: the CA and serving certificate Secrets, by name (create
	// cannot be limited to names; list and watch with a metadata.name field
	// selector can).
	pkiRole := typed(t, find(t, "Role", "portico-pki"), &rbacv1.Role{})
	want = sets.New[string]()
	grant(want, "", []string{"secrets"}, []string{"create"})
	grant(want, "", []string{"secrets"}, []string{"get", "patch"}, "portico-ca", "portico-xds-tls")
	grant(want, "", []string{"secrets"}, []string{"list", "watch"}, "portico-xds-tls")
	check("Role portico-pki", rulesOf("Role portico-pki", pkiRole.Rules), want)

	role := typed(t, find(t, "Role", "portico-leader-election"), &rbacv1.Role{})
	want = sets.New[string]()
	grant(want, "coordination.k8s.io", []string{"leases"}, []string{"create"})
	grant(want, "coordination.k8s.io", []string{"leases"}, []string{"get", "watch", "update"}, "portico-leader")
	check("Role portico-leader-election", rulesOf("Role portico-leader-election", role.Rules), want)

	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "portico", Namespace: Namespace}
	for _, name := range []string{"portico", "portico-provisioner"} {
		crb := typed(t, find(t, "ClusterRoleBinding", name), &rbacv1.ClusterRoleBinding{})
		if crb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}) ||
			!slices.Equal(crb.Subjects, []rbacv1.Subject{sa}) {
			t.Errorf("ClusterRoleBinding %s: %+v → %+v", name, crb.Subjects, crb.RoleRef)
		}
	}
	for _, name := range []string{"portico-leader-election", "portico-pki"} {
		rb := typed(t, find(t, "RoleBinding", name), &rbacv1.RoleBinding{})
		if rb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}) ||
			!slices.Equal(rb.Subjects, []rbacv1.Subject{sa}) || rb.Namespace != Namespace {
			t.Errorf("RoleBinding %s/%s: %+v → %+v", rb.Namespace, name, rb.Subjects, rb.RoleRef)
		}
	}
	typed(t, find(t, "ServiceAccount", "portico"), &corev1.ServiceAccount{})
}

// TestInstallWriteGuard: the ValidatingAdmissionPolicy portico-writes
// covers every write the provisioner ClusterRole grants, applies to the
// controller's ServiceAccount only, and denies (failing closed).
// TestControllerWithChartRBAC shows what it allows and refuses.
func TestInstallWriteGuard(t *testing.T) {
	vap := typed(t, find(t, "ValidatingAdmissionPolicy", "portico-writes"), &admissionregistrationv1.ValidatingAdmissionPolicy{})
	if vap.Spec.FailurePolicy == nil || *vap.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy %v, want Fail", vap.Spec.FailurePolicy)
	}
	covered := sets.New[string]()
	for _, r := range vap.Spec.MatchConstraints.ResourceRules {
		ops := sets.New[admissionregistrationv1.OperationType](r.Operations...)
		if !ops.HasAll(admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete) {
			t.Errorf("rule %+v does not cover CREATE, UPDATE and DELETE", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				covered.Insert(perm(g, res, "write")...)
			}
		}
	}
	prov := typed(t, find(t, "ClusterRole", "portico-provisioner"), &rbacv1.ClusterRole{})
	for _, r := range prov.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if !covered.HasAny(perm(g, res, "write")...) {
					t.Errorf("the write guard does not cover %s/%s, which portico-provisioner writes", g, res)
				}
			}
		}
	}
	if len(vap.Spec.MatchConditions) != 1 || !strings.Contains(vap.Spec.MatchConditions[0].Expression, "'"+serviceAccount+"'") {
		t.Errorf("matchConditions %+v, want one naming %s", vap.Spec.MatchConditions, serviceAccount)
	}
	b := typed(t, find(t, "ValidatingAdmissionPolicyBinding", "portico-writes"), &admissionregistrationv1.ValidatingAdmissionPolicyBinding{})
	if b.Spec.PolicyName != "portico-writes" || !slices.Equal(b.Spec.ValidationActions, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}) {
		t.Errorf("binding %+v, want policy portico-writes with Deny", b.Spec)
	}
}

// perm names one permission: "group/resource verb", with "[name]" after
// the resource for a rule limited to names.
func perm(group, resource, verb string, names ...string) []string {
	if group == "" {
		group = "core"
	}
	if len(names) == 0 {
		return []string{group + "/" + resource + " " + verb}
	}
	var out []string
	for _, n := range names {
		out = append(out, group+"/"+resource+"["+n+"] "+verb)
	}
	return out
}

// checkRule rejects wildcards, non-resource URLs and verbs that grant more
// than their name says.
func checkRule(t *testing.T, where string, r rbacv1.PolicyRule) {
	t.Helper()
	for _, s := range slices.Concat(r.APIGroups, r.Resources, r.Verbs, r.ResourceNames) {
		if strings.Contains(s, "*") {
			t.Errorf("%s: wildcard %q in %+v", where, s, r)
		}
	}
	if len(r.NonResourceURLs) > 0 {
		t.Errorf("%s: non-resource URLs %v", where, r.NonResourceURLs)
	}
	for _, v := range r.Verbs {
		if v == "escalate" || v == "bind" || v == "impersonate" || v == "deletecollection" {
			t.Errorf("%s: verb %q", where, v)
		}
	}
	if len(r.APIGroups) == 0 || len(r.Resources) == 0 || len(r.Verbs) == 0 {
		t.Errorf("%s: incomplete rule %+v", where, r)
	}
}
