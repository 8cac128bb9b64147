package infra

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/portico-dev/portico/internal/proxyspec"
)

// Against a real API server, the listener ports over TCP and UDP: a number
// that is both gets two Service ports and two container ports, which the
// API server accepts (unique names, valid IANA service names); a later
// spec's ports replace the earlier ones protocol by protocol (server-side
// apply keys Service and container ports by number and protocol, so
// dropping the TCP port of a number leaves its UDP port, and the other
// way round); a Gateway with UDP listeners only has no placeholder port.
func TestReconcilerTCPAndUDPPorts(t *testing.T) {
	a := startAPIReconciler(t)
	ctx := context.Background()
	if err := a.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}); err != nil {
		t.Fatal(err)
	}
	gw := gatewayIn("apps", "dns")
	key := types.NamespacedName{Namespace: "apps", Name: proxyspec.Name(gw.Name)}

	// check compares the live Service's and Envoy container's ports with
	// want, "name/number/protocol" in rendering order.
	check := func(t *testing.T, want ...string) {
		t.Helper()
		var svc corev1.Service
		if err := a.c.Get(ctx, key, &svc); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range svc.Spec.Ports {
			if p.TargetPort.IntValue() != int(p.Port) {
				t.Errorf("Service port %s: targetPort %s, want %d", p.Name, p.TargetPort.String(), p.Port)
			}
			got = append(got, fmt.Sprintf("%s/%d/%s", p.Name, p.Port, p.Protocol))
		}
		if !slices.Equal(got, want) {
			t.Errorf("Service ports = %v, want %v", got, want)
		}
		got = nil
		for _, c := range a.deployment(t, gw).Spec.Template.Spec.Containers {
			if c.Name != EnvoyContainerName {
				continue
			}
			for _, p := range c.Ports {
				if p.Name != "metrics" {
					got = append(got, fmt.Sprintf("%s/%d/%s", p.Name, p.ContainerPort, p.Protocol))
				}
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("Envoy container ports = %v, want %v", got, want)
		}
	}

	spec := proxyspec.Spec{Gateway: gw, Ports: []int32{53, 8080}, UDPPorts: []int32{53}}
	a.publishAndWait(t, spec, false)
	check(t, "port-53/53/TCP", "udp-53/53/UDP", "port-8080/8080/TCP")

	// The TCP port 53 goes, the UDP one stays.
	spec.Ports = []int32{8080}
	a.publishAndWait(t, spec, false)
	check(t, "udp-53/53/UDP", "port-8080/8080/TCP")

	// UDP only: no TCP port, no placeholder.
	spec.Ports, spec.UDPPorts = nil, []int32{53, 5353}
	a.publishAndWait(t, spec, false)
	check(t, "udp-53/53/UDP", "udp-5353/5353/UDP")

	// The UDP port 53 goes and a TCP one of that number comes.
	spec.Ports, spec.UDPPorts = []int32{53}, []int32{5353}
	a.publishAndWait(t, spec, false)
	check(t, "port-53/53/TCP", "udp-5353/5353/UDP")

	// No listener left: the placeholder.
	spec.Ports, spec.UDPPorts = nil, nil
	a.publishAndWait(t, spec, false)
	var svc corev1.Service
	if err := a.c.Get(ctx, key, &svc); err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "none" {
		t.Errorf("Service ports without listeners = %+v, want the placeholder", svc.Spec.Ports)
	}
}
