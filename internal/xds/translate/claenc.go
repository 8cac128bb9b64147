package translate

import (
	"net/netip"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/portico-dev/portico/internal/ir"
)

// Load assignments are encoded directly.
//
// A load assignment is a list of addresses: the cluster's name, and per
// endpoint a SocketAddress (protocol, address, port) nested four messages
// deep (LocalityLbEndpoints, LbEndpoint, Endpoint, Address). Building the
// seven messages of each endpoint to have protobuf encode them, and
// validating them, was a fifth of the xDS translation of a large Gateway;
// appendLoadAssignment writes the same bytes with protowire, the field
// numbers read from the generated descriptors. The bytes are those of the
// deterministic encoding of the messages (fields in number order, nested
// messages length-prefixed, the enum left out when it is TCP, 0):
// TestLoadAssignmentEncoding compares the two on generated endpoints, and
// decodes and validates the result with the generated validation. What
// that validation would refuse is left out here instead: an address that
// is not an IP (an FQDN EndpointSlice) or has a zone, and a port of 0 or
// above 65535, which an EDS cluster cannot use; the name is checked by
// claEntry.

var (
	claEndpointsField       = fieldNumber(&endpointv3.ClusterLoadAssignment{}, "endpoints")
	localityLbEndpointField = fieldNumber(&endpointv3.LocalityLbEndpoints{}, "lb_endpoints")
	lbEndpointEndpointField = fieldNumber(&endpointv3.LbEndpoint{}, "endpoint")
	endpointAddressField    = fieldNumber(&endpointv3.Endpoint{}, "address")
	addressSocketField      = fieldNumber(&corev3.Address{}, "socket_address")
	socketProtocolField     = fieldNumber(&corev3.SocketAddress{}, "protocol")
	socketAddressField      = fieldNumber(&corev3.SocketAddress{}, "address")
	socketPortField         = fieldNumber(&corev3.SocketAddress{}, "port_value")
)

// appendLoadAssignment appends to b the encoding of the load assignment
// of cluster name: the usable endpoints of eps, in order, in one locality,
// with protocol. addrs is scratch space for the addresses, returned for
// the next call.
func appendLoadAssignment(b []byte, addrs []string, name string, protocol corev3.SocketAddress_Protocol, eps []ir.Endpoint) ([]byte, []string) {
	b = protowire.AppendTag(b, claNameField, protowire.BytesType)
	b = protowire.AppendString(b, name)
	// The usable endpoints' addresses as written (addrs[i] of eps[i],
	// "" when unusable), and the size of the locality.
	addrs = addrs[:0]
	locality := 0
	for i := range eps {
		a, ok := usableAddress(eps[i])
		if !ok {
			addrs = append(addrs, "")
			continue
		}
		addrs = append(addrs, a)
		sizes := endpointSizes(a, eps[i].Port, protocol)
		locality += protowire.SizeTag(localityLbEndpointField) + protowire.SizeBytes(sizes[3])
	}
	if locality == 0 {
		return b, addrs
	}
	b = protowire.AppendTag(b, claEndpointsField, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(locality))
	for i, a := range addrs {
		if a == "" {
			continue
		}
		port := eps[i].Port
		sizes := endpointSizes(a, port, protocol)
		b = protowire.AppendTag(b, localityLbEndpointField, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(sizes[3]))
		b = protowire.AppendTag(b, lbEndpointEndpointField, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(sizes[2]))
		b = protowire.AppendTag(b, endpointAddressField, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(sizes[1]))
		b = protowire.AppendTag(b, addressSocketField, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(sizes[0]))
		if protocol != 0 {
			b = protowire.AppendTag(b, socketProtocolField, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(protocol))
		}
		b = protowire.AppendTag(b, socketAddressField, protowire.BytesType)
		b = protowire.AppendString(b, a)
		b = protowire.AppendTag(b, socketPortField, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(port))
	}
	return b, addrs
}

// endpointSizes are the encoded sizes of the socket address, address,
// endpoint and lb endpoint messages of one endpoint.
func endpointSizes(addr string, port uint32, protocol corev3.SocketAddress_Protocol) (s [4]int) {
	s[0] = protowire.SizeTag(socketAddressField) + protowire.SizeBytes(len(addr)) +
		protowire.SizeTag(socketPortField) + protowire.SizeVarint(uint64(port))
	if protocol != 0 {
		s[0] += protowire.SizeTag(socketProtocolField) + protowire.SizeVarint(uint64(protocol))
	}
	s[1] = protowire.SizeTag(addressSocketField) + protowire.SizeBytes(s[0])
	s[2] = protowire.SizeTag(endpointAddressField) + protowire.SizeBytes(s[1])
	s[3] = protowire.SizeTag(lbEndpointEndpointField) + protowire.SizeBytes(s[2])
	return s
}

// usableAddress is the address of e as the load assignment writes it,
// and whether an EDS cluster can use e: an IP without zone, a port in
// 1..65535. IPv4 addresses parse only in their canonical form; IPv6 ones
// are written canonically.
func usableAddress(e ir.Endpoint) (string, bool) {
	addr, err := netip.ParseAddr(e.Address)
	if err != nil || addr.Zone() != "" || e.Port == 0 || e.Port > 65535 {
		return "", false
	}
	if addr.Is4() {
		return e.Address, true
	}
	return addr.Unmap().String(), true
}
