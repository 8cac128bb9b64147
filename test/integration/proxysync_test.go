package integration

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/proxysync"
)

// answer ACKs r (errMsg "") or NACKs it, naming accepted as the version
// the proxy keeps.
func (a *adsStream) answer(r *discoveryv3.DiscoveryResponse, accepted, errMsg string) {
	a.t.Helper()
	req := &discoveryv3.DiscoveryRequest{Node: a.node, TypeUrl: a.typeURL, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce}
	if errMsg != "" {
		req.VersionInfo = accepted
		req.ErrorDetail = &status.Status{Code: 3, Message: errMsg}
	}
	if err := a.stream.Send(req); err != nil {
		a.t.Fatal(err)
	}
}

// proxiesInSync returns the Gateway's portico.dev/ProxiesInSync condition,
// or nil.
func (f *fixture) proxiesInSync(name string) *metav1.Condition {
	var gw gwv1.Gateway
	if err := k8s.Get(f.ctx, f.key(name), &gw); err != nil {
		return nil
	}
	return meta.FindStatusCondition(gw.Status.Conditions, proxysync.ConditionType)
}

// routeProxiesInSync returns the portico.dev/ProxiesInSync condition of
// the route's entry of this fixture's controller, or nil.
func (f *fixture) routeProxiesInSync(name string) *metav1.Condition {
	var r gwv1.HTTPRoute
	if err := k8s.Get(f.ctx, f.key(name), &r); err != nil {
		return nil
	}
	p := f.ourParent(r.Status.RouteStatus)
	if p == nil {
		return nil
	}
	return meta.FindStatusCondition(p.Conditions, proxysync.ConditionType)
}

// rejected reports whether c is a Rejected condition naming the proxy
// node on replica and containing text.
func rejected(c *metav1.Condition, node, replica, text string) bool {
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == proxysync.ReasonRejected &&
		strings.Contains(c.Message, node+" (replica "+replica+")") && strings.Contains(c.Message, text)
}

