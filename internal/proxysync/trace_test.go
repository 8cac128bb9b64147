package proxysync

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// traceTable is a Tracer over a fixed map of resource name → routes,
// recording what it was asked.
type traceTable struct {
	routes map[string][]RouteRef
	asked  [][]string
}

func (tt *traceTable) trace(_, _ string, resources []string, errText string) []RouteRef {
	tt.asked = append(tt.asked, resources)
	var out []RouteRef
	for _, r := range resources {
		out = append(out, tt.routes[r]...)
	}
	if strings.Contains(errText, "httproute/team/quoted/rule/0") {
		out = append(out, RouteRef{"HTTPRoute", "team", "quoted"})
	}
	return out
}

func nackIssue(node string, delta bool, errText string, resources ...string) Issue {
	return Issue{NodeID: node, Replica: "a", Type: "CDS", Nack: &Nack{Version: "v2", Error: errText, Time: time.Unix(1, 0)},
		Resources: resources, Delta: delta}
}

func TestTraceRoutes(t *testing.T) {
	tt := &traceTable{routes: map[string][]RouteRef{
		"team/api/80": {{"HTTPRoute", "team", "api"}, {"GRPCRoute", "team", "rpc"}},
		"team/web/80": {{"HTTPRoute", "team", "web"}},
	}}
	gw := types.NamespacedName{Namespace: "infra", Name: "gw"}
	for _, tc := range []struct {
		name  string
		issue Issue
		want  []RouteRef
	}{
		{"names in the error win over the delta's resources",
			nackIssue("p1", true, "Error adding/updating cluster(s) team/api/80: bad", "team/api/80", "team/web/80"),
			[]RouteRef{{"HTTPRoute", "team", "api"}, {"GRPCRoute", "team", "rpc"}}},
		{"delta without a name in the error: what the responses changed",
			nackIssue("p1", true, "something is wrong", "team/web/80"),
			[]RouteRef{{"HTTPRoute", "team", "web"}}},
		{"state of the world without a name in the error: no route is blamed",
			nackIssue("p1", false, "something is wrong", "team/api/80", "team/web/80"),
			nil},
		{"a route name quoted in the error",
			nackIssue("p1", false, "route httproute/team/quoted/rule/0/match/0: invalid regex"),
			[]RouteRef{{"HTTPRoute", "team", "quoted"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sums := map[string]*Summary{"infra/gw": {Proxies: 2, Nacked: []Issue{tc.issue}}, "infra/ok": {Proxies: 1}}
			got := TraceRoutes(sums, tt.trace)
			var refs []RouteRef
			for _, r := range tc.want {
				refs = append(refs, r)
				cs := got[r]
				if len(cs) != 1 || cs[0].Gateway != gw {
					t.Fatalf("%s: conditions %+v, want one for %s", r, cs, gw)
				}
				c := cs[0].Condition
				if c.Type != ConditionType || c.Status != metav1.ConditionFalse || c.Reason != ReasonRejected ||
					!strings.Contains(c.Message, "Proxy p1 (replica a) of Gateway infra/gw rejected CDS version v2") ||
					!strings.Contains(c.Message, tc.issue.Nack.Error) {
					t.Errorf("%s: condition %+v", r, c)
				}
			}
			if len(got) != len(refs) {
				t.Errorf("traced %d routes (%v), want %v", len(got), got, refs)
			}
		})
	}
	if len(tt.asked) != 4 {
		t.Errorf("tracer asked %d times, want once per NACK (Gateways without a NACK are not traced)", len(tt.asked))
	}
}

// A route traced by two proxies' NACKs gets one condition, the first
// proxy's; one NACK never gives more than MaxTracedRoutes conditions.
func TestTraceRoutesOncePerRouteAndBounded(t *testing.T) {
	tt := &traceTable{routes: map[string][]RouteRef{"team/api/80": {{"HTTPRoute", "team", "api"}}}}
	for i := range MaxTracedRoutes + 10 {
		tt.routes["team/big/80"] = append(tt.routes["team/big/80"], RouteRef{"HTTPRoute", "team", fmt.Sprintf("r%04d", i)})
	}
	sums := map[string]*Summary{"infra/gw": {Proxies: 3, Nacked: []Issue{
		nackIssue("p1", true, "x", "team/api/80"),
		nackIssue("p2", true, "y", "team/api/80"),
	}}}
	got := TraceRoutes(sums, tt.trace)
	cs := got[RouteRef{"HTTPRoute", "team", "api"}]
	if len(cs) != 1 || !strings.Contains(cs[0].Condition.Message, "Proxy p1 ") {
		t.Errorf("conditions %+v, want p1's only", cs)
	}
	sums = map[string]*Summary{"infra/gw": {Proxies: 1, Nacked: []Issue{nackIssue("p1", true, "x", "team/big/80")}}}
	if n := len(TraceRoutes(sums, tt.trace)); n != MaxTracedRoutes {
		t.Errorf("traced %d routes, want the bound %d", n, MaxTracedRoutes)
	}
	if got := TraceRoutes(map[string]*Summary{"infra/gw": {Proxies: 1}}, tt.trace); got != nil {
		t.Errorf("no NACK traced %v", got)
	}
	if !reflect.DeepEqual(TraceRoutes(sums, nil), map[RouteRef][]RouteCondition(nil)) {
		t.Error("nil tracer traced routes")
	}
}

// Aggregate hands the NACKed type's unacknowledged resources to the issue,
// and whether they came from delta responses.
func TestAggregateNackResources(t *testing.T) {
	now := time.Unix(100, 0)
	sent := &Response{Version: "v2", Nonce: "2", Time: now.Add(-time.Second)}
	r := Report{Replica: "a", Time: now, Received: now, Proxies: []Proxy{{
		NodeID: "p1", Gateway: "infra/gw", Replica: "a", Connected: now.Add(-time.Minute),
		Types: []Type{{TypeURL: "type.googleapis.com/envoy.config.cluster.v3.Cluster", Sent: sent,
			Nack:    &Nack{Version: "v1", Nonce: "2", Error: "bad", Time: now.Add(-time.Second)},
			Unacked: &Diff{Resources: []Resource{{Name: "team/api/80", Version: "h1"}}}}},
	}}}
	s := Aggregate([]Report{r}, nil, now, DefaultStaleAfter)["infra/gw"]
	if s == nil || len(s.Nacked) != 1 {
		t.Fatalf("summary %+v", s)
	}
	if i := s.Nacked[0]; !reflect.DeepEqual(i.Resources, []string{"team/api/80"}) || !i.Delta {
		t.Errorf("issue resources %v delta %v", i.Resources, i.Delta)
	}
}

func TestMentions(t *testing.T) {
	for _, tc := range []struct {
		text, name string
		want       bool
	}{
		{"Error adding/updating cluster(s) ns/api/80: bad", "ns/api/80", true},
		{"cluster 'ns/api/80' is bad", "ns/api/80", true},
		{"ns/api/80", "ns/api/80", true},
		{"Error adding/updating cluster(s) ns/api/8080: bad", "ns/api/80", false},
		{"cluster xns/api/80 bad", "ns/api/80", false},
		{"ns/api/8080 and ns/api/80.", "ns/api/80", false}, // '.' may be part of a name
		{"ns/api/8080 and ns/api/80, bad", "ns/api/80", true},
		{"anything", "", false},
	} {
		if got := Mentions(tc.text, tc.name); got != tc.want {
			t.Errorf("Mentions(%q, %q) = %v, want %v", tc.text, tc.name, got, tc.want)
		}
	}
}
