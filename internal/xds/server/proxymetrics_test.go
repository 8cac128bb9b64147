package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"

	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/proxysync"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// proxyCounts are the values of portico_xds_proxies of gateway, by state
// ("" for a state without a series).
func proxyCounts(t *testing.T, g prometheus.Gatherer, gateway string) string {
	t.Helper()
	var out []string
	for _, state := range proxyStateOrder {
		v, ok := metricValue(t, g, ProxiesMetric, map[string]string{"gateway": gateway, "state": state})
		if !ok {
			out = append(out, state+"=")
			continue
		}
		out = append(out, fmt.Sprintf("%s=%g", state, v))
	}
	return strings.Join(out, " ")
}

func want(synced, pending, stale, nack int) string {
	return fmt.Sprintf("SYNCED=%d PENDING=%d STALE=%d NACK=%d", synced, pending, stale, nack)
}

// TestProxiesMetric follows one delta proxy of gwA through PENDING,
// STALE (seen with a clock a minute ahead), SYNCED and NACK, and its
// stream closing, on the gauge the Server registers on its metrics.
func TestProxiesMetric(t *testing.T) {
	e := startEnv(t)
	reg := e.m.Registry
	e.update(t, gwA.resources(t, "a1"), gwB.resources(t, "b1"))
	for _, gw := range []string{gwA.gateway, gwB.gateway} {
		if got := proxyCounts(t, reg, gw); got != want(0, 0, 0, 0) {
			t.Errorf("%s without proxies: %s, want zeros", gw, got)
		}
	}

	// The same records seen a minute later: what waits is STALE.
	late := newProxyCollector()
	late.now = func() time.Time { return time.Now().Add(time.Minute) }
	late.add(e.srv)
	lateReg := prometheus.NewPedanticRegistry()
	lateReg.MustRegister(late)

	c := newDeltaClient(t, e.conn)
	deltaSubscribe(c, gwA.gateway)
	got := recvTypes(t, c, deltaType, allTypes...)
	eventually(t, "the proxy pending", func() bool { return proxyCounts(t, reg, gwA.gateway) == want(0, 1, 0, 0) })
	if got := proxyCounts(t, lateReg, gwA.gateway); got != want(0, 0, 1, 0) {
		t.Errorf("a minute later: %s, want the proxy STALE", got)
	}

	for _, typ := range allTypes {
		deltaAck(c, got[typ])
	}
	eventually(t, "the proxy synced", func() bool { return proxyCounts(t, reg, gwA.gateway) == want(1, 0, 0, 0) })
	if got := proxyCounts(t, lateReg, gwA.gateway); got != want(1, 0, 0, 0) {
		t.Errorf("synced, a minute later: %s, want SYNCED (ACKed records do not age)", got)
	}
	if got := proxyCounts(t, reg, gwB.gateway); got != want(0, 0, 0, 0) {
		t.Errorf("%s: %s, want zeros", gwB.gateway, got)
	}

	// CDS NACKed, the rest ACKed: the proxy is NACK, also a minute later.
	a2 := gwA
	a2.clusters = []string{"c1", "c2", "c3"}
	e.update(t, a2.resources(t, "a2"), gwB.resources(t, "b1"))
	r := c.recv()
	for r.GetTypeUrl() != resourcev3.ClusterType {
		deltaAck(c, r)
		r = c.recv()
	}
	c.send(&discoveryv3.DeltaDiscoveryRequest{
		TypeUrl: resourcev3.ClusterType, ResponseNonce: r.GetNonce(),
		ErrorDetail: &status.Status{Code: int32(codes.InvalidArgument), Message: "bad cluster c3"},
	})
	for range 2 { // the endpoints and the route of c3
		deltaAck(c, c.recv())
	}
	eventually(t, "the proxy NACK", func() bool { return proxyCounts(t, reg, gwA.gateway) == want(0, 0, 0, 1) })
	if got := proxyCounts(t, lateReg, gwA.gateway); got != want(0, 0, 0, 1) {
		t.Errorf("NACK, a minute later: %s, want NACK (worse than STALE)", got)
	}

	c.close()
	eventually(t, "the closed stream uncounted", func() bool { return proxyCounts(t, reg, gwA.gateway) == want(0, 0, 0, 0) })

	// A Gateway no longer served, with no proxies, has no series.
	e.update(t, gwB.resources(t, "b1"))
	if got := proxyCounts(t, reg, gwA.gateway); got != "SYNCED= PENDING= STALE= NACK=" {
		t.Errorf("%s no longer served: %s, want no series", gwA.gateway, got)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == ProxiesMetric && (len(mf.GetMetric()) != 4 || mf.GetType() != dto.MetricType_GAUGE) {
			t.Errorf("%s: %d series of type %s, want 4 gauges (one Gateway)", ProxiesMetric, len(mf.GetMetric()), mf.GetType())
		}
	}
}

// TestProxyWorstState: a stream's state is its worst type's, in the order
// NACK > STALE > PENDING > SYNCED.
func TestProxyWorstState(t *testing.T) {
	now := time.Now()
	old := now.Add(-time.Minute)
	sent := &proxysync.Response{Version: "v1", Nonce: "1", Time: now}
	oldSent := &proxysync.Response{Version: "v1", Nonce: "1", Time: old}
	synced := &typeSync{requested: old, last: sent, acked: sent}
	pending := &typeSync{requested: now, last: sent}
	stale := &typeSync{requested: old, last: oldSent}
	unanswered := &typeSync{requested: old} // nothing sent for a minute
	nack := &typeSync{requested: old, last: sent, acked: &proxysync.Response{Nonce: "0"},
		nack: &proxysync.Nack{Version: "v1", Nonce: "1", Time: now}}
	for _, tc := range []struct {
		types []*typeSync
		want  string
	}{
		{nil, proxysync.StatePending},
		{[]*typeSync{synced}, proxysync.StateSynced},
		{[]*typeSync{synced, pending}, proxysync.StatePending},
		{[]*typeSync{pending, stale, synced}, proxysync.StateStale},
		{[]*typeSync{unanswered}, proxysync.StateStale},
		{[]*typeSync{stale, nack, pending}, proxysync.StateNack},
		{[]*typeSync{nack}, proxysync.StateNack},
	} {
		st := &streamState{sync: map[string]*typeSync{}}
		for i, ts := range tc.types {
			st.sync[fmt.Sprint(i)] = ts
		}
		if got := proxyStateOrder[st.worstState(now, proxysync.DefaultStaleAfter)]; got != tc.want {
			t.Errorf("%d types: %s, want %s", len(tc.types), got, tc.want)
		}
	}
}

// TestProxiesMetricSharedRegistry: Servers sharing one metrics.Metrics
// register one collector, which counts the Gateways of both.
func TestProxiesMetricSharedRegistry(t *testing.T) {
	m := metrics.New()
	s1, s2 := New(nil, m), New(nil, m)
	if err := s1.Update(t.Context(), []*translate.Resources{gwA.resources(t, "a1")}); err != nil {
		t.Fatal(err)
	}
	if err := s2.Update(t.Context(), []*translate.Resources{gwB.resources(t, "b1")}); err != nil {
		t.Fatal(err)
	}
	for _, gw := range []string{gwA.gateway, gwB.gateway} {
		if got := proxyCounts(t, m.Registry, gw); got != want(0, 0, 0, 0) {
			t.Errorf("%s: %s, want zeros", gw, got)
		}
	}
}
