package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// ADSTypes are the types the client subscribes to (wildcard): those a
// proxy holds, with the virtual hosts of its route tables, which delta
// clients get by VHDS, so a Track finds a route in them, and the scopes
// and host-scope filters of tables in scoped form.
var ADSTypes = []string{
	resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.ListenerType,
	resourcev3.RouteType, resourcev3.SecretType, resourcev3.VirtualHostType,
	resourcev3.ScopedRouteType, resourcev3.ExtensionConfigType,
}

// ADS is an incremental (Delta) ADS client of one Gateway, as an Envoy
// opens it: it subscribes to every type (wildcard), ACKs each response and
// keeps the resources it holds. It records when each response arrived and
// how many bytes it carried (virtual hosts included), and when each
// endpoint address appeared.
type ADS struct {
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	node   *corev3.Node

	mu        sync.Mutex
	state     map[string]map[string]*discoveryv3.Resource // type → name → resource
	bytes     int64                                       // proto.Size of resources received
	responses int64
	last      time.Time // arrival of the latest response
	tracks    []*Track
	conds     []*Cond
	// Endpoint addresses: per ClusterLoadAssignment, and since when each
	// address has been in at least one.
	claAddrs  map[string][]string
	addrCount map[string]int
	addrSince map[string]time.Time
	changed   chan struct{} // closed and replaced on every response
	err       error
}

// dialDeltaADS opens a connection to addr (plaintext when tc is nil) and
// a delta ADS stream on it, ended by cancel.
func dialDeltaADS(addr string, tc *tls.Config) (*grpc.ClientConn, discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient, context.CancelFunc, error) {
	creds := insecure.NewCredentials()
	if tc != nil {
		creds = credentials.NewTLS(tc)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		cancel()
		conn.Close()
		return nil, nil, nil, err
	}
	return conn, stream, cancel, nil
}

// DialADS connects to addr as a proxy of gateway ("ns/name"). With tc nil
// it uses plaintext.
func DialADS(addr, gateway string, tc *tls.Config) (*ADS, error) {
	conn, stream, cancel, err := dialDeltaADS(addr, tc)
	if err != nil {
		return nil, err
	}
	a := &ADS{
		conn: conn, cancel: cancel,
		node:      &corev3.Node{Id: "portico-bench", Cluster: gateway},
		state:     map[string]map[string]*discoveryv3.Resource{},
		claAddrs:  map[string][]string{},
		addrCount: map[string]int{},
		addrSince: map[string]time.Time{},
		changed:   make(chan struct{}),
	}
	for _, t := range ADSTypes {
		a.state[t] = map[string]*discoveryv3.Resource{}
		req := &discoveryv3.DeltaDiscoveryRequest{Node: a.node, TypeUrl: t, ResourceNamesSubscribe: []string{"*"}}
		if err := stream.Send(req); err != nil {
			a.Close()
			return nil, err
		}
	}
	go a.recv(stream)
	return a, nil
}

// Close ends the stream.
func (a *ADS) Close() {
	a.cancel()
	a.conn.Close()
}

func (a *ADS) recv(stream discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient) {
	for {
		resp, err := stream.Recv()
		if err != nil {
			a.mu.Lock()
			a.err = err
			close(a.changed)
			a.changed = make(chan struct{})
			a.mu.Unlock()
			return
		}
		a.apply(resp, time.Now())
		ack := &discoveryv3.DeltaDiscoveryRequest{Node: a.node, TypeUrl: resp.TypeUrl, ResponseNonce: resp.Nonce}
		if err := stream.Send(ack); err != nil {
			a.mu.Lock()
			a.err = err
			a.mu.Unlock()
			return
		}
	}
}

