package install

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/portico-dev/portico/internal/infra"
	"github.com/portico-dev/portico/internal/proxyspec"
)

// The chart's monitoring objects (values monitoring.*): PodMonitors for the
// controller and the proxies, the Grafana dashboard and the PrometheusRule.
// TestChartMonitoring parses every PromQL expression of the dashboard and
// the rules with Prometheus' own parser and checks that each metric (and
// each label) they use is exported: the controller's by a real controller
// (against the envtest API server, with a proxy connected to its xDS
// server that NACKs, so that every labelled series exists) scraped on its
// admin port's /metrics; Envoy's by a real Envoy that served requests,
// scraped on /stats/prometheus.

// monitoringValues turn every monitoring object on.
var monitoringValues = []string{
	"monitoring.podMonitor.enabled=true",
	"monitoring.proxyPodMonitor.enabled=true",
	"monitoring.dashboards.enabled=true",
	"monitoring.rules.enabled=true",
}

// targetLabels are the labels the Prometheus Operator gives every series
// of a PodMonitor's targets.
var targetLabels = []string{"namespace", "pod", "container", "endpoint", "job", "instance"}

// TestChartMonitoringToggles: each monitoring object is off by default and
// rendered by its own value, with its extra labels.
func TestChartMonitoringToggles(t *testing.T) {
	kinds := func(objs []*unstructured.Unstructured) []string {
		var out []string
		for _, o := range objs {
			switch {
			case o.GetKind() == "PodMonitor", o.GetKind() == "PrometheusRule",
				o.GetKind() == "ConfigMap" && o.GetName() == "portico-dashboard":
				out = append(out, o.GetKind()+"/"+o.GetName())
			}
		}
		sort.Strings(out)
		return out
	}
	if got := kinds(renderChart(t, Namespace)); len(got) != 0 {
		t.Errorf("the default install renders %v, want no monitoring object", got)
	}
	for value, want := range map[string]string{
		"monitoring.podMonitor":      "PodMonitor/portico",
		"monitoring.proxyPodMonitor": "PodMonitor/portico-proxies",
		"monitoring.dashboards":      "ConfigMap/portico-dashboard",
		"monitoring.rules":           "PrometheusRule/portico",
	} {
		objs := renderChart(t, Namespace, value+".enabled=true", value+".labels.release=prom")
		if got := kinds(objs); !slices.Equal(got, []string{want}) {
			t.Errorf("%s.enabled=true renders %v, want [%s]", value, got, want)
		}
		for _, o := range objs {
			if o.GetKind()+"/"+o.GetName() == want && o.GetLabels()["release"] != "prom" {
				t.Errorf("%s: labels %v lack %s.labels", want, o.GetLabels(), value)
			}
		}
	}
	objs := renderChart(t, Namespace, "monitoring.dashboards.enabled=true", "monitoring.dashboards.namespace=grafana",
		"monitoring.dashboards.label=dashboards", "monitoring.dashboards.labelValue=portico")
	cm := findObject(t, objs, "ConfigMap", "portico-dashboard")
	if cm.GetNamespace() != "grafana" || cm.GetLabels()["dashboards"] != "portico" {
		t.Errorf("dashboard ConfigMap in %q with labels %v, want namespace grafana and dashboards=portico", cm.GetNamespace(), cm.GetLabels())
	}
}