// TestProxiesInSyncCondition: a proxy connected to a follower NACKs a
// change of its clusters; the leader's aggregation turns the Gateway's
// portico.dev/ProxiesInSync False with the proxy's error, and the route
// whose cluster was rejected gets the same on its parent entry (the
// others none); once the proxy ACKs, True again and the route's condition
// is gone. The leader is then killed (it stops renewing its Lease without
// releasing it, and is unreachable); the follower takes over and keeps the
// truth, and a proxy connected to a new follower NACKs and ACKs with the
// same effect.
func TestProxiesInSyncCondition(t *testing.T) {
	f := newFixture(t)
	f.gateway("gw")
	f.service("web", "10.0.0.1")
	f.route("r0", "gw", "web")

	var mu sync.Mutex
	replicas := map[string]*replica{}
	opts := f.opts()
	opts.peers = func(context.Context) ([]proxysync.Peer, error) {
		mu.Lock()
		defer mu.Unlock()
		var out []proxysync.Peer
		for name, r := range replicas {
			out = append(out, proxysync.Peer{Name: name, URL: "http://" + r.debug})
		}
		return out, nil
	}
	join := func(r *replica) {
		mu.Lock()
		replicas[r.name] = r
		mu.Unlock()
	}
	a := startReplica(t, "a", opts)
	b := startReplica(t, "b", opts)
	join(a)
	join(b)
	leader, _ := waitLeader(t, 20*time.Second, a, b)
	follower := b
	if leader == b {
		follower = a
	}
	eventually(t, 30*time.Second, "gateway programmed", func() bool { return f.gatewayProgrammed("gw", 1) })

	// No proxy yet: Unknown.
	eventually(t, 10*time.Second, "ProxiesInSync Unknown without proxies", func() bool {
		c := f.proxiesInSync("gw")
		return c != nil && c.Status == metav1.ConditionUnknown && c.Reason == proxysync.ReasonNoProxies
	})

	// A proxy on the follower ACKs: True.
	proxy := dialADS(t, follower.xds, f.ns+"/gw", typeCDS)
	first, err := proxy.next(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "ProxiesInSync True", func() bool {
		c := f.proxiesInSync("gw")
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == proxysync.ReasonInSync
	})

	// A new backend changes the clusters; the proxy rejects the new one,
	// naming it as Envoy does.
	f.service("api", "10.0.0.2")
	f.route("r1", "gw", "api")
	resp, err := proxy.recvNoAck(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	apiErr := "Error adding/updating cluster(s) " + f.ns + "/api/80: test rejection"
	proxy.answer(resp, first.VersionInfo, apiErr)
	nacked := time.Now()
	took := eventually(t, 10*time.Second, "ProxiesInSync False with the error", func() bool {
		return rejected(f.proxiesInSync("gw"), "test-proxy", follower.name, "rejected CDS") &&
			strings.Contains(f.proxiesInSync("gw").Message, apiErr)
	})
	t.Logf("NACK → Gateway condition False in %s (%s since the NACK)", took, time.Since(nacked).Round(time.Millisecond))
	eventually(t, 10*time.Second, "route r1 traced", func() bool {
		return rejected(f.routeProxiesInSync("r1"), "test-proxy", follower.name, apiErr)
	})
	t.Logf("NACK → route condition False %s after the NACK", time.Since(nacked).Round(time.Millisecond))
	if c := f.routeProxiesInSync("r0"); c != nil {
		t.Errorf("route r0, whose cluster was not rejected, has %+v", c)
	}

	// The leader is killed: it can no longer reach the API server (so its
	// Lease expires, unreleased) nor be reached by its peers.
	leader.faults.failAll.Store(true)
	t.Cleanup(func() { leader.faults.failAll.Store(false) }) // before its stop
	mu.Lock()
	delete(replicas, leader.name)
	mu.Unlock()
	killed := time.Now()
	// While no replica leads, the proxy ACKs a later change: the
	// rejection ends with nobody to write it. The new leader's first
	// aggregation clears what the old one wrote on r1.
	f.service("api1b", "10.0.0.5")
	f.route("r1b", "gw", "api1b")
	if _, err := proxy.next(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if l, _ := waitLeader(t, 20*time.Second, follower); l != follower {
		t.Fatal("follower did not take over")
	}
	t.Logf("follower %s leads %s after the kill", follower.name, time.Since(killed).Round(time.Millisecond))
	newLeader := follower
	eventually(t, 10*time.Second, "new leader: True, the old leader's condition on r1 cleared", func() bool {
		c := f.proxiesInSync("gw")
		return c != nil && c.Status == metav1.ConditionTrue && f.routeProxiesInSync("r1") == nil
	})

	// A new follower, and a second proxy connected to it.
	c := startReplica(t, "c", opts)
	join(c)
	proxy2 := dialADSAs(t, c.xds, "test-proxy-2", f.ns+"/gw", typeCDS)
	if _, err := proxy2.next(20 * time.Second); err != nil {
		t.Fatal(err)
	}

	// The next change: the first proxy ACKs it (the rejection is over),
	// the second rejects its new cluster.
	f.service("api2", "10.0.0.3")
	f.route("r2", "gw", "api2")
	if _, err := proxy.next(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	resp, err = proxy2.recvNoAck(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	api2Err := "Error adding/updating cluster(s) " + f.ns + "/api2/80: test rejection 2"
	proxy2.answer(resp, "", api2Err)
	nacked = time.Now()
	took = eventually(t, 10*time.Second, "new leader: ProxiesInSync False naming the second proxy", func() bool {
		return rejected(f.proxiesInSync("gw"), "test-proxy-2", c.name, api2Err)
	})
	t.Logf("NACK on a follower → condition False on the new leader (%s) in %s", newLeader.name, took)
	eventually(t, 10*time.Second, "route r2 traced", func() bool {
		return rejected(f.routeProxiesInSync("r2"), "test-proxy-2", c.name, api2Err)
	})

	// The fix: another change, which both proxies ACK.
	f.service("api3", "10.0.0.4")
	f.route("r3", "gw", "api3")
	if _, err := proxy.next(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := proxy2.next(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	acked := time.Now()
	eventually(t, 10*time.Second, "ProxiesInSync True again, route r2 cleared", func() bool {
		c := f.proxiesInSync("gw")
		return c != nil && c.Status == metav1.ConditionTrue && strings.HasPrefix(c.Message, "2 proxies run") &&
			f.routeProxiesInSync("r2") == nil
	})
	t.Logf("ACK → condition True on the new leader in %s", time.Since(acked).Round(time.Millisecond))
}