func (a *ADS) apply(resp *discoveryv3.DeltaDiscoveryResponse, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.state[resp.TypeUrl]
	if st == nil {
		st = map[string]*discoveryv3.Resource{}
		a.state[resp.TypeUrl] = st
	}
	for _, r := range resp.Resources {
		a.bytes += int64(proto.Size(r))
		st[r.Name] = r
		if resp.TypeUrl == resourcev3.EndpointType {
			a.setAddrs(r.Name, claAddresses(r), at)
		}
	}
	for _, name := range resp.RemovedResources {
		delete(st, name)
		if resp.TypeUrl == resourcev3.EndpointType {
			a.setAddrs(name, nil, at)
		}
	}
	for _, t := range a.tracks {
		t.update(resp, at)
	}
	for _, c := range a.conds {
		if c.types[resp.TypeUrl] {
			c.update(a.state, at)
		}
	}
	a.responses++
	a.last = at
	close(a.changed)
	a.changed = make(chan struct{})
}

func (a *ADS) setAddrs(cla string, addrs []string, at time.Time) {
	for _, old := range a.claAddrs[cla] {
		if a.addrCount[old]--; a.addrCount[old] <= 0 {
			delete(a.addrCount, old)
			delete(a.addrSince, old)
		}
	}
	if len(addrs) == 0 {
		delete(a.claAddrs, cla)
		return
	}
	a.claAddrs[cla] = addrs
	for _, n := range addrs {
		if a.addrCount[n]++; a.addrCount[n] == 1 {
			a.addrSince[n] = at
		}
	}
}

func claAddresses(r *discoveryv3.Resource) []string {
	cla := &endpointv3.ClusterLoadAssignment{}
	if r.Resource == nil || r.Resource.UnmarshalTo(cla) != nil {
		return nil
	}
	var out []string
	for _, l := range cla.Endpoints {
		for _, e := range l.LbEndpoints {
			if s := e.GetEndpoint().GetAddress().GetSocketAddress(); s != nil {
				out = append(out, s.Address)
			}
		}
	}
	return out
}

// Stats are the cumulative bytes and responses received, and the arrival
// of the latest response.
func (a *ADS) Stats() (bytes, responses int64, last time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.bytes, a.responses, a.last
}

// WaitQuiet waits until no response arrived for quiet, at most max.
func (a *ADS) WaitQuiet(quiet, max time.Duration) {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) {
		_, _, last := a.Stats()
		if idle := time.Since(last); idle >= quiet {
			return
		} else {
			time.Sleep(quiet - idle)
		}
	}
}

