package dataplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/portico-dev/portico/internal/testenv"
)

// TestUDPLoadBalancer: a LoadBalancer Service with a UDP port (and a TCP
// port of the same number) in front of Pods running the conformance
// suite's UDP echo. Datagrams round-trip through the load-balancer
// address, answered from the address and port the client sent to; a
// client keeps its Pod; new client sockets reach both Pods; a Pod that
// stops being Ready (it still runs) gets no new session and its sessions
// move; a Service with UDP ports only gets an address too.
func TestUDPLoadBalancer(t *testing.T) {
	dp, cs, echo := startEchoDataPlane(t)
	ctx := context.Background()

	const ns = "default"
	ips := map[string]string{"udp-a": "10.244.3.5", "udp-b": "10.244.3.6"}
	for name, ip := range ips {
		udp := corev1.Container{
			Name: "udp", Image: "registry.k8s.io/gateway-api/conformance/echo-basic:v1.7.0",
			Env: []corev1.EnvVar{{Name: "UDP_ECHO_SERVER", Value: "1"}, {Name: "UDP_PORT", Value: "5300"},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
			Ports: []corev1.ContainerPort{{Name: "dns", ContainerPort: 5300, Protocol: corev1.ProtocolUDP}},
		}
		if name == "udp-b" {
			// Ready while the test's gate listens in its namespace.
			udp.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(9000)}}}
		}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "udp"}},
			Spec: corev1.PodSpec{
				NodeName: "kwok-node-0", AutomountServiceAccountToken: ptr.To(false),
				Containers: []corev1.Container{udp, {
					Name: "http", Image: "registry.k8s.io/gateway-api/conformance/echo-basic:v1.7.0",
					Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
				}},
			},
		}
		created, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// What kwok's pod-ready stage does.
		created.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, HostIP: "127.0.0.1"}
		if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// udp-b's readiness gate: a TCP listener on 9000 in its namespace,
	// which the test stops to make it not Ready while its echo runs.
	var bNetns string
	eventually(t, 30*time.Second, "udp-b running", func() error {
		var ok bool
		bNetns, ok = podNetns(dp, ns, "udp-b")
		if !ok {
			return errors.New("not running")
		}
		return nil
	})
	gate := testenv.StartProcess(t, "gate", t.TempDir(), []string{"ip", "netns", "exec", bNetns, echo},
		"TCP_ECHO_SERVER=1", "TCP_PORT=9000", "POD_NAME=gate")

	// UDP 53 to the Pods' named UDP port, TCP 53 to their HTTP echo.
	for _, svc := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "udp-echo"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "udp"},
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("dns")},
				{Name: "web", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(3000)},
			}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "udp-only"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "udp"},
			Ports: []corev1.ServicePort{{Port: 5353, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5300)}}}},
	} {
		if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lbOf := func(name string) netip.Addr {
		var ip netip.Addr
		eventually(t, 30*time.Second, "the load-balancer address of "+name, func() error {
			s, err := cs.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if in := s.Status.LoadBalancer.Ingress; len(in) == 1 {
				ip, err = netip.ParseAddr(in[0].IP)
				return err
			}
			return errors.New("no address yet")
		})
		return ip
	}
	lb := netip.AddrPortFrom(lbOf("udp-echo"), 53)

	// A round trip, answered from lb; the session keeps its Pod.
	first := newUDPSocket(t)
	var pod string
	eventually(t, 30*time.Second, "an answer through the load balancer", func() error {
		var err error
		pod, err = askEcho(first, lb, "hello")
		return err
	})
	for i := range 5 {
		if again, err := askEcho(first, lb, fmt.Sprintf("again %d", i)); err != nil || again != pod {
			t.Errorf("datagram %d of the session: answered by %q (%v), want %s", i, again, err, pod)
		}
	}
	// The TCP port of the same number.
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + lb.String() + "/")
	if err != nil {
		t.Fatalf("TCP %s: %v", lb, err)
	}
	var body struct{ Pod string }
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if _, known := ips[body.Pod]; err != nil || !known {
		t.Errorf("TCP %s answered by %q (%v)", lb, body.Pod, err)
	}

	// Both Pods get sessions over new client sockets; keep one of udp-b's.
	var onB *net.UDPConn
	eventually(t, 30*time.Second, "sessions with both Pods", func() error {
		seen := map[string]bool{}
		for i := range 10 {
			c := newUDPSocket(t)
			p, err := askEcho(c, lb, fmt.Sprintf("client %d", i))
			if err != nil {
				return err
			}
			seen[p] = true
			if p == "udp-b" && onB == nil {
				onB = c
			}
		}
		if !seen["udp-a"] || !seen["udp-b"] {
			return fmt.Errorf("answered by %v", seen)
		}
		return nil
	})

	// udp-b not Ready: out of the load balancer, still running.
	if err := gate.Stop(); err != nil {
		t.Logf("gate: %v", err)
	}
	eventually(t, 15*time.Second, "udp-b out of the UDP load balancer", func() error {
		ts := udpTargetsOf(dp, ns+"/udp-echo", 53)
		if len(ts) != 1 || ts[0].addr.Addr().String() != ips["udp-a"] {
			return fmt.Errorf("targets %v", ts)
		}
		return nil
	})
	for i := range 20 {
		if p, err := askEcho(newUDPSocket(t), lb, fmt.Sprintf("after %d", i)); err != nil || p != "udp-a" {
			t.Errorf("new client %d with udp-b not Ready: answered by %q (%v), want udp-a", i, p, err)
		}
	}
	if p, err := askEcho(onB, lb, "moved"); err != nil || p != "udp-a" {
		t.Errorf("the client whose session was with udp-b: answered by %q (%v), want udp-a", p, err)
	}
	direct := netip.AddrPortFrom(netip.MustParseAddr(ips["udp-b"]), 5300)
	if p, err := askEcho(newUDPSocket(t), direct, "direct"); err != nil || p != "udp-b" {
		t.Errorf("udp-b on its own IP: answered by %q (%v), want udp-b still running", p, err)
	}

	// A Service with UDP ports only.
	only := netip.AddrPortFrom(lbOf("udp-only"), 5353)
	if only.Addr() == lb.Addr() {
		t.Errorf("both Services got %s", only.Addr())
	}
	if p, err := askEcho(newUDPSocket(t), only, "only"); err != nil || p != "udp-a" {
		t.Errorf("UDP-only Service: answered by %q (%v), want udp-a", p, err)
	}
}