func TestChartMonitoring(t *testing.T) {
	objs := renderChart(t, Namespace, monitoringValues...)
	deploy := typed(t, findObject(t, objs, "Deployment", "portico"), &appsv1.Deployment{})
	ctrlMon := findObject(t, objs, "PodMonitor", "portico")
	proxyMon := findObject(t, objs, "PodMonitor", "portico-proxies")
	checkControllerPodMonitor(t, ctrlMon, deploy)

	queries := ruleQueries(t, findObject(t, objs, "PrometheusRule", "portico"))
	queries = append(queries, dashboardQueries(t, findObject(t, objs, "ConfigMap", "portico-dashboard"))...)
	uses := parseQueries(t, queries)
	var ctrlNames, envoyNames []string
	for name := range uses.metrics {
		switch {
		case strings.HasPrefix(name, "portico_"):
			ctrlNames = append(ctrlNames, name)
		case strings.HasPrefix(name, "envoy_"):
			envoyNames = append(envoyNames, name)
		default:
			t.Errorf("%s (%s): neither the controller's (portico_*) nor Envoy's (envoy_*)", name, uses.where(name))
		}
	}
	sort.Strings(ctrlNames)
	sort.Strings(envoyNames)
	t.Logf("controller metrics queried: %v", ctrlNames)
	t.Logf("Envoy metrics queried: %v", envoyNames)
	if len(ctrlNames) == 0 || len(envoyNames) == 0 {
		t.Fatalf("queries use controller metrics %v and Envoy metrics %v, want both", ctrlNames, envoyNames)
	}

	t.Run("controller", func(t *testing.T) {
		fams, proxyDeploy := scrapeController(t)
		checkProxyPodMonitor(t, proxyMon, proxyDeploy)
		uses.check(t, "the controller's /metrics", ctrlNames, fams, targetLabels)
	})
	t.Run("envoy", func(t *testing.T) {
		fams := scrapeEnvoy(t)
		uses.check(t, "Envoy's /stats/prometheus", envoyNames, fams, append(relabelTargets(t, proxyMon), targetLabels...))
	})
}

