package install

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestChartDebugServer: by default the chart exposes only the xDS and
// admin (probes, metrics) ports, keeps /debug on loopback in the Pod and
// grants no token or access reviews; debug.expose=true serves /debug on
// the Pod's interfaces (port "debug", in no Service) with the RBAC its
// authentication needs and a reader ClusterRole.
func TestChartDebugServer(t *testing.T) {
	type rendered struct {
		args     []string
		ports    map[string]int32
		service  []corev1.ServicePort
		clusterR map[string]*rbacv1.ClusterRole
		roles    map[string]*rbacv1.Role
		bindings map[string]*rbacv1.ClusterRoleBinding
	}
	render := func(set ...string) rendered {
		r := rendered{ports: map[string]int32{}, clusterR: map[string]*rbacv1.ClusterRole{}, roles: map[string]*rbacv1.Role{}, bindings: map[string]*rbacv1.ClusterRoleBinding{}}
		for _, o := range renderChart(t, Namespace, set...) {
			switch o.GetKind() {
			case "Deployment":
				d := typed(t, o, &appsv1.Deployment{})
				c := d.Spec.Template.Spec.Containers[0]
				r.args = c.Args
				for _, p := range c.Ports {
					r.ports[p.Name] = p.ContainerPort
				}
			case "Service":
				r.service = append(r.service, typed(t, o, &corev1.Service{}).Spec.Ports...)
			case "ClusterRole":
				r.clusterR[o.GetName()] = typed(t, o, &rbacv1.ClusterRole{})
			case "Role":
				r.roles[o.GetName()] = typed(t, o, &rbacv1.Role{})
			case "ClusterRoleBinding":
				r.bindings[o.GetName()] = typed(t, o, &rbacv1.ClusterRoleBinding{})
			}
		}
		return r
	}
	grants := func(roles map[string]*rbacv1.ClusterRole, group, resource string) bool {
		for _, cr := range roles {
			for _, rule := range cr.Rules {
				if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) && slices.Contains(rule.Verbs, "create") {
					return true
				}
			}
		}
		return false
	}

	def := render()
	if !slices.Contains(def.args, "--debug-address=127.0.0.1:19001") || slices.Contains(def.args, "--debug-pprof") {
		t.Errorf("default args %q, want --debug-address=127.0.0.1:19001 and no --debug-pprof", def.args)
	}
	if len(def.ports) != 2 || def.ports["xds"] != 18000 || def.ports["admin"] != 19000 {
		t.Errorf("default container ports %v, want only xds and admin", def.ports)
	}
	if grants(def.clusterR, "authentication.k8s.io", "tokenreviews") || grants(def.clusterR, "authorization.k8s.io", "subjectaccessreviews") {
		t.Error("the default install grants token or access reviews it does not need")
	}

	exp := render("debug.expose=true", "debug.port=19101", "debug.pprof=true")
	for _, a := range []string{"--debug-address=:19101", "--debug-pprof", "--admin-address=:19000"} {
		if !slices.Contains(exp.args, a) {
			t.Errorf("debug.expose args %q lack %s", exp.args, a)
		}
	}
	if exp.ports["debug"] != 19101 || exp.ports["admin"] != 19000 {
		t.Errorf("debug.expose container ports %v, want debug 19101 next to admin", exp.ports)
	}
	for _, p := range exp.service {
		if p.TargetPort.String() == "debug" || p.Port == 19101 {
			t.Errorf("a Service exposes the debug port: %+v", p)
		}
	}
	if !grants(exp.clusterR, "authentication.k8s.io", "tokenreviews") || !grants(exp.clusterR, "authorization.k8s.io", "subjectaccessreviews") {
		t.Errorf("debug.expose does not grant tokenreviews and subjectaccessreviews create: %v", exp.clusterR)
	}
	b := exp.bindings["portico-debug-auth"]
	if b == nil || b.RoleRef.Name != "portico-debug-auth" || len(b.Subjects) != 1 || b.Subjects[0].Name != "portico" || b.Subjects[0].Namespace != Namespace {
		t.Errorf("binding portico-debug-auth = %+v, want the controller's ServiceAccount", b)
	}
	reader := exp.clusterR["portico-debug-reader"]
	if reader == nil || len(reader.Rules) != 1 || !slices.Equal(reader.Rules[0].NonResourceURLs, []string{"/debug/*"}) ||
		!slices.Equal(reader.Rules[0].Verbs, []string{"get"}) {
		t.Errorf("ClusterRole portico-debug-reader = %+v, want get on /debug/*", reader)
	}
	// proxy-status --cluster finds the Pods and port-forwards to them.
	if r := exp.roles["portico-debug-reader"]; r == nil || r.Namespace != Namespace || len(r.Rules) != 2 ||
		!slices.Equal(r.Rules[0].Resources, []string{"pods"}) || !slices.Equal(r.Rules[1].Resources, []string{"pods/portforward"}) ||
		!slices.Equal(r.Rules[1].Verbs, []string{"create"}) {
		t.Errorf("Role portico-debug-reader = %+v, want list pods and create pods/portforward in the release namespace", r)
	}
	// The leader reads its peers' /debug/proxies (proxy sync) with its
	// own token.
	peer := exp.clusterR["portico-peer-proxies"]
	if peer == nil || len(peer.Rules) != 1 || !slices.Equal(peer.Rules[0].NonResourceURLs, []string{"/debug/proxies"}) ||
		exp.bindings["portico-peer-proxies"] == nil {
		t.Errorf("debug.expose does not let the controller read its peers' /debug/proxies: %+v", peer)
	}
	for name := range exp.bindings {
		if strings.Contains(name, "reader") {
			t.Errorf("the chart binds the reader role (%s): who may read is the operator's choice", name)
		}
	}
}
