package translate

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/proto"

	"github.com/portico-dev/portico/internal/ir"
)

// loadAssignmentMessage is the load assignment appendLoadAssignment
// encodes, built as messages: the reference it is compared with.
func loadAssignmentMessage(name string, protocol corev3.SocketAddress_Protocol, eps []ir.Endpoint) *endpointv3.ClusterLoadAssignment {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: name}
	var lbs []*endpointv3.LbEndpoint
	for _, e := range eps {
		addr, err := netip.ParseAddr(e.Address)
		if err != nil || addr.Zone() != "" || e.Port == 0 || e.Port > 65535 {
			continue
		}
		lbs = append(lbs, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Protocol:      protocol,
				Address:       addr.Unmap().String(),
				PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: e.Port},
			}}},
		}}})
	}
	if len(lbs) > 0 {
		cla.Endpoints = []*endpointv3.LocalityLbEndpoints{{LbEndpoints: lbs}}
	}
	return cla
}

// randomEndpoints are n endpoints of every kind the encoder meets: IPv4,
// IPv6 (long, short, mapped IPv4), zoned, FQDN and empty addresses, ports
// at and beyond the bounds.
func randomEndpoints(r *rand.Rand, n int) []ir.Endpoint {
	ports := []uint32{0, 1, 80, 127, 128, 16383, 16384, 65535, 65536, 1 << 31}
	var out []ir.Endpoint
	for range n {
		var a string
		switch r.IntN(8) {
		case 0, 1, 2:
			a = fmt.Sprintf("10.%d.%d.%d", r.IntN(256), r.IntN(256), r.IntN(256))
		case 3:
			a = fmt.Sprintf("fd00::%x:%x", r.IntN(1<<16), r.IntN(1<<16))
		case 4:
			a = fmt.Sprintf("2001:0db8:0000:0000:0000:0000:%04x:0001", r.IntN(1<<16))
		case 5:
			a = fmt.Sprintf("::ffff:192.0.2.%d", r.IntN(256))
		case 6:
			a = []string{"fe80::1%eth0", "backend.example.com", "", "10.0.0.256", "010.0.0.1"}[r.IntN(5)]
		default:
			a = "192.0.2.1"
		}
		out = append(out, ir.Endpoint{Address: a, Port: ports[r.IntN(len(ports))]})
	}
	return out
}

// The direct encoding is byte for byte the deterministic encoding of the
// messages, which decodes and passes the generated validation.
func TestLoadAssignmentEncoding(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var buf []byte
	var addrs []string
	for i := range 2000 {
		eps := randomEndpoints(r, r.IntN(6))
		protocol := corev3.SocketAddress_TCP
		if i%3 == 0 {
			protocol = corev3.SocketAddress_UDP
		}
		name := fmt.Sprintf("ns-%d/svc/%d", i, r.IntN(70000))
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(loadAssignmentMessage(name, protocol, eps))
		if err != nil {
			t.Fatal(err)
		}
		buf, addrs = appendLoadAssignment(buf[:0], addrs, name, protocol, eps)
		if !bytes.Equal(buf, want) {
			t.Fatalf("endpoints %v (%s): encoded\n%x\nwant\n%x", eps, protocol, buf, want)
		}
		var got endpointv3.ClusterLoadAssignment
		if err := proto.Unmarshal(buf, &got); err != nil {
			t.Fatal(err)
		}
		if err := got.ValidateAll(); err != nil {
			t.Fatalf("endpoints %v: %v", eps, err)
		}
	}
}

// A cluster without a name has no load assignment: the name is required.
func TestLoadAssignmentNeedsName(t *testing.T) {
	if _, err := (&translator{}).claEntry(&ir.Cluster{Endpoints: []ir.Endpoint{{Address: "10.0.0.1", Port: 80}}}); err == nil {
		t.Fatal("a load assignment without a cluster name was made")
	}
}
