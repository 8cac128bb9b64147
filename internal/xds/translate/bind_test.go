package translate

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/portico-dev/portico/internal/ir"
)

// Listeners bind to the Gateway's addresses, the first as the address and
// the others as additional addresses; bad addresses are an error.
func TestBindAddresses(t *testing.T) {
	gw := &ir.Gateway{Namespace: "ns", Name: "gw", Addresses: []string{"192.0.2.1", "2001:db8::1"}, Listeners: []*ir.Listener{{
		Name: "http-80", Port: 80, Protocol: ir.ProtocolHTTP,
		FilterChains: []*ir.FilterChain{{Name: "http-80", RouteConfig: &ir.RouteConfig{Name: "ns/gw/http-80"}}},
	}}}
	res, err := Translate(gw)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Listeners) != 1 {
		t.Fatalf("%d listeners", len(res.Listeners))
	}
	l, ok := res.Listeners[0].(*listenerv3.Listener)
	if !ok {
		t.Fatalf("listener %T", res.Listeners[0])
	}
	if a := l.GetAddress().GetSocketAddress(); a.GetAddress() != "192.0.2.1" || a.GetPortValue() != 80 {
		t.Errorf("address = %v", a)
	}
	if len(l.AdditionalAddresses) != 1 || l.AdditionalAddresses[0].GetAddress().GetSocketAddress().GetAddress() != "2001:db8::1" {
		t.Errorf("additional addresses = %v", l.AdditionalAddresses)
	}
	for _, bad := range [][]string{{"gw.example.com"}, {"2001:DB8::1"}, {"192.0.2.1", "192.0.2.1"}} {
		gw.Addresses = bad
		if _, err := Translate(gw); err == nil {
			t.Errorf("addresses %v: no error", bad)
		}
	}
}
