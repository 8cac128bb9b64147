package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/proxyspec"
)

// The fleet scenario: many proxies on one replica. FleetStreams delta ADS
// streams, each on its own mTLS connection with its Gateway's client
// certificate, are spread evenly over the workload's Gateways and opened
// to the follower at the largest N. Each subscribes to every type (as
// ADS does) and acknowledges every response, keeping nothing but whether
// it saw the marker of the current probe. A probe writes one route per
// Gateway at once; its figure, per stream, is the time from its Gateway's
// route write until the stream holds the route. The follower's RSS
// before and after the streams gives the memory per stream; its CPU time
// over the probes, the cost of pushing one change to every stream.
//
// The clients run in the suite's process, on the same two cores as the
// controllers: their TLS and decoding compete with the server's.

// Fleet are the fleet scenario's figures.
type Fleet struct {
	Routes   int `json:"routes"`
	Streams  int `json:"streams"`
	Gateways int `json:"gateways"`
	// ConnectSeconds: until every stream holds its Gateway's
	// configuration and the follower has been quiet for a second.
	ConnectSeconds float64 `json:"connect_seconds"`
	// Propagation is over every (stream, probe) pair that got the route.
	Propagation Latency `json:"propagation"`
	Probes      int     `json:"probes"`
	// Missed are the (stream, probe) pairs that did not get the route
	// within the probe's wait.
	Missed          int     `json:"missed"`
	RSSBeforeMiB    float64 `json:"rss_before_mib"`
	RSSAfterMiB     float64 `json:"rss_after_mib"`
	RSSPerStreamKiB float64 `json:"rss_per_stream_kib"`
	// CPUSecondsPerProbe is the follower's CPU time (user + system) per
	// probe: one route create per Gateway, pushed to every stream.
	CPUSecondsPerProbe float64 `json:"cpu_seconds_per_probe"`
	// BytesPerStreamKB is what one stream received per probe (mean).
	BytesPerStreamKB float64 `json:"bytes_per_stream_kb"`
}

// FleetTarget is issue 27's bound on the fleet's propagation p99.
const FleetTarget = 250.0 // ms

func fleetRows(fl *Fleet) []Row {
	if fl == nil || fl.Probes == 0 {
		return nil
	}
	n := fmt.Sprint(fl.Routes)
	name := fmt.Sprintf("Route create → all %d ADS streams on one replica (%d Gateways)", fl.Streams, fl.Gateways)
	rows := latencyRows(name, n, fl.Propagation, false, 0, 0)
	rows[1].Target, rows[1].Met = "≤ "+f(FleetTarget)+" ms", check(fl.Propagation.P99 <= FleetTarget && fl.Missed == 0)
	return append(rows,
		Row{Figure: "Fleet: stream-probes that missed the route", N: n, Value: fmt.Sprintf("%d of %d", fl.Missed, fl.Probes*fl.Streams), Target: "0", Met: check(fl.Missed == 0)},
		Row{Figure: "Fleet: follower RSS before / after the streams (MiB); per stream (KiB)", N: n,
			Value: fmt.Sprintf("%s / %s; %s", f(fl.RSSBeforeMiB), f(fl.RSSAfterMiB), f(fl.RSSPerStreamKiB))},
		Row{Figure: "Fleet: follower CPU per probe (one route per Gateway, to every stream) (s)", N: n, Value: f(fl.CPUSecondsPerProbe)},
		Row{Figure: "Fleet: bytes each stream received per probe (kB)", N: n, Value: f(fl.BytesPerStreamKB)},
		Row{Figure: "Fleet: all streams connected and in sync (s)", N: n, Value: f(fl.ConnectSeconds)},
	)
}

// fleetClient is one stream of the fleet.
type fleetClient struct {
	gw     string
	conn   *grpc.ClientConn
	cancel context.CancelFunc

	mu     sync.Mutex
	types  map[string]bool // types answered at least once
	marker []byte
	seen   time.Time // when the marker arrived
	bytes  int64
	last   time.Time
	err    error
}

