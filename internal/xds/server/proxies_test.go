package server

import (
	"slices"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"

	"github.com/portico-dev/portico/internal/proxysync"
)

// proxyOf returns the report's record of the stream of node, and false
// when there is none.
func proxyOf(rep proxysync.Report, nodeID string) (proxysync.Proxy, bool) {
	for _, p := range rep.Proxies {
		if p.NodeID == nodeID {
			return p, true
		}
	}
	return proxysync.Proxy{}, false
}

// typeStates are the states of a proxy's types, by type URL.
func typeStates(p proxysync.Proxy) map[string]string {
	out := map[string]string{}
	for _, t := range p.Types {
		out[t.TypeURL], _ = t.State(time.Now(), time.Hour)
	}
	return out
}

func typeOf(p proxysync.Proxy, typeURL string) proxysync.Type {
	for _, t := range p.Types {
		if t.TypeURL == typeURL {
			return t
		}
	}
	return proxysync.Type{}
}

// allIn reports whether every type of allTypes is in state.
func allIn(states map[string]string, state string, except ...string) bool {
	for _, typ := range allTypes {
		if slices.Contains(except, typ) {
			continue
		}
		if states[typ] != state {
			return false
		}
	}
	return true
}

func TestProxyReportDelta(t *testing.T) {
	e := startEnv(t)
	a1 := gwA
	e.update(t, a1.resources(t, "a1"), gwB.resources(t, "b1"))

	c := newDeltaClient(t, e.conn)
	deltaSubscribe(c, a1.gateway)
	got := recvTypes(t, c, deltaType, allTypes...)

	// Sent, not answered: PENDING, with what was sent as the diff.
	var p proxysync.Proxy
	eventually(t, "five types sent and pending", func() bool {
		var ok bool
		p, ok = proxyOf(e.srv.ProxyReport("r1"), node(gwA.gateway).GetId())
		return ok && allIn(typeStates(p), proxysync.StatePending)
	})
	if p.Gateway != a1.gateway || p.Replica != "r1" || p.Stream == "" {
		t.Errorf("proxy = %+v", p)
	}
	cds := typeOf(p, resourcev3.ClusterType)
	if cds.Sent == nil || cds.Sent.Version != "a1" || cds.Sent.Resources != 2 || cds.Acked != nil {
		t.Errorf("CDS sent %+v, acked %+v", cds.Sent, cds.Acked)
	}
	if cds.Unacked == nil || len(cds.Unacked.Resources) != 2 || cds.Unacked.Resources[0].Version == "" {
		t.Errorf("CDS unacked = %+v", cds.Unacked)
	}

	for _, typ := range allTypes {
		deltaAck(c, got[typ])
	}
	eventually(t, "five types synced", func() bool {
		p, _ = proxyOf(e.srv.ProxyReport("r1"), node(gwA.gateway).GetId())
		return allIn(typeStates(p), proxysync.StateSynced)
	})
	if cds := typeOf(p, resourcev3.ClusterType); cds.Acked == nil || cds.Acked.Nonce != cds.Sent.Nonce || cds.Unacked != nil {
		t.Errorf("CDS after ACK: sent %+v, acked %+v, unacked %+v", cds.Sent, cds.Acked, cds.Unacked)
	}

	// A change NACKed: CDS is NACK with the error and what it rejected.
	a2 := gwA
	a2.clusters = []string{"c1", "c2", "c3"}
	e.update(t, a2.resources(t, "a2"), gwB.resources(t, "b1"))
	cdsResp := c.recv()
	for cdsResp.GetTypeUrl() != resourcev3.ClusterType {
		deltaAck(c, cdsResp)
		cdsResp = c.recv()
	}
	c.send(&discoveryv3.DeltaDiscoveryRequest{
		TypeUrl: resourcev3.ClusterType, ResponseNonce: cdsResp.GetNonce(),
		ErrorDetail: &status.Status{Code: int32(codes.InvalidArgument), Message: "bad cluster c3"},
	})
	for range 2 { // the endpoints and the route of c3
		deltaAck(c, c.recv())
	}
	eventually(t, "CDS NACKed, the rest synced", func() bool {
		p, _ = proxyOf(e.srv.ProxyReport("r1"), node(gwA.gateway).GetId())
		st := typeStates(p)
		return st[resourcev3.ClusterType] == proxysync.StateNack && allIn(st, proxysync.StateSynced, resourcev3.ClusterType)
	})
	cds = typeOf(p, resourcev3.ClusterType)
	if cds.Nack == nil || cds.Nack.Error != "bad cluster c3" || cds.Nack.Version != "a2" {
		t.Errorf("CDS nack = %+v", cds.Nack)
	}
	if cds.Acked == nil || cds.Acked.Version != "a1" {
		t.Errorf("CDS acked = %+v, want a1", cds.Acked)
	}
	if cds.Unacked == nil || len(cds.Unacked.Resources) != 1 || cds.Unacked.Resources[0].Name != a2.name("c3") {
		t.Errorf("CDS unacked = %+v, want c3", cds.Unacked)
	}

	// Fixed: the next response is ACKed and clears the NACK.
	a3 := gwA
	a3.clusters = []string{"c1", "c2", "c4"}
	e.update(t, a3.resources(t, "a3"), gwB.resources(t, "b1"))
	eventually(t, "CDS synced again", func() bool {
		for {
			select {
			case r := <-c.resps:
				deltaAck(c, r)
				continue
			default:
			}
			break
		}
		p, _ = proxyOf(e.srv.ProxyReport("r1"), node(gwA.gateway).GetId())
		return allIn(typeStates(p), proxysync.StateSynced)
	})
	if cds := typeOf(p, resourcev3.ClusterType); cds.Nack != nil || cds.Acked.Version != "a3" {
		t.Errorf("CDS after the fix: nack %+v, acked %+v", cds.Nack, cds.Acked)
	}

	rep := e.srv.ProxyReport("r1")
	if len(rep.Gateways) != 2 || rep.Gateways[0].Gateway != a1.gateway || rep.Gateways[0].Version != "a3" {
		t.Errorf("gateways = %+v", rep.Gateways)
	}

	// A closed stream leaves the report.
	c.close()
	eventually(t, "closed stream gone", func() bool {
		_, ok := proxyOf(e.srv.ProxyReport("r1"), node(gwA.gateway).GetId())
		return !ok
	})
}

func TestProxyReportSotW(t *testing.T) {
	e := startEnv(t)
	e.update(t, gwA.resources(t, "a1"))
	c := newSotwClient(t, e.conn)
	sotwSubscribe(c, gwA)
	got := recvTypes(t, c, sotwType, allTypes...)
	for _, typ := range allTypes {
		sotwAck(c, gwA, got[typ])
	}
	var p proxysync.Proxy
	eventually(t, "five types synced", func() bool {
		p, _ = proxyOf(e.srv.ProxyReport("r1"), node(gwA.gateway).GetId())
		return allIn(typeStates(p), proxysync.StateSynced)
	})
	cds := typeOf(p, resourcev3.ClusterType)
	if cds.Acked.Version != got[resourcev3.ClusterType].GetVersionInfo() {
		t.Errorf("CDS acked %q, sent %q", cds.Acked.Version, got[resourcev3.ClusterType].GetVersionInfo())
	}
}