func findObject(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

// podMonitor is the part of a monitoring.coreos.com/v1 PodMonitor the
// chart sets.
type podMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		NamespaceSelector struct {
			Any        bool     `json:"any"`
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		PodMetricsEndpoints []struct {
			Port        string `json:"port"`
			Path        string `json:"path"`
			Interval    string `json:"interval"`
			Relabelings []struct {
				SourceLabels []string `json:"sourceLabels"`
				Separator    string   `json:"separator"`
				TargetLabel  string   `json:"targetLabel"`
			} `json:"relabelings"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

func decodePodMonitor(t *testing.T, u *unstructured.Unstructured) podMonitor {
	t.Helper()
	var pm podMonitor
	typed(t, u, &pm)
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("PodMonitor %s: %d endpoints, want 1", u.GetName(), len(pm.Spec.PodMetricsEndpoints))
	}
	if _, err := model.ParseDuration(pm.Spec.PodMetricsEndpoints[0].Interval); err != nil {
		t.Errorf("PodMonitor %s: interval: %v", u.GetName(), err)
	}
	return pm
}

// checkControllerPodMonitor: the PodMonitor selects the Deployment's Pods
// in the release namespace and scrapes the path of their scrape
// annotations on their admin port.
func checkControllerPodMonitor(t *testing.T, u *unstructured.Unstructured, d *appsv1.Deployment) {
	t.Helper()
	pm := decodePodMonitor(t, u)
	if !subset(pm.Spec.Selector.MatchLabels, d.Spec.Template.Labels) || len(pm.Spec.Selector.MatchLabels) == 0 {
		t.Errorf("controller PodMonitor selects %v, the Pods have %v", pm.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	if pm.Spec.NamespaceSelector.Any || !slices.Equal(pm.Spec.NamespaceSelector.MatchNames, []string{Namespace}) {
		t.Errorf("controller PodMonitor namespaces %+v, want [%s]", pm.Spec.NamespaceSelector, Namespace)
	}
	ep := pm.Spec.PodMetricsEndpoints[0]
	ann := d.Spec.Template.Annotations
	var port int32
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == ep.Port {
			port = p.ContainerPort
		}
	}
	if port == 0 || fmt.Sprint(port) != ann["prometheus.io/port"] || ep.Path != ann["prometheus.io/path"] || ep.Path != "/metrics" {
		t.Errorf("controller PodMonitor scrapes port %q (%d) path %q; the Pods' scrape annotations say %v", ep.Port, port, ep.Path, ann)
	}
}

// checkProxyPodMonitor: the PodMonitor selects the Pods of a proxy
// Deployment the controller provisioned, in any namespace, on their
// metrics port and path, and its relabelings read Pod labels they have.
func checkProxyPodMonitor(t *testing.T, u *unstructured.Unstructured, d *appsv1.Deployment) {
	t.Helper()
	pm := decodePodMonitor(t, u)
	pod := d.Spec.Template
	if !subset(pm.Spec.Selector.MatchLabels, pod.Labels) || len(pm.Spec.Selector.MatchLabels) == 0 {
		t.Errorf("proxy PodMonitor selects %v, the provisioned Pods have %v", pm.Spec.Selector.MatchLabels, pod.Labels)
	}
	// It must not select the controller's own Pods.
	if subset(pm.Spec.Selector.MatchLabels, map[string]string{"app.kubernetes.io/name": "portico", "app.kubernetes.io/instance": "portico"}) {
		t.Errorf("proxy PodMonitor selector %v also selects the controller", pm.Spec.Selector.MatchLabels)
	}
	if !pm.Spec.NamespaceSelector.Any {
		t.Errorf("proxy PodMonitor namespaces %+v, want any (the proxies are in their Gateways' namespaces)", pm.Spec.NamespaceSelector)
	}
	ep := pm.Spec.PodMetricsEndpoints[0]
	found := false
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == ep.Port && fmt.Sprint(p.ContainerPort) == pod.Annotations["prometheus.io/port"] {
				found = true
			}
		}
	}
	if !found || ep.Path != pod.Annotations["prometheus.io/path"] || ep.Path != infra.MetricsPath {
		t.Errorf("proxy PodMonitor scrapes port %q path %q; the provisioned Pod has annotations %v, containers %+v",
			ep.Port, ep.Path, pod.Annotations, pod.Spec.Containers)
	}
	sanitize := regexp.MustCompile(`[^a-zA-Z0-9_]`)
	podLabels := map[string]string{}
	for k, v := range pod.Labels {
		podLabels["__meta_kubernetes_pod_label_"+sanitize.ReplaceAllString(k, "_")] = v
	}
	for _, r := range ep.Relabelings {
		var values []string
		for _, s := range r.SourceLabels {
			v, ok := podLabels[s]
			if !ok {
				t.Errorf("proxy PodMonitor relabeling reads %s, which the provisioned Pods lack (labels %v)", s, pod.Labels)
			}
			values = append(values, v)
		}
		if r.TargetLabel == "gateway" {
			if got, want := strings.Join(values, r.Separator), d.Namespace+"/"+pod.Labels[proxyspec.LabelGatewayName]; got != want {
				t.Errorf("proxy PodMonitor sets gateway=%q, want %q (the controller's gateway label)", got, want)
			}
		}
	}
}

// relabelTargets are the labels a PodMonitor's relabelings add.
func relabelTargets(t *testing.T, u *unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, ep := range decodePodMonitor(t, u).Spec.PodMetricsEndpoints {
		for _, r := range ep.Relabelings {
			out = append(out, r.TargetLabel)
		}
	}
	return out
}

// query is one PromQL expression of the rules or the dashboard.
type query struct {
	where string // "rule PorticoNoLeader", "panel NACKs (B)"
	expr  string
	// label, for a Grafana label_values() variable, is the label whose
	// values it lists.
	label string
}

func ruleQueries(t *testing.T, u *unstructured.Unstructured) []query {
	t.Helper()
	var pr struct {
		metav1.TypeMeta   `json:",inline"`
		metav1.ObjectMeta `json:"metadata"`
		Spec              struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []struct {
					Alert       string            `json:"alert"`
					Expr        string            `json:"expr"`
					For         string            `json:"for"`
					Labels      map[string]string `json:"labels"`
					Annotations map[string]string `json:"annotations"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	typed(t, u, &pr)
	var out []query
	alerts := map[string]bool{}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			if r.For != "" {
				if _, err := model.ParseDuration(r.For); err != nil {
					t.Errorf("rule %s: for: %v", r.Alert, err)
				}
			}
			if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("rule %s: want a severity label, a summary and a description", r.Alert)
			}
			out = append(out, query{where: "rule " + r.Alert, expr: r.Expr})
		}
	}
	for _, a := range []string{"PorticoProxyNACK", "PorticoProxyStale", "PorticoNoLeader", "PorticoStatusBacklog"} {
		if !alerts[a] {
			t.Errorf("no alert %s", a)
		}
	}
	return out
}

