package install

import (
	"os/exec"
	"path/filepath"
	"slices"
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
	for _, o := range objs {
		byKind[o.GetKind()] = o
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

	role := typed(t, byKind["Role"], &rbacv1.Role{})
	var names []string
	for _, r := range role.Rules {
		names = append(names, r.ResourceNames...)
	}
	if !slices.Equal(names, []string{"edge-lease"}) {
		t.Errorf("Role names Leases %v, want [edge-lease]", names)
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		var subjects []rbacv1.Subject
		if kind == "ClusterRoleBinding" {
			subjects = typed(t, byKind[kind], &rbacv1.ClusterRoleBinding{}).Subjects
		} else {
			subjects = typed(t, byKind[kind], &rbacv1.RoleBinding{}).Subjects
		}
		if !slices.Equal(subjects, []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "portico", Namespace: "edge"}}) {
			t.Errorf("%s subjects %+v, want ServiceAccount edge/portico", kind, subjects)
		}
	}

	gc := typed(t, byKind["GatewayClass"], &gwv1.GatewayClass{})
	if gc.Spec.ControllerName != "example.com/edge" || gc.Spec.ParametersRef != nil {
		t.Errorf("GatewayClass spec %+v, want controllerName example.com/edge without parametersRef", gc.Spec)
	}
}
