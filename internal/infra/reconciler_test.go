package infra

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/proxyspec"
)

// Publish renders a Gateway only when its spec changed, and enqueues it
// only when its rendered objects changed.
func TestPublishRendersChangedSpecsOnly(t *testing.T) {
	r := New(Config{Params: params})
	defer r.queue.ShutDown()
	renders := 0
	r.render = func(s proxyspec.Spec, p Params) (*Objects, error) {
		renders++
		return RenderSpec(s, p)
	}
	drain := func() int {
		n := r.queue.Len()
		for range n {
			k, _ := r.queue.Get()
			r.queue.Done(k)
		}
		return n
	}
	gw := testGateway()
	spec := proxyspec.Spec{Gateway: gw, Ports: []int32{80}, Proxy: v1alpha1.ProxyConfigSpec{Replicas: ptr.To[int32](2)}}
	step := func(name string, s proxyspec.Spec, wantRenders, wantQueued int) {
		t.Helper()
		renders = 0
		r.Publish([]proxyspec.Spec{s})
		if renders != wantRenders {
			t.Errorf("%s: %d renders, want %d", name, renders, wantRenders)
		}
		if q := drain(); q != wantQueued {
			t.Errorf("%s: %d enqueued, want %d", name, q, wantQueued)
		}
	}
	step("first", spec, 1, 1)
	// A translation caused by a route: same Gateway object, equal proxy
	// configuration (a copy) and ports.
	same := spec
	same.Proxy = *spec.Proxy.DeepCopy()
	same.Ports = []int32{80}
	step("same spec", same, 0, 0)
	// A new Gateway object (e.g. its status was written) with the same
	// content renders again, and changes nothing.
	step("new object", proxyspec.Spec{Gateway: testGateway(), Ports: []int32{80}, Proxy: same.Proxy}, 1, 0)
	// A listener port or the proxy configuration changes the objects.
	cur := r.desired[types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}].spec
	ports := cur
	ports.Ports = []int32{80, 443}
	step("ports", ports, 1, 1)
	proxy := ports
	proxy.Proxy = v1alpha1.ProxyConfigSpec{Replicas: ptr.To[int32](3)}
	step("proxy", proxy, 1, 1)
	// A ProxyConfig the translator refuses is not rendered: the objects
	// that run stay the desired ones.
	refused := proxy
	refused.Proxy = v1alpha1.ProxyConfigSpec{Replicas: ptr.To[int32](3), Metrics: &v1alpha1.ProxyMetrics{Port: ptr.To[int32](19002)}}
	step("refused", refused, 0, 0)
	if d := r.desired[types.NamespacedName{Namespace: gw.Namespace, Name: gw.Name}]; d == nil || !reflect.DeepEqual(d.spec.Proxy, proxy.Proxy) {
		t.Errorf("after a refused spec, desired %+v, want the last accepted one", d)
	}
	step("accepted again", proxy, 0, 0)
	// UDP ports are part of the spec: a UDP port of a TCP port's number
	// changes the objects, the same UDP ports again (a copy) render
	// nothing, and dropping the TCP ports changes the objects.
	udp := proxy
	udp.UDPPorts = []int32{80}
	step("udp port", udp, 1, 1)
	udpSame := udp
	udpSame.UDPPorts = []int32{80}
	step("same udp ports", udpSame, 0, 0)
	udpOnly := udp
	udpOnly.Ports = nil
	step("udp only", udpOnly, 1, 1)
	// The Gateway goes away: enqueued for removal, nothing rendered.
	renders = 0
	r.Publish(nil)
	if renders != 0 || drain() != 1 {
		t.Errorf("removal: %d renders, want 0; want one enqueued", renders)
	}
}
