package translate

import (
	"fmt"
	"net/netip"

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

// checkBindAddresses refuses bind addresses that are not distinct IP
// addresses in canonical form (Envoy would refuse the listeners).
func checkBindAddresses(addrs []string) error {
	seen := map[string]bool{}
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil || ip.String() != a || ip.Zone() != "" {
			return fmt.Errorf("bind address %q is not an IP address in canonical form", a)
		}
		if seen[a] {
			return fmt.Errorf("bind address %s is listed twice", a)
		}
		seen[a] = true
	}
	return nil
}