func dialFleet(addr, gateway string, tc *tls.Config, id int) (*fleetClient, error) {
	conn, stream, cancel, err := dialDeltaADS(addr, tc)
	if err != nil {
		return nil, err
	}
	c := &fleetClient{gw: gateway, conn: conn, cancel: cancel, types: map[string]bool{}}
	node := &corev3.Node{Id: fmt.Sprintf("fleet-%d", id), Cluster: gateway}
	for i, t := range ADSTypes {
		req := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: t}
		if i == 0 {
			req.Node = node
		}
		if err := stream.Send(req); err != nil {
			c.Close()
			return nil, err
		}
	}
	go c.run(stream)
	return c, nil
}

func (c *fleetClient) run(stream discoveryv3.AggregatedDiscoveryService_DeltaAggregatedResourcesClient) {
	for {
		resp, err := stream.Recv()
		now := time.Now()
		if err != nil {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
			return
		}
		c.mu.Lock()
		c.types[resp.TypeUrl] = true
		c.bytes += int64(proto.Size(resp))
		c.last = now
		if c.marker != nil && c.seen.IsZero() {
			for _, r := range resp.Resources {
				if bytes.Contains(r.GetResource().GetValue(), c.marker) {
					c.seen = now
					break
				}
			}
		}
		c.mu.Unlock()
		if err := stream.Send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: resp.TypeUrl, ResponseNonce: resp.Nonce}); err != nil {
			return
		}
	}
}

// track starts looking for marker; it returns the bytes received so far.
func (c *fleetClient) track(marker string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.marker, c.seen = []byte(marker), time.Time{}
	return c.bytes
}

func (c *fleetClient) state() (synced bool, seen, last time.Time, received int64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.types) == len(ADSTypes), c.seen, c.last, c.bytes, c.err
}

func (c *fleetClient) Close() {
	c.cancel()
	c.conn.Close()
}

// fleetRoute is the route probe p writes on Gateway g, on one of its
// hostnames, with its own path marker.
func fleetRoute(g, p int) (*gwv1.HTTPRoute, string) {
	marker := fmt.Sprintf("/bench-fleet-%d-gw%d-z", p, g)
	r := ProbeRoute(RouteNamespace(0), fmt.Sprintf("fleet-%d-gw%d", p, g), marker, 0)
	r.Spec.ParentRefs = []gwv1.ParentReference{parentRef(GatewayName(g))}
	r.Spec.Hostnames = []gwv1.Hostname{gwv1.Hostname(Hostname(g))}
	return r, marker
}