// WaitAddress waits until endpoint address addr is (present) or is not
// (!present) in any ClusterLoadAssignment, and returns when that became so:
// for a present address, the arrival of the response that first had it.
func (a *ADS) WaitAddress(ctx context.Context, addr string, present bool) (time.Time, error) {
	for {
		a.mu.Lock()
		since, ok := a.addrSince[addr]
		ch, err, last := a.changed, a.err, a.last
		a.mu.Unlock()
		if ok == present {
			if present {
				return since, nil
			}
			return last, nil
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("ads stream: %w", err)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// Track follows whether any resource contains a byte marker (a string
// field, e.g. a route's path, appears verbatim in the wire encoding),
// whatever its type: route tables may be split or moved to other types
// without the suite noticing. It only looks at the resources of each
// response, so it stays cheap when the config is large.
type Track struct {
	marker  []byte
	holders map[string]bool // type + " " + name of resources containing the marker
	since   time.Time       // when holders last went from empty to not, or back
	changed chan struct{}
}

// Track starts tracking marker, from the current state on. Register it
// before making the change it should see.
func (a *ADS) Track(marker string) *Track {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := &Track{marker: []byte(marker), holders: map[string]bool{},
		since: time.Now(), changed: make(chan struct{})}
	for typeURL, st := range a.state {
		for name, r := range st {
			if t.contains(r) {
				t.holders[typeURL+" "+name] = true
			}
		}
	}
	a.tracks = append(a.tracks, t)
	return t
}

// Untrack stops updating t.
func (a *ADS) Untrack(t *Track) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.tracks = removeFirst(a.tracks, t)
}

// removeFirst removes the first x from list, if there.
func removeFirst[T comparable](list []T, x T) []T {
	if i := slices.Index(list, x); i >= 0 {
		return slices.Delete(list, i, i+1)
	}
	return list
}

func (t *Track) contains(r *discoveryv3.Resource) bool {
	return r.Resource != nil && bytes.Contains(r.Resource.Value, t.marker)
}

// update is called with the ADS lock held.
func (t *Track) update(resp *discoveryv3.DeltaDiscoveryResponse, at time.Time) {
	before := len(t.holders) > 0
	for _, r := range resp.Resources {
		if t.contains(r) {
			t.holders[resp.TypeUrl+" "+r.Name] = true
		} else {
			delete(t.holders, resp.TypeUrl+" "+r.Name)
		}
	}
	for _, name := range resp.RemovedResources {
		delete(t.holders, resp.TypeUrl+" "+name)
	}
	if after := len(t.holders) > 0; after != before {
		t.since = at
		close(t.changed)
		t.changed = make(chan struct{})
	}
}

// Wait waits until the marker is (present) or is not (!present) held and
// returns the arrival of the response that made it so (the registration
// time if it already was).
func (a *ADS) Wait(ctx context.Context, t *Track, present bool) (time.Time, error) {
	for {
		a.mu.Lock()
		held, since, ch, err := len(t.holders) > 0, t.since, t.changed, a.err
		a.mu.Unlock()
		if held == present {
			return since, nil
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("ads stream: %w", err)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return time.Time{}, errors.Join(ctx.Err(), fmt.Errorf("marker %q not %s", t.marker, map[bool]string{true: "present", false: "absent"}[present]))
		case <-time.After(time.Second):
			// a.err is only checked here and on changes of t; poll it.
		}
	}
}

// StateSize is the number of resources of a type the client holds and
// the sum of their sizes.
func (a *ADS) StateSize(typeURL string) (n int, size int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.state[typeURL] {
		size += int64(proto.Size(r))
	}
	return len(a.state[typeURL]), size
}

// Cond follows whether a predicate over the resources the client holds is
// true, as Track follows a marker: where a marker cannot say that a change
// is served (a TCPRoute is served by a listener and the clusters it
// names, tcproute.go), the predicate reads the decoded state. It is
// evaluated after each response of one of its types, with the state that
// response left, under the client's lock: it must be cheap and must not
// keep the map.
type Cond struct {
	pred    func(state map[string]map[string]*discoveryv3.Resource) bool
	types   map[string]bool
	held    bool
	since   time.Time // when held last changed (registration, at first)
	changed chan struct{}
}

// Cond starts following pred, evaluated now and after each response of
// types. Register it before making the change it should see.
func (a *ADS) Cond(pred func(state map[string]map[string]*discoveryv3.Resource) bool, types ...string) *Cond {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := &Cond{pred: pred, types: map[string]bool{}, since: time.Now(), changed: make(chan struct{})}
	for _, t := range types {
		c.types[t] = true
	}
	c.held = pred(a.state)
	a.conds = append(a.conds, c)
	return c
}

// RemoveCond stops evaluating c.
func (a *ADS) RemoveCond(c *Cond) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.conds = removeFirst(a.conds, c)
}

// Holds reports whether c holds now.
func (a *ADS) Holds(c *Cond) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return c.held
}

// update is called with the ADS lock held.
func (c *Cond) update(state map[string]map[string]*discoveryv3.Resource, at time.Time) {
	if held := c.pred(state); held != c.held {
		c.held, c.since = held, at
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

// WaitCond waits until c holds (want) or does not (!want) and returns the
// arrival of the response that made it so (the registration time if it
// already was).
func (a *ADS) WaitCond(ctx context.Context, c *Cond, want bool) (time.Time, error) {
	for {
		a.mu.Lock()
		held, since, ch, err := c.held, c.since, c.changed, a.err
		a.mu.Unlock()
		if held == want {
			return since, nil
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("ads stream: %w", err)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return time.Time{}, errors.Join(ctx.Err(), fmt.Errorf("condition not %v", want))
		case <-time.After(time.Second):
			// a.err is only checked here and on changes of c; poll it.
		}
	}
}