type dashboardPanel struct {
	ID      int              `json:"id"`
	Type    string           `json:"type"`
	Title   string           `json:"title"`
	Panels  []dashboardPanel `json:"panels"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Datasource struct {
		UID string `json:"uid"`
	} `json:"datasource"`
}

var labelValues = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

func dashboardQueries(t *testing.T, u *unstructured.Unstructured) []query {
	t.Helper()
	data, _, _ := unstructured.NestedStringMap(u.Object, "data")
	if len(data) != 1 || data["portico.json"] == "" {
		t.Fatalf("dashboard ConfigMap data keys %v, want portico.json", slices.Collect(maps.Keys(data)))
	}
	var dash struct {
		UID        string           `json:"uid"`
		Title      string           `json:"title"`
		Panels     []dashboardPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name       string          `json:"name"`
				Type       string          `json:"type"`
				Definition string          `json:"definition"`
				Query      json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal([]byte(data["portico.json"]), &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Errorf("dashboard uid %q, title %q", dash.UID, dash.Title)
	}
	var out []query
	vars := map[string]bool{"__rate_interval": true, "__interval": true, "__range": true}
	for _, v := range dash.Templating.List {
		vars[v.Name] = true
		if v.Type != "query" {
			continue
		}
		q := v.Definition
		var obj struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &obj); err == nil && obj.Query != "" {
			q = obj.Query
		} else if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Errorf("variable %s: query %s", v.Name, v.Query)
		}
		m := labelValues.FindStringSubmatch(strings.TrimSpace(q))
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(<selector>, <label>)", v.Name, q)
			continue
		}
		out = append(out, query{where: "variable " + v.Name, expr: m[1], label: m[2]})
	}
	ids := map[int]string{}
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			if prev, dup := ids[p.ID]; dup {
				t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: %d targets, datasource %q; want targets on ${datasource}", p.Title, len(p.Targets), p.Datasource.UID)
			}
			for _, tg := range p.Targets {
				out = append(out, query{where: fmt.Sprintf("panel %q (%s)", p.Title, tg.RefID), expr: tg.Expr})
			}
		}
	}
	walk(dash.Panels)
	// Grafana's variables are substituted before Prometheus sees a
	// query: durations for the interval variables, a value elsewhere
	// (the dashboard uses them only in label values and ranges).
	varRef := regexp.MustCompile(`\$\{?([a-zA-Z_][a-zA-Z0-9_]*)\}?`)
	for i := range out {
		out[i].expr = varRef.ReplaceAllStringFunc(out[i].expr, func(ref string) string {
			name := varRef.FindStringSubmatch(ref)[1]
			if !vars[name] {
				t.Errorf("%s: undefined variable %s", out[i].where, ref)
			}
			if strings.HasPrefix(name, "__") {
				return "5m"
			}
			return "x"
		})
	}
	return out
}

// uses are the metrics and labels the queries use.
type uses struct {
	metrics map[string][]string // metric → where
	// selectorLabels: per metric, the labels its selectors match on.
	selectorLabels map[string]map[string][]string // metric → label → where
	// groupings: labels an aggregation keeps (by) or a variable lists,
	// which one of the metrics below it must have.
	groupings []grouping
}

type grouping struct {
	where   string
	labels  []string
	metrics []string
}

func (u *uses) where(metric string) string {
	return strings.Join(slices.Compact(u.metrics[metric]), ", ")
}

// parseQueries parses each query with the PromQL parser and collects the
// metrics of its vector selectors and the labels it matches and groups by.
func parseQueries(t *testing.T, qs []query) *uses {
	t.Helper()
	u := &uses{metrics: map[string][]string{}, selectorLabels: map[string]map[string][]string{}}
	for _, q := range qs {
		expr, err := parser.ParseExpr(q.expr)
		if err != nil {
			t.Errorf("%s: %q: %v", q.where, q.expr, err)
			continue
		}
		names := selectedMetrics(expr)
		if len(names) == 0 {
			t.Errorf("%s: %q selects no metric by name", q.where, q.expr)
		}
		if q.label != "" {
			u.groupings = append(u.groupings, grouping{q.where, []string{q.label}, names})
		}
		parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
			switch n := n.(type) {
			case *parser.VectorSelector:
				name := selectorName(n)
				if name == "" {
					return nil
				}
				u.metrics[name] = append(u.metrics[name], q.where)
				if u.selectorLabels[name] == nil {
					u.selectorLabels[name] = map[string][]string{}
				}
				for _, m := range n.LabelMatchers {
					if m.Name != model.MetricNameLabel {
						u.selectorLabels[name][m.Name] = append(u.selectorLabels[name][m.Name], q.where)
					}
				}
			case *parser.AggregateExpr:
				if !n.Without && len(n.Grouping) > 0 {
					u.groupings = append(u.groupings, grouping{q.where, n.Grouping, selectedMetrics(n.Expr)})
				}
			case *parser.BinaryExpr:
				if vm := n.VectorMatching; vm != nil && vm.On && len(vm.MatchingLabels) > 0 {
					u.groupings = append(u.groupings, grouping{q.where, vm.MatchingLabels, selectedMetrics(n)})
				}
			}
			return nil
		})
	}
	return u
}

func selectorName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			return m.Value
		}
	}
	return ""
}

func selectedMetrics(n parser.Node) []string {
	var out []string
	parser.Inspect(n, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if name := selectorName(vs); name != "" && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
		return nil
	})
	return out
}

// family is what a scrape says of a metric name: its type and labels.
type family struct {
	typ    dto.MetricType
	labels map[string]bool
}

// families indexes scraped metric families: histogram series
// (<name>_bucket with le, _sum, _count) and summaries' _sum and _count
// under their own names, so that a query's name is looked up as such.
func families(mfs map[string]*dto.MetricFamily) map[string]family {
	out := map[string]family{}
	for name, mf := range mfs {
		labels := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = true
			}
		}
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			bucket := maps.Clone(labels)
			bucket["le"] = true
			out[name+"_bucket"] = family{mf.GetType(), bucket}
			out[name+"_sum"] = family{mf.GetType(), labels}
			out[name+"_count"] = family{mf.GetType(), labels}
		case dto.MetricType_SUMMARY:
			quantile := maps.Clone(labels)
			quantile["quantile"] = true
			out[name] = family{mf.GetType(), quantile}
			out[name+"_sum"] = family{mf.GetType(), labels}
			out[name+"_count"] = family{mf.GetType(), labels}
		default:
			out[name] = family{mf.GetType(), labels}
		}
	}
	return out
}

// check fails the test for each of names that the scrape mfs (of what)
// does not export, and for each label the queries use on them that its
// series lack (but for extra, the labels of the scrape's targets).
func (u *uses) check(t *testing.T, what string, names []string, mfs map[string]*dto.MetricFamily, extra []string) {
	t.Helper()
	fams := families(mfs)
	labelOK := func(name, label string) bool {
		return slices.Contains(extra, label) || fams[name].labels[label]
	}
	for _, name := range names {
		f, ok := fams[name]
		if !ok {
			if b, ok := fams[name+"_bucket"]; ok && b.typ == dto.MetricType_HISTOGRAM {
				t.Errorf("%s, queried by %s, is a histogram: its series are %[1]s_bucket, _sum and _count", name, u.where(name))
				continue
			}
			t.Errorf("%s, queried by %s, is not exported: not in %s", name, u.where(name), what)
			continue
		}
		for label, where := range u.selectorLabels[name] {
			if !labelOK(name, label) {
				t.Errorf("%s: label %s, matched by %s, is not a label of %s in %s (labels %v)",
					name, label, strings.Join(slices.Compact(where), ", "), name, what, slices.Sorted(maps.Keys(f.labels)))
			}
		}
	}
	for _, g := range u.groupings {
		var mine []string
		for _, m := range g.metrics {
			if slices.Contains(names, m) {
				mine = append(mine, m)
			}
		}
		if len(mine) == 0 {
			continue // another scrape's metrics
		}
		for _, label := range g.labels {
			if !slices.ContainsFunc(mine, func(m string) bool { return labelOK(m, label) }) {
				t.Errorf("%s: groups by %s, a label of none of %v in %s", g.where, label, mine, what)
			}
		}
	}
}
