package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// adsStream is a real ADS (SotW) client for one type, as a proxy of gateway
// would open.
type adsStream struct {
	t       *testing.T
	conn    *grpc.ClientConn
	stream  discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	node    *corev3.Node
	typeURL string
	cancel  context.CancelFunc
}

func dialADS(t *testing.T, addr, gateway, typeURL string) *adsStream {
	t.Helper()
	return dialADSAs(t, addr, "test-proxy", gateway, typeURL)
}

// dialADSAs is dialADS for the proxy of node id node.
func dialADSAs(t *testing.T, addr, node, gateway, typeURL string) *adsStream {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	a := &adsStream{t: t, conn: conn, stream: stream, typeURL: typeURL, cancel: cancel,
		node: &corev3.Node{Id: node, Cluster: gateway}}
	t.Cleanup(func() { a.cancel(); _ = a.conn.Close() })
	if err := stream.Send(&discoveryv3.DiscoveryRequest{Node: a.node, TypeUrl: typeURL}); err != nil {
		t.Fatal(err)
	}
	return a
}

// next waits up to timeout for the next response and ACKs it.
func (a *adsStream) next(timeout time.Duration) (*discoveryv3.DiscoveryResponse, error) {
	r, err := a.recvNoAck(timeout)
	if err != nil {
		return nil, err
	}
	ack := &discoveryv3.DiscoveryRequest{Node: a.node, TypeUrl: a.typeURL, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce}
	if err := a.stream.Send(ack); err != nil {
		return nil, err
	}
	return r, nil
}

// recvNoAck waits up to timeout for the stream's next response and does
// not answer it.
func (a *adsStream) recvNoAck(timeout time.Duration) (*discoveryv3.DiscoveryResponse, error) {
	type res struct {
		r   *discoveryv3.DiscoveryResponse
		err error
	}
	ch := make(chan res, 1)
	go func() {
		r, err := a.stream.Recv()
		ch <- res{r, err}
	}()
	select {
	case x := <-ch:
		return x.r, x.err
	case <-time.After(timeout):
		a.cancel() // unblocks the Recv goroutine
		return nil, fmt.Errorf("no %s response within %s", a.typeURL, timeout)
	}
}

// waitFor reads responses until match accepts one, or timeout passes.
func (a *adsStream) waitFor(timeout time.Duration, match func(*discoveryv3.DiscoveryResponse) bool) (*discoveryv3.DiscoveryResponse, error) {
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, fmt.Errorf("no matching %s response within %s", a.typeURL, timeout)
		}
		r, err := a.next(left)
		if err != nil {
			return nil, err
		}
		if match(r) {
			return r, nil
		}
	}
}

// endpointsHave reports whether an EDS response holds addr in any
// ClusterLoadAssignment.
func endpointsHave(r *discoveryv3.DiscoveryResponse, addr string) bool {
	for _, any := range r.Resources {
		cla := &endpointv3.ClusterLoadAssignment{}
		if err := any.UnmarshalTo(cla); err != nil {
			continue
		}
		for _, l := range cla.Endpoints {
			for _, e := range l.LbEndpoints {
				if e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress() == addr {
					return true
				}
			}
		}
	}
	return false
}

const (
	typeEDS = resourcev3.EndpointType
	typeCDS = resourcev3.ClusterType
	typeLDS = resourcev3.ListenerType
)
