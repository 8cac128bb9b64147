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

// TestProxiesInSyncCondition: a proxy connected to the follower NACKs a
// change of its clusters; the leader's aggregation turns the Gateway's
// portico.dev/ProxiesInSync False with the proxy's error, and True again
// once the proxy ACKs a later version; the same holds after the leader is
// killed (the follower, which the proxy is connected to, takes over).
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
	a := startReplica(t, "a", opts)
	b := startReplica(t, "b", opts)
	mu.Lock()
	replicas["a"], replicas["b"] = a, b
	mu.Unlock()
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

	// A new backend changes the clusters; the proxy rejects them.
	f.service("api", "10.0.0.2")
	f.route("r1", "gw", "api")
	resp, err := proxy.recvNoAck(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	proxy.answer(resp, first.VersionInfo, "cluster api: test rejection")
	nacked := time.Now()
	took := eventually(t, 10*time.Second, "ProxiesInSync False with the error", func() bool {
		c := f.proxiesInSync("gw")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == proxysync.ReasonRejected &&
			strings.Contains(c.Message, "test-proxy (replica "+follower.name+") rejected CDS") && strings.Contains(c.Message, "cluster api: test rejection")
	})
	t.Logf("NACK → condition False in %s (%s since the NACK)", took, time.Since(nacked).Round(time.Millisecond))

	// The leader dies; the follower takes over and keeps the truth.
	leader.stop(t)
	mu.Lock()
	delete(replicas, leader.name)
	mu.Unlock()
	if l, _ := waitLeader(t, 20*time.Second, follower); l != follower {
		t.Fatal("follower did not take over")
	}
	// The fix: another change, which the proxy ACKs.
	f.service("api2", "10.0.0.3")
	f.route("r2", "gw", "api2")
	resp, err = proxy.recvNoAck(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	proxy.answer(resp, "", "")
	acked := time.Now()
	eventually(t, 10*time.Second, "ProxiesInSync True again", func() bool {
		c := f.proxiesInSync("gw")
		return c != nil && c.Status == metav1.ConditionTrue
	})
	t.Logf("ACK → condition True on the new leader in %s", time.Since(acked).Round(time.Millisecond))
}
