package translate

import (
	"strings"
	"testing"

	"github.com/portico-dev/portico/internal/ir"
)

// A port number is taken once per transport: a TCP and a UDP listener may
// share it (DNS on 53/TCP and 53/UDP), two UDP listeners may not.
func TestL4PortsPerTransport(t *testing.T) {
	g := l4Gateway()
	g.Listeners = append(g.Listeners, &ir.Listener{Name: "tcp-53", Port: 53, Protocol: ir.ProtocolTCP,
		FilterChains: []*ir.FilterChain{{Name: "tcp-53", TCP: tcpRoute("tcproute/default/dns/rule/0", to(clusterTCPA, 1))}}})
	if _, err := Translate(g); err != nil {
		t.Fatalf("TCP and UDP on port 53: %v", err)
	}
	g = l4Gateway()
	g.Listeners = append(g.Listeners, &ir.Listener{Name: "udp-53-again", Port: 53, Protocol: ir.ProtocolUDP,
		UDP: &ir.UDPForward{Name: "udproute/default/dns2/rule/0", Backends: []ir.WeightedBackend{to(clusterDNSA, 1)}}})
	if _, err := Translate(g); err == nil || !strings.Contains(err.Error(), "both use port 53") {
		t.Fatalf("two UDP listeners on port 53: err %v, want both use port 53", err)
	}
}