// fleet runs the fleet scenario at N n against the follower.
func (s *suite) fleet(ctx context.Context, n int) {
	streams := s.cfg.FleetStreams
	if streams <= 0 {
		return
	}
	_, follower, err := s.roles(ctx)
	if err != nil {
		s.fail("fleet", err)
		return
	}
	fl := &Fleet{Routes: n, Streams: streams, Gateways: Gateways}
	fl.RSSBeforeMiB, _, _ = follower.ProcStatus()
	tcs := make([]*tls.Config, Gateways)
	for g := range Gateways {
		if tcs[g], err = s.clientTLSFor(ctx, GatewayName(g)); err != nil {
			s.fail("fleet", err)
			return
		}
	}
	t0 := time.Now()
	clients := make([]*fleetClient, 0, streams)
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for i := range streams {
		g := i % Gateways
		c, err := dialFleet(follower.XDSAddr, InfraNamespace+"/"+GatewayName(g), tcs[g], i)
		if err != nil {
			s.fail("fleet", fmt.Errorf("stream %d: %w", i, err))
			return
		}
		clients = append(clients, c)
		if i%50 == 49 {
			// Let each batch sync before the next: connecting all at once
			// measures the handshakes, not the steady state.
			if err := fleetSynced(ctx, clients, 2*time.Minute); err != nil {
				s.fail("fleet", err)
				return
			}
		}
	}
	if err := fleetSynced(ctx, clients, 2*time.Minute); err != nil {
		s.fail("fleet", err)
		return
	}
	fleetQuiet(ctx, clients, time.Second, time.Minute)
	fl.ConnectSeconds = round(time.Since(t0).Seconds(), 1)
	fl.RSSAfterMiB, _, _ = follower.ProcStatus()
	s.saveProfiles(ctx, "heap", fmt.Sprintf("heap-fleet-%d", n))
	fl.RSSPerStreamKiB = round((fl.RSSAfterMiB-fl.RSSBeforeMiB)*1024/float64(streams), 1)
	s.logf("fleet %d: %d streams in sync after %.1fs, follower RSS %.1f → %.1f MiB",
		n, streams, fl.ConnectSeconds, fl.RSSBeforeMiB, fl.RSSAfterMiB)

	probes := max(1, s.cfg.Probes/10)
	if s.cfg.Profiles {
		// The follower's CPU profile over the probes (the first 8 s).
		profiled := make(chan struct{})
		go func() {
			defer close(profiled)
			path := filepath.Join(s.cfg.Out, "profiles", fmt.Sprintf("cpu-fleet-%d-follower.pb.gz", n))
			if err := follower.SaveProfile(ctx, "/debug/pprof/profile?seconds=8", path); err != nil {
				s.logf("fleet: CPU profile: %v", err)
			}
		}()
		defer func() { <-profiled }()
	}
	var lat Durations
	var cpu float64
	var received int64
	for p := range probes {
		routes := make([]*gwv1.HTTPRoute, Gateways)
		markers := make([]string, Gateways)
		for g := range Gateways {
			routes[g], markers[g] = fleetRoute(g, p)
		}
		before := make([]int64, len(clients))
		for i, c := range clients {
			before[i] = c.track(markers[i%Gateways])
		}
		cpu0, _ := procCPUSeconds(follower.Pid())
		written := make([]time.Time, Gateways)
		var wg sync.WaitGroup
		errs := make([]error, Gateways)
		for g := range Gateways {
			wg.Go(func() {
				written[g] = time.Now()
				errs[g] = upsertRoute(ctx, s.cl.Client, routes[g])
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				s.fail("fleet", err)
				return
			}
		}
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			all := true
			for _, c := range clients {
				if _, seen, _, _, _ := c.state(); seen.IsZero() {
					all = false
					break
				}
			}
			if all {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		fleetQuiet(ctx, clients, 500*time.Millisecond, 10*time.Second)
		cpu1, _ := procCPUSeconds(follower.Pid())
		cpu += cpu1 - cpu0
		for i, c := range clients {
			_, seen, _, got, _ := c.state()
			received += got - before[i]
			if seen.IsZero() {
				fl.Missed++
				continue
			}
			lat = append(lat, seen.Sub(written[i%Gateways]))
		}
		for _, r := range routes {
			_ = s.cl.Client.Delete(ctx, r)
		}
		fleetQuiet(ctx, clients, 500*time.Millisecond, 10*time.Second)
	}
	fl.Probes = probes
	fl.Propagation = lat.Latency()
	fl.CPUSecondsPerProbe = round(cpu/float64(probes), 3)
	fl.BytesPerStreamKB = round(float64(received)/float64(probes*streams)/1000, 2)
	s.res.Fleet = fl
	s.logf("fleet %d: propagation to %d streams %+v (%d missed), follower CPU %.3f s per probe, %.2f kB per stream per probe",
		n, streams, fl.Propagation, fl.Missed, fl.CPUSecondsPerProbe, fl.BytesPerStreamKB)
}

// fleetSynced waits until every client has been answered for every type.
func fleetSynced(ctx context.Context, clients []*fleetClient, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		pending := 0
		for _, c := range clients {
			synced, _, _, _, err := c.state()
			if err != nil {
				return fmt.Errorf("fleet stream of %s: %w", c.gw, err)
			}
			if !synced {
				pending++
			}
		}
		if pending == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%d of %d fleet streams not in sync after %s", pending, len(clients), limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fleetQuiet waits until no client has received anything for quiet (at
// most limit).
func fleetQuiet(ctx context.Context, clients []*fleetClient, quiet, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var last time.Time
		for _, c := range clients {
			if _, _, l, _, _ := c.state(); l.After(last) {
				last = l
			}
		}
		if time.Since(last) >= quiet {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clientTLSFor is clientTLS for Gateway gw (in InfraNamespace).
func (s *suite) clientTLSFor(ctx context.Context, gw string) (*tls.Config, error) {
	return s.clientTLSOf(ctx, proxyspec.ClientCertSecretName(gw))
}
