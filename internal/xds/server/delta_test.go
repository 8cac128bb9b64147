package server

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
)

// cacheClient plays a delta xDS client of one type against a deltaCache,
// as go-control-plane's delta server drives it: each request updates the
// stream's subscription and opens a watch; each response is applied to the
// client's view and acknowledged by the next request.
type cacheClient struct {
	t     *testing.T
	d     *deltaCache
	sub   stream.Subscription
	ch    chan cachev3.DeltaResponse
	nonce int
	// view is what the client holds: name → version.
	view   map[string]string
	cancel func()
	opened bool
}

func newCacheClient(t *testing.T, d *deltaCache) *cacheClient {
	return &cacheClient{t: t, d: d, ch: make(chan cachev3.DeltaResponse, 1), view: map[string]string{}}
}

// request sends a request subscribing and unsubscribing names.
func (c *cacheClient) request(subscribe, unsubscribe []string) {
	req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: c.d.typeURL, ResourceNamesSubscribe: subscribe, ResourceNamesUnsubscribe: unsubscribe}
	if c.nonce > 0 {
		req.ResponseNonce = fmt.Sprint(c.nonce)
	}
	if !c.opened {
		c.sub = stream.NewDeltaSubscription(subscribe, unsubscribe, nil, true)
		c.opened = true
	} else {
		if c.cancel != nil {
			c.cancel()
		}
		c.sub.UpdateResourceSubscriptions(subscribe, unsubscribe)
	}
	c.cancel = c.d.watch(req, c.sub, c.ch)
}

// receive applies the pending response, if any, and acknowledges it; it
// reports whether there was one.
func (c *cacheClient) receive() (*discoveryv3.DeltaDiscoveryResponse, bool) {
	select {
	case r := <-c.ch:
		resp, err := r.GetDeltaDiscoveryResponse()
		if err != nil {
			c.t.Fatal(err)
		}
		c.sub.SetReturnedResources(r.GetReturnedResources())
		for _, res := range resp.Resources {
			c.view[res.Name] = res.Version
		}
		for _, name := range resp.RemovedResources {
			delete(c.view, name)
		}
		c.nonce++
		c.cancel = nil
		c.request(nil, nil)
		return resp, true
	default:
		return nil, false
	}
}

// drain receives until no response is pending.
func (c *cacheClient) drain() int {
	n := 0
	for {
		if _, ok := c.receive(); !ok {
			return n
		}
		n++
	}
}

func vhost(name string) versioned {
	return versioned{version: "v-" + name, res: &routev3.VirtualHost{Name: name}}
}

func versionedAt(name, v string) versioned {
	return versioned{version: v, res: &routev3.VirtualHost{Name: name}}
}

func respNames(resp *discoveryv3.DeltaDiscoveryResponse) (added, removed []string) {
	for _, r := range resp.Resources {
		added = append(added, r.Name)
	}
	slices.Sort(added)
	removed = slices.Sorted(slices.Values(resp.RemovedResources))
	return added, removed
}

