package proxysync

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 12, 4, 6, 0, 0, 0, time.UTC)

const cds = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
const lds = "type.googleapis.com/envoy.config.listener.v3.Listener"

func syncedType(url string, at time.Time) Type {
	r := &Response{Version: "v1", Nonce: "1", Time: at}
	return Type{TypeURL: url, Requested: at, Sent: r, Acked: r}
}

func proxy(node, gw, replica string, connected time.Time, types ...Type) Proxy {
	return Proxy{NodeID: node, Gateway: gw, Replica: replica, Stream: "delta/1", Connected: connected, Types: types}
}

func report(replica string, now time.Time, gws map[string]string, ps ...Proxy) Report {
	r := Report{Replica: replica, Time: now}
	for gw, v := range gws {
		r.Gateways = append(r.Gateways, GatewayVersion{Gateway: gw, Version: v, Since: t0})
	}
	r.Proxies = ps
	return r
}

func TestAggregate(t *testing.T) {
	now := t0.Add(time.Minute)
	gws := map[string]string{"ns/a": "g1", "ns/b": "g1"}
	nacked := syncedType(cds, t0)
	nacked.Sent = &Response{Version: "v2", Nonce: "2", Time: t0}
	nacked.Nack = &Nack{Version: "v2", Nonce: "2", Error: "bad cluster", Time: t0}
	waiting := syncedType(lds, t0)
	waiting.Sent = &Response{Version: "v2", Nonce: "2", Time: now.Add(-time.Second)}
	oldWait := syncedType(lds, t0)
	oldWait.Sent = &Response{Version: "v2", Nonce: "2", Time: now.Add(-time.Minute)}

	leader := report("r1", now, gws,
		proxy("p1", "ns/a", "r1", t0, syncedType(lds, t0), syncedType(cds, t0)),
		proxy("p2", "ns/a", "r1", t0, syncedType(lds, t0), nacked),
		proxy("p3", "ns/a", "r1", t0, waiting), // pending for a second: in sync
		proxy("p4", "ns/b", "r1", t0, oldWait), // waiting for a minute: stale
		// p5 reconnected to r2: its old stream here is ignored.
		proxy("p5", "ns/b", "r1", t0, nacked),
	)
	follower := report("r2", now, map[string]string{"ns/a": "g1", "ns/b": "g0"},
		proxy("p5", "ns/b", "r2", t0.Add(time.Second), syncedType(lds, t0)),
	)
	current := map[string]Current{"ns/a": {"g1", t0}, "ns/b": {"g1", t0}}
	sums := Aggregate([]Report{leader, follower}, current, now, DefaultStaleAfter)

	a := sums["ns/a"]
	if a.Proxies != 3 || len(a.Nacked) != 1 || a.Nacked[0].NodeID != "p2" || a.Nacked[0].Type != "CDS" || len(a.Stale) != 0 {
		t.Errorf("ns/a = %+v", a)
	}
	b := sums["ns/b"]
	// p4 waits for LDS; p5 is on r2, which serves ns/b another version.
	if b.Proxies != 2 || len(b.Nacked) != 0 || len(b.Stale) != 2 || b.Stale[0].NodeID != "p4" || b.Stale[0].Type != "LDS" ||
		b.Stale[1].NodeID != "p5" || b.Stale[1].Type != "" {
		t.Errorf("ns/b = %+v", b)
	}

	c := Condition(a, DefaultStaleAfter)
	if c.Status != metav1.ConditionFalse || c.Reason != ReasonRejected ||
		c.Message != "1 of 3 proxies rejected the configuration: p2 (replica r1) rejected CDS version v2: bad cluster" {
		t.Errorf("ns/a condition = %+v", c)
	}
	c = Condition(b, DefaultStaleAfter)
	if c.Status != metav1.ConditionFalse || c.Reason != ReasonStale || !strings.Contains(c.Message, "p4 (replica r1) waits for LDS") {
		t.Errorf("ns/b condition = %+v", c)
	}
	if c := Condition(nil, DefaultStaleAfter); c.Status != metav1.ConditionUnknown || c.Reason != ReasonNoProxies {
		t.Errorf("no proxies: %+v", c)
	}
	if c := Condition(&Summary{Proxies: 1}, DefaultStaleAfter); c.Status != metav1.ConditionTrue || c.Message != "1 proxy runs the current configuration." {
		t.Errorf("in sync: %+v", c)
	}
}

// A follower that lags the leader by a translation is not stale; one that
// served another version for longer than the threshold is.
func TestAggregateVersionLag(t *testing.T) {
	now := t0.Add(time.Minute)
	follower := report("r2", now, map[string]string{"ns/a": "g0"}, proxy("p1", "ns/a", "r2", t0, syncedType(lds, t0)))
	recent := map[string]Current{"ns/a": {"g1", now.Add(-time.Second)}}
	if s := Aggregate([]Report{follower}, recent, now, DefaultStaleAfter)["ns/a"]; len(s.Stale) != 0 {
		t.Errorf("lag of a second counted stale: %+v", s)
	}
	old := map[string]Current{"ns/a": {"g1", now.Add(-time.Minute)}}
	if s := Aggregate([]Report{follower}, old, now, DefaultStaleAfter)["ns/a"]; len(s.Stale) != 1 {
		t.Errorf("lag of a minute not stale: %+v", s)
	}
}

// Ages are measured on each replica's clock: a follower whose clock is an
// hour ahead does not make its pending responses stale.
func TestAggregateClockSkew(t *testing.T) {
	now := t0.Add(time.Minute)
	skew := time.Hour
	pending := Type{TypeURL: lds, Requested: now.Add(skew - time.Second),
		Sent: &Response{Version: "v1", Nonce: "1", Time: now.Add(skew - time.Second)}}
	r := report("r2", now.Add(skew), map[string]string{"ns/a": "g1"}, proxy("p1", "ns/a", "r2", t0, pending))
	r.Received = now
	s := Aggregate([]Report{r}, map[string]Current{"ns/a": {"g1", t0}}, now, DefaultStaleAfter)["ns/a"]
	if len(s.Stale) != 0 || len(s.Nacked) != 0 {
		t.Errorf("skewed replica: %+v", s)
	}
	// Without the replica's clock (Received unset), the same would be
	// judged on the aggregator's: pending since an hour in the future.
	pending.Sent.Time = now.Add(-time.Minute)
	r = report("r2", now, map[string]string{"ns/a": "g1"}, proxy("p1", "ns/a", "r2", t0, pending))
	r.Received = now
	if s := Aggregate([]Report{r}, nil, now, DefaultStaleAfter)["ns/a"]; len(s.Stale) != 1 {
		t.Errorf("pending for a minute not stale: %+v", s)
	}
}

func TestTypeState(t *testing.T) {
	now := t0.Add(time.Minute)
	cases := []struct {
		name string
		t    Type
		want string
	}{
		{"never sent, just asked", Type{Requested: now.Add(-time.Second)}, StatePending},
		{"never sent, asked long ago", Type{Requested: t0}, StateStale},
		{"acked", syncedType(lds, t0), StateSynced},
		{"nack", Type{Requested: t0, Sent: &Response{Nonce: "1", Time: t0}, Nack: &Nack{Time: t0}}, StateNack},
	}
	for _, c := range cases {
		if got, _ := c.t.State(now, DefaultStaleAfter); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
