package install

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// renderChart renders the chart's templates (no CRDs) with helm template.
func renderChart(t *testing.T, namespace string, set ...string) []*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", "portico", filepath.Join(repoRoot(t), "charts", "portico"), "--namespace", namespace}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := exec.Command(helm(t), args...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("helm template: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("helm template: %v", err)
	}
	objs, err := readObjects(out)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestChartValues: values that go to several objects stay consistent, and
// the toggles and overrides do what values.yaml says.
func TestChartValues(t *testing.T) {
	objs := renderChart(t, "edge", "leaderElection.id=edge-lease", "replicas=3",
		"controllerName=example.com/edge", "podDisruptionBudget.enabled=false",
		"proxyConfig.create=false", "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=pool",
		"affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists")
	byKind := map[string]*unstructured.Unstructured{}
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byKind[o.GetKind()] = o
		byName[o.GetKind()+"/"+o.GetName()] = o
		if ns := o.GetNamespace(); ns != "" && ns != "edge" {
			t.Errorf("%s %s in namespace %q, want the release namespace", o.GetKind(), o.GetName(), ns)
		}
	}
	for _, k := range []string{"PodDisruptionBudget", "ProxyConfig"} {
		if byKind[k] != nil {
			t.Errorf("%s rendered although disabled", k)
		}
	}

	d := typed(t, byKind["Deployment"], &appsv1.Deployment{})
	if *d.Spec.Replicas != 3 {
		t.Errorf("replicas %d, want 3", *d.Spec.Replicas)
	}
	args := d.Spec.Template.Spec.Containers[0].Args
	for _, a := range []string{"--leader-election-id=edge-lease", "--controller-name=example.com/edge"} {
		if !slices.Contains(args, a) {
			t.Errorf("args %q lack %s", args, a)
		}
	}
	if a := d.Spec.Template.Spec.Affinity; a == nil || a.NodeAffinity == nil || a.PodAntiAffinity != nil {
		t.Errorf("affinity %+v, want exactly the override", a)
	}

	role := typed(t, byName["Role/portico-leader-election"], &rbacv1.Role{})
	var names []string
	for _, r := range role.Rules {
		names = append(names, r.ResourceNames...)
	}
	if !slices.Equal(names, []string{"edge-lease"}) {
		t.Errorf("Role names Leases %v, want [edge-lease]", names)
	}
	edgeSA := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "portico", Namespace: "edge"}}
	bindings := 0
	for key, o := range byName {
		var subjects []rbacv1.Subject
		switch o.GetKind() {
		case "ClusterRoleBinding":
			subjects = typed(t, o, &rbacv1.ClusterRoleBinding{}).Subjects
		case "RoleBinding":
			subjects = typed(t, o, &rbacv1.RoleBinding{}).Subjects
		default:
			continue
		}
		bindings++
		if !slices.Equal(subjects, edgeSA) {
			t.Errorf("%s subjects %+v, want ServiceAccount edge/portico", key, subjects)
		}
	}
	if bindings != 4 {
		t.Errorf("%d role bindings, want 4 (portico, portico-provisioner, portico-leader-election, portico-pki)", bindings)
	}
	// The write guard names the release namespace's ServiceAccount.
	vap := byName["ValidatingAdmissionPolicy/portico-writes"]
	if vap == nil {
		t.Fatal("no ValidatingAdmissionPolicy portico-writes")
	}
	if conds, _, _ := unstructured.NestedSlice(vap.Object, "spec", "matchConditions"); len(conds) != 1 ||
		!strings.Contains(fmt.Sprint(conds[0]), "'system:serviceaccount:edge:portico'") {
		t.Errorf("write guard matchConditions %v, want the ServiceAccount edge/portico", conds)
	}

	gc := typed(t, byKind["GatewayClass"], &gwv1.GatewayClass{})
	if gc.Spec.ControllerName != "example.com/edge" || gc.Spec.ParametersRef != nil {
		t.Errorf("GatewayClass spec %+v, want controllerName example.com/edge without parametersRef", gc.Spec)
	}
}

// TestChartWriteGuardToggle: rbac.writeGuard=false leaves the policy out
// (clusters before Kubernetes 1.30), and nothing else changes.
func TestChartWriteGuardToggle(t *testing.T) {
	kinds := func(objs []*unstructured.Unstructured) []string {
		var out []string
		for _, o := range objs {
			out = append(out, o.GetKind()+"/"+o.GetName())
		}
		slices.Sort(out)
		return out
	}
	on := kinds(renderChart(t, "portico-system"))
	off := kinds(renderChart(t, "portico-system", "rbac.writeGuard=false"))
	want := slices.DeleteFunc(slices.Clone(on), func(k string) bool {
		return strings.HasPrefix(k, "ValidatingAdmissionPolicy")
	})
	if len(want) != len(on)-2 {
		t.Errorf("default render has no write guard policy and binding: %v", on)
	}
	if !slices.Equal(off, want) {
		t.Errorf("rbac.writeGuard=false renders %v, want %v", off, want)
	}
}