// A namespaced cache (VHDS) answers a subscription to a route config with
// every resource "<route config>/…", at once and even when there is none;
// then only with the changes of that namespace.
func TestDeltaCacheNamespaces(t *testing.T) {
	d := newDeltaCache(resourcev3.VirtualHostType, true)
	d.update("v1", map[string]versioned{
		"gw/rc1/a.example.com": vhost("gw/rc1/a.example.com"),
		"gw/rc1/*":             vhost("gw/rc1/*"),
		"gw/rc2/b.example.com": vhost("gw/rc2/b.example.com"),
	}, nil)
	c := newCacheClient(t, d)
	c.request([]string{"gw/rc1", "gw/empty"}, nil)
	resp, ok := c.receive()
	if !ok {
		t.Fatal("no answer to the subscription")
	}
	if a, _ := respNames(resp); !slices.Equal(a, []string{"gw/rc1/*", "gw/rc1/a.example.com"}) {
		t.Fatalf("first answer %v", a)
	}
	if resp.SystemVersionInfo != "v1" {
		t.Errorf("system version %q", resp.SystemVersionInfo)
	}
	if _, ok := c.receive(); ok {
		t.Fatal("the ACK was answered though nothing changed")
	}

	// A change in another namespace does not concern the stream.
	d.update("v2", map[string]versioned{"gw/rc2/b.example.com": versionedAt("gw/rc2/b.example.com", "x")}, nil)
	if _, ok := c.receive(); ok {
		t.Fatal("answered for another namespace")
	}
	// A change, an addition and a removal in its namespaces do.
	d.update("v3", map[string]versioned{
		"gw/rc1/a.example.com": versionedAt("gw/rc1/a.example.com", "y"),
		"gw/empty/c.example":   vhost("gw/empty/c.example"),
	}, []string{"gw/rc1/*"})
	if n := c.drain(); n == 0 {
		t.Fatal("no answer to the changes")
	}
	want := map[string]string{"gw/rc1/a.example.com": "y", "gw/empty/c.example": "v-gw/empty/c.example"}
	if !maps.Equal(c.view, want) {
		t.Fatalf("view %v, want %v", c.view, want)
	}

	// Unsubscribed and subscribed again: all of the namespace again.
	c.request(nil, []string{"gw/rc1"})
	c.drain()
	for n := range c.view {
		if strings.HasPrefix(n, "gw/rc1/") {
			delete(c.view, n) // Envoy drops them with the route config
		}
	}
	c.request([]string{"gw/rc1"}, nil)
	if resp, ok := c.receive(); !ok || len(resp.Resources) != 1 || resp.Resources[0].Name != "gw/rc1/a.example.com" {
		t.Fatalf("answer to the new subscription: %v", resp)
	}
}

// A wildcard subscription is answered at once, even when empty; an ACK
// after nothing changed is not answered; an update sends what changed.
func TestDeltaCacheWildcard(t *testing.T) {
	d := newDeltaCache(resourcev3.ClusterType, false)
	c := newCacheClient(t, d)
	c.request(nil, nil)
	if resp, ok := c.receive(); !ok || len(resp.Resources) != 0 {
		t.Fatalf("first answer %v, %v", resp, ok)
	}
	if _, ok := c.receive(); ok {
		t.Fatal("ACK answered")
	}
	d.update("v1", map[string]versioned{"a": vhost("a"), "b": vhost("b")}, nil)
	if resp, ok := c.receive(); !ok || len(resp.Resources) != 2 {
		t.Fatalf("answer %v", resp)
	}
	d.update("v2", map[string]versioned{"a": vhost("a")}, nil) // same version: no change
	if _, ok := c.receive(); ok {
		t.Fatal("answered an update that changed nothing")
	}
	d.update("v3", nil, []string{"a"})
	resp, ok := c.receive()
	if _, rm := respNames(resp); !ok || !slices.Equal(rm, []string{"a"}) || len(resp.Resources) != 0 {
		t.Fatalf("removal answer %v", resp)
	}
	if d.watches() != 1 {
		t.Errorf("%d watches open, want 1", d.watches())
	}
	c.cancel()
	if d.watches() != 0 {
		t.Errorf("%d watches open after cancel", d.watches())
	}
}