// newUDPSocket is a new client socket on the host: a new session.
func newUDPSocket(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// askEcho sends msg to addr and returns the Pod that echoed it; the answer
// must come from addr.
func askEcho(c *net.UDPConn, addr netip.AddrPort, msg string) (string, error) {
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return "", err
	}
	if _, err := c.WriteToUDPAddrPort([]byte(msg), addr); err != nil {
		return "", err
	}
	buf := make([]byte, 4096)
	n, from, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		return "", err
	}
	if from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port()); from != addr {
		return "", fmt.Errorf("answer from %s, want %s", from, addr)
	}
	var r struct{ Request, Pod string }
	if err := json.Unmarshal(buf[:n], &r); err != nil {
		return "", fmt.Errorf("answer %q: %v", buf[:n], err)
	}
	if r.Request != msg {
		return "", fmt.Errorf("answer to %q echoes %q", msg, r.Request)
	}
	return r.Pod, nil
}

// podNetns is the network namespace of a running Pod.
func podNetns(dp *DataPlane, ns, pod string) (string, bool) {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	for _, r := range dp.running {
		if r.pod.Namespace == ns && r.pod.Name == pod && r.netns != nil {
			return r.netns.Name, true
		}
	}
	return "", false
}

// udpTargetsOf are the targets of new sessions of a load balancer's UDP
// port.
func udpTargetsOf(dp *DataPlane, svc string, port int32) []udpTarget {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	for _, a := range dp.lbs {
		if a.key == svc && a.udp[port] != nil {
			f := a.udp[port]
			f.mu.Lock()
			defer f.mu.Unlock()
			return append([]udpTarget(nil), f.targets...)
		}
	}
	return nil
}
