package translate

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
)

// bindAddresses sets where listener out listens: on port of every
// address of addrs (ir.Gateway.Addresses: the first as the listener's
// address, the others as additional_addresses), or of all addresses
// (0.0.0.0) when there are none.
func bindAddresses(out *listenerv3.Listener, addrs []string, port uint32, proto corev3.SocketAddress_Protocol) {
	if len(addrs) == 0 {
		addrs = []string{"0.0.0.0"}
	}
	for i, a := range addrs {
		sa := socketAddress(a, port)
		sa.GetSocketAddress().Protocol = proto
		if i == 0 {
			out.Address = sa
			continue
		}
		out.AdditionalAddresses = append(out.AdditionalAddresses, &listenerv3.AdditionalAddress{Address: sa})
	}
}