// Over random updates, subscriptions and lagging acknowledgements (a
// stream that misses more updates than the log holds is compared in
// full), every client ends with exactly what its subscription covers.
func TestDeltaCacheConverges(t *testing.T) {
	for _, namespaced := range []bool{false, true} {
		for seed := range uint64(20) {
			rng := rand.New(rand.NewPCG(seed, 11))
			typ := resourcev3.ClusterType
			if namespaced {
				typ = resourcev3.VirtualHostType
			}
			d := newDeltaCache(typ, namespaced)
			name := func(i int) string {
				if namespaced {
					return fmt.Sprintf("ns%d/r%d", i%5, i)
				}
				return fmt.Sprintf("r%d", i)
			}
			state := map[string]string{}
			clients := []*cacheClient{newCacheClient(t, d), newCacheClient(t, d), newCacheClient(t, d)}
			subs := make([]map[string]bool, len(clients))
			for i, c := range clients {
				subs[i] = map[string]bool{}
				switch {
				case i == 0 && !namespaced:
					c.request(nil, nil) // wildcard
				case namespaced:
					c.request([]string{"ns0", "ns3"}, nil)
					subs[i]["ns0"], subs[i]["ns3"] = true, true
				default:
					var ns []string
					for k := range 40 { // more than maxIndexed: a broad watch
						ns = append(ns, name(k*2+i))
						subs[i][name(k*2+i)] = true
					}
					c.request(ns, nil)
				}
			}
			for step := range 400 {
				changed := map[string]versioned{}
				var removed []string
				for range 1 + rng.IntN(3) {
					n := name(rng.IntN(100))
					if rng.IntN(4) == 0 {
						removed = append(removed, n)
						delete(state, n)
					} else {
						v := fmt.Sprint(step, rng.IntN(2))
						changed[n] = versionedAt(n, v)
						state[n] = v
					}
				}
				for _, n := range removed {
					delete(changed, n) // removed wins
					delete(state, n)
				}
				d.update(fmt.Sprint(step), changed, removed)
				for i, c := range clients {
					// Clients lag: some steps they read nothing; the
					// last one more updates than the log holds.
					if (i < 2 && rng.IntN(3) == 0) || step%299 == 0 {
						c.drain()
					}
				}
			}
			for i, c := range clients {
				c.drain()
				want := map[string]string{}
				for n, v := range state {
					key := d.key(n)
					if (i == 0 && !namespaced) || subs[i][key] {
						want[n] = v
					}
				}
				if !maps.Equal(c.view, want) {
					t.Fatalf("namespaced %v seed %d client %d: view %v, want %v", namespaced, seed, i, c.view, want)
				}
			}
		}
	}
}

// A stream whose acknowledgement comes after more updates than the log
// holds is compared in full, and one within the log only by the names
// the log lists: the first gets every change it missed, the second costs
// no full comparison.
func TestDeltaCacheLaggingStream(t *testing.T) {
	d := newDeltaCache(resourcev3.ClusterType, false)
	c := newCacheClient(t, d)
	c.request(nil, nil)
	c.drain()
	d.update("v1", map[string]versioned{"a": versionedAt("a", "1"), "b": versionedAt("b", "1")}, nil)
	// The response is pending (not read, so not acknowledged) while
	// "a" changes and then more updates than the log holds go by.
	d.update("v2", map[string]versioned{"a": versionedAt("a", "2")}, nil)
	for i := range maxLogUpdates + 10 {
		n := fmt.Sprintf("c%d", i)
		d.update(fmt.Sprintf("v%d", i+3), map[string]versioned{n: versionedAt(n, "1")}, nil)
	}
	c.drain()
	if got := c.view["a"]; got != "2" {
		t.Errorf("lagging stream holds a at %q, want 2", got)
	}
	if len(c.view) != maxLogUpdates+12 {
		t.Errorf("lagging stream holds %d resources, want %d", len(c.view), maxLogUpdates+12)
	}
	full := d.fullCompares
	// Within the log: each acknowledgement looks at the changed names only.
	for i := range 50 {
		d.update(fmt.Sprintf("w%d", i), map[string]versioned{"b": versionedAt("b", fmt.Sprint(i+2))}, nil)
		c.drain()
	}
	if got := c.view["b"]; got != "51" {
		t.Errorf("stream holds b at %q, want 51", got)
	}
	if d.fullCompares != full {
		t.Errorf("%d full comparisons of a stream that kept up, want 0", d.fullCompares-full)
	}
}
