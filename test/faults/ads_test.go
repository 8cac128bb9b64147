package faults

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	corev1 "k8s.io/api/core/v1"
)

const (
	typeEDS = resourcev3.EndpointType
	typeCDS = resourcev3.ClusterType
)

// adsResponse is a response with the time it arrived.
type adsResponse struct {
	*discoveryv3.DiscoveryResponse
	at time.Time
}

// adsStream is a real ADS (SotW) client of one type, as an Envoy of a
// Gateway opens it: mutual TLS with the Gateway's client certificate,
// node.cluster = namespace/name; every response is ACKed. Like a proxy, it
// keeps the resources of a type that is not sent in full (EDS): a response
// of such a type carries the resources that changed, and adds to or
// replaces those received before.
type adsStream struct {
	typeURL string
	resp    chan adsResponse
	errc    chan error
	known   map[string]*anypb.Any // EDS: every load assignment received, by cluster name
}

func dialADS(t *testing.T, addr, gateway string, secret *corev1.Secret, typeURL string) *adsStream {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(secret.Data["ca.crt"])
	cert, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"])
	if err != nil {
		t.Fatal(err)
	}
	tc := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); _ = conn.Close() })
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	node := &corev3.Node{Id: "faults-" + t.Name(), Cluster: gateway}
	if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: node, TypeUrl: typeURL}); err != nil {
		t.Fatal(err)
	}
	a := &adsStream{typeURL: typeURL, resp: make(chan adsResponse, 1024), errc: make(chan error, 1)}
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				a.errc <- err
				return
			}
			at := time.Now()
			ack := &discoveryv3.DiscoveryRequest{Node: node, TypeUrl: typeURL, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce}
			if err := stream.Send(ack); err != nil {
				a.errc <- err
				return
			}
			select {
			case a.resp <- adsResponse{r, at}:
			default: // a test that stopped reading
			}
		}
	}()
	return a
}

// waitFor reads responses until match accepts one, or timeout passes.
func (a *adsStream) waitFor(timeout time.Duration, match func(*discoveryv3.DiscoveryResponse) bool) (adsResponse, error) {
	deadline := time.After(timeout)
	for {
		select {
		case r := <-a.resp:
			if a.typeURL == typeEDS {
				r.DiscoveryResponse = a.merge(r.DiscoveryResponse)
			}
			if match(r.DiscoveryResponse) {
				return r, nil
			}
		case err := <-a.errc:
			a.errc <- err
			return adsResponse{}, fmt.Errorf("ADS stream (%s): %w", a.typeURL, err)
		case <-deadline:
			return adsResponse{}, fmt.Errorf("no matching %s response within %s", a.typeURL, timeout)
		}
	}
}

// merge adds the load assignments of an EDS response to those received
// before and returns a response holding all of them.
func (a *adsStream) merge(r *discoveryv3.DiscoveryResponse) *discoveryv3.DiscoveryResponse {
	if a.known == nil {
		a.known = map[string]*anypb.Any{}
	}
	for _, res := range r.Resources {
		cla := &endpointv3.ClusterLoadAssignment{}
		if err := res.UnmarshalTo(cla); err == nil {
			a.known[cla.ClusterName] = res
		}
	}
	out := proto.Clone(r).(*discoveryv3.DiscoveryResponse)
	out.Resources = nil
	for _, name := range slices.Sorted(maps.Keys(a.known)) {
		out.Resources = append(out.Resources, a.known[name])
	}
	return out
}

// endpoints returns the endpoint addresses of an EDS response.
func endpoints(r *discoveryv3.DiscoveryResponse) map[string]bool {
	out := map[string]bool{}
	for _, any := range r.Resources {
		cla := &endpointv3.ClusterLoadAssignment{}
		if err := any.UnmarshalTo(cla); err != nil {
			continue
		}
		for _, l := range cla.Endpoints {
			for _, e := range l.LbEndpoints {
				out[e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress()] = true
			}
		}
	}
	return out
}

// endpointsAre reports whether an EDS response holds exactly addrs.
func endpointsAre(addrs ...string) func(*discoveryv3.DiscoveryResponse) bool {
	return func(r *discoveryv3.DiscoveryResponse) bool {
		got := endpoints(r)
		if len(got) != len(addrs) {
			return false
		}
		for _, a := range addrs {
			if !got[a] {
				return false
			}
		}
		return true
	}
}

// clusterNames returns the cluster names of a CDS response.
func clusterNames(r *discoveryv3.DiscoveryResponse) []string {
	var out []string
	for _, any := range r.Resources {
		c := &clusterv3.Cluster{}
		if err := any.UnmarshalTo(c); err == nil {
			out = append(out, c.Name)
		}
	}
	return out
}
