package bench

// The end-to-end figures: a real Envoy (the version hack/envoy.sh
// installs) as a proxy of ProbeGateway, booted from the bootstrap
// Portico provisions and its client certificate, connected over mTLS to
// the follower, and two echo backends; requests go through Envoy.
//
// Everything runs in network namespaces of the suite's own on one bridge
// (10.249.0.0/24): Envoy in one (the Pod's sysctl lets it bind port 80 as
// its non-root user), each backend in one. Envoy reaches the follower,
// which listens on loopback, through a forwarder on the bridge's host
// address that dials the current follower (or, failing that, the other
// replica: every replica serves xDS). Requests go only to these
// namespaces. The backends sit behind Service "e2e" (no selector) whose
// EndpointSlice the suite writes, so an endpoint change is a write the
// suite times, as a Pod's Ready would be. TCPRoutes go through the same
// Envoy to a TCP echo of the harness's own (tcpe2e.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/infra"
	"github.com/portico-dev/portico/internal/proxyspec"
	"github.com/portico-dev/portico/internal/testenv"
)

const (
	e2eService = "e2e"
	e2eSlice   = "e2e-bench"
	e2ePort    = 8080
	// e2eStableRoute is the route the request stream under churn uses.
	e2eStableRoute = "e2e-stable"
)

var (
	e2eBridge   = netip.MustParsePrefix("10.249.0.0/24")
	e2eGateway  = netip.MustParseAddr("10.249.0.1")
	e2eProxy    = netip.MustParseAddr("10.249.0.2")
	e2eBackends = [2]netip.Addr{netip.MustParseAddr("10.249.0.3"), netip.MustParseAddr("10.249.0.4")}
	e2ePods     = [2]string{"e2e-a", "e2e-b"}
)

// EnvoyLoop is a real Envoy of ProbeGateway and its backends.
type EnvoyLoop struct {
	c        client.Client
	bridge   *testenv.Bridge
	envoy    *testenv.Envoy
	echo     []*testenv.Process
	fwd      *testenv.Forwarder
	http     *http.Client
	current  int // index of the backend the Service points at
	dir      string
	stopOnce sync.Once
	// The TCP backend (tcpe2e.go), and why the TCPRoute figures cannot
	// be measured (nil when they can).
	tcpEcho *tcpEcho
	tcpErr  error
}

// StartEnvoyLoop starts the backends, the e2e Service and its
// EndpointSlice (backend 0), the forwarder to targets() and Envoy, and
// waits until Envoy is LIVE and serves the stable route.
func StartEnvoyLoop(ctx context.Context, c client.Client, targets func() []string, dir string) (_ *EnvoyLoop, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("needs root (network namespaces)")
	}
	echoBin, err := testenv.EchoBinary()
	if err != nil {
		return nil, err
	}
	l := &EnvoyLoop{c: c, dir: dir, http: &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}
	defer func() {
		if err != nil {
			err = errors.Join(err, l.Close())
		}
	}()
	if l.bridge, err = testenv.NewBridge(e2eGateway, e2eBridge); err != nil {
		return nil, err
	}
	for i, addr := range e2eBackends {
		ns, err := l.bridge.AddNamespace(addr)
		if err != nil {
			return nil, err
		}
		p, err := testenv.LaunchProcess(e2ePods[i], dir, ns.Wrap([]string{echoBin}),
			"POD_NAME="+e2ePods[i], "NAMESPACE="+RouteNamespace(0), "HTTP_PORT="+strconv.Itoa(e2ePort))
		if err != nil {
			return nil, err
		}
		l.echo = append(l.echo, p)
	}
	if l.fwd, err = testenv.Forward(netip.AddrPortFrom(e2eGateway, 0), targets); err != nil {
		return nil, err
	}
	if err := l.writeService(ctx); err != nil {
		return nil, err
	}
	if err := l.writeSlice(ctx, 0); err != nil {
		return nil, err
	}
	if err := upsertRoute(ctx, c, e2eRoute(e2eStableRoute, "/e2e-stable", 0)); err != nil {
		return nil, err
	}
	// The TCP part is written before Envoy starts (its first config has
	// it) and checked after; its failure only leaves the TCP figures out.
	tcpSetup := l.startTCP(ctx)
	if err := l.startEnvoy(ctx); err != nil {
		return nil, err
	}
	if err := l.envoy.WaitLive(2 * time.Minute); err != nil {
		return nil, fmt.Errorf("envoy: %w\n%s", err, l.envoy.LogTail(30))
	}
	err = poll(ctx, time.Minute, 20*time.Millisecond, func() (bool, error) {
		code, _, _ := l.get(ctx, "/e2e-stable", Hostname(0))
		return code == http.StatusOK, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the stable route through Envoy: %w", err)
	}
	if tcpSetup == nil {
		tcpSetup = l.waitTCPStable(ctx)
	}
	l.tcpErr = tcpSetup
	return l, nil
}

// startEnvoy runs Envoy as the provisioned Deployment's container would,
// with ProbeGateway's bootstrap files and client certificate.
func (l *EnvoyLoop) startEnvoy(ctx context.Context) error {
	ns, err := l.bridge.AddNamespace(e2eProxy)
	if err != nil {
		return err
	}
	if out, err := exec.Command("ip", "netns", "exec", ns.Name, "sysctl", "-qw", "net.ipv4.ip_unprivileged_port_start=0").CombinedOutput(); err != nil {
		return fmt.Errorf("sysctl: %v: %s", err, out)
	}
	var sec corev1.Secret
	key := client.ObjectKey{Namespace: InfraNamespace, Name: proxyspec.ClientCertSecretName(ProbeGateway)}
	if err := l.c.Get(ctx, key, &sec); err != nil {
		return fmt.Errorf("client certificate %s: %w", key, err)
	}
	files, err := infra.BootstrapFiles(InfraNamespace, ProbeGateway, v1alpha1.ProxyConfigSpec{}, infra.Params{XDSAddress: l.fwd.Addr().String(), XDSServerName: "127.0.0.1"})
	if err != nil {
		return err
	}
	boot := testenv.Volume{MountPath: "/etc/envoy", Files: map[string][]byte{}}
	for k, v := range files {
		boot.Files[k] = []byte(v)
	}
	ctr := testenv.Container{RunAsUser: 65532, RunAsGroup: 65532, FSGroup: 65532, Volumes: []testenv.Volume{
		boot, {MountPath: "/etc/portico/xds", Files: sec.Data, Mode: 0o440}}}
	podDir, err := os.MkdirTemp(l.dir, "envoy-pod-")
	if err != nil {
		return err
	}
	wrap, err := ctr.Prepare(podDir)
	if err != nil {
		return err
	}
	l.envoy, err = testenv.LaunchEnvoy(testenv.EnvoyOptions{
		Args: []string{"--config-path", "/etc/envoy/envoy.json", "--service-cluster", InfraNamespace + "/" + ProbeGateway,
			"--service-node", "bench-envoy", "--log-level", "warn", "--drain-strategy", "immediate"},
		Wrap: func(argv []string) []string { return ns.Wrap(wrap(argv)) },
		Dial: ns.DialContext,
	})
	return err
}

// Close stops Envoy, the backends and the forwarder and removes the
// namespaces and the Kubernetes objects of the loop.
func (l *EnvoyLoop) Close() error {
	var errs []error
	l.stopOnce.Do(func() {
		if l.envoy != nil {
			_ = l.envoy.Stop() // its exit status after SIGTERM says nothing
			// Its log stays with the suite's logs.
			errs = append(errs, os.WriteFile(filepath.Join(l.dir, "envoy.log"), []byte(l.envoy.Log()), 0o644), l.envoy.Close())
		}
		for _, p := range l.echo {
			_ = p.Stop()
		}
		if l.fwd != nil {
			_ = l.fwd.Close()
		}
		if l.bridge != nil {
			errs = append(errs, l.bridge.Close())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		errs = append(errs, l.closeTCP(ctx)...)
		for _, o := range []client.Object{
			&gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: RouteNamespace(0), Name: e2eStableRoute}},
			&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: RouteNamespace(0), Name: e2eSlice}},
			&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: RouteNamespace(0), Name: e2eService}},
		} {
			if err := l.c.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	})
	return errors.Join(errs...)
}

// RSSMiB is Envoy's resident set size.
func (l *EnvoyLoop) RSSMiB() (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", l.envoy.Pid()))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			return round(kb/1024, 1), err
		}
	}
	return 0, errors.New("no VmRSS")
}

func (l *EnvoyLoop) writeService(ctx context.Context) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: RouteNamespace(0), Name: e2eService, Labels: map[string]string{benchLabel: "e2e"}},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: e2ePort, Protocol: corev1.ProtocolTCP}}},
	}
	if err := l.c.Create(ctx, svc); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// writeSlice points the e2e Service at the backends idx.
func (l *EnvoyLoop) writeSlice(ctx context.Context, idx ...int) error {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: RouteNamespace(0), Name: e2eSlice, Labels: map[string]string{
			discoveryv1.LabelServiceName: e2eService, discoveryv1.LabelManagedBy: "bench.portico.dev"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(e2ePort)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, i := range idx {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{e2eBackends[i].String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	var cur discoveryv1.EndpointSlice
	err := l.c.Get(ctx, client.ObjectKeyFromObject(es), &cur)
	if apierrors.IsNotFound(err) {
		return l.c.Create(ctx, es)
	}
	if err != nil {
		return err
	}
	cur.Endpoints = es.Endpoints
	return l.c.Update(ctx, &cur)
}

// e2eRoute is a route on ProbeGateway, hostname Hostname(k*Gateways),
// whose only path prefix is marker, to the e2e Service.
func e2eRoute(name, marker string, k int) *gwv1.HTTPRoute {
	r := ProbeRoute(RouteNamespace(0), name, marker, k)
	r.Labels[benchLabel] = "e2e"
	r.Spec.Rules[0].BackendRefs = backend(e2eService)
	return r
}

// get sends GET path with Host host through Envoy; pod is the backend
// that answered, if one did.
func (l *EnvoyLoop) get(ctx context.Context, path, host string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e2eProxy.String()+":80"+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	resp, err := l.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, "", err
	}
	var e struct {
		Pod string `json:"pod"`
	}
	_ = json.Unmarshal(body, &e)
	return resp.StatusCode, e.Pod, nil
}

// e2ePoll is how often a probe asks Envoy.
const e2ePoll = 2 * time.Millisecond

// RouteToFirst200 creates probe route k of stage n and returns the time
// from the create to Envoy's first 200 for its path; it then deletes
// the route and waits until Envoy answers 404 again.
func (l *EnvoyLoop) RouteToFirst200(ctx context.Context, n, k int) (time.Duration, error) {
	marker := fmt.Sprintf("/e2e-%d-%d-z", n, k)
	route := e2eRoute(fmt.Sprintf("e2e-%d-%d", n, k), marker, k)
	host := string(route.Spec.Hostnames[0])
	t0 := time.Now()
	if err := l.c.Create(ctx, route); err != nil {
		return 0, err
	}
	var lat time.Duration
	err := poll(ctx, ProbeTimeout, e2ePoll, func() (bool, error) {
		code, _, _ := l.get(ctx, marker, host)
		if code == http.StatusOK {
			lat = time.Since(t0)
			return true, nil
		}
		return false, nil
	})
	if derr := l.c.Delete(ctx, route); derr != nil && err == nil {
		err = derr
	}
	if err != nil {
		return 0, fmt.Errorf("route %s: %w", marker, err)
	}
	err = poll(ctx, ProbeTimeout, 10*time.Millisecond, func() (bool, error) {
		code, _, _ := l.get(ctx, marker, host)
		return code == http.StatusNotFound, nil
	})
	if err != nil {
		return lat, fmt.Errorf("route %s still served after its delete: %w", marker, err)
	}
	return lat, nil
}

// EndpointSwitch points the e2e Service at the other backend and returns
// the time from the EndpointSlice write to the first response from it.
func (l *EnvoyLoop) EndpointSwitch(ctx context.Context) (time.Duration, error) {
	next := 1 - l.current
	t0 := time.Now()
	if err := l.writeSlice(ctx, next); err != nil {
		return 0, err
	}
	l.current = next
	var lat time.Duration
	err := poll(ctx, ProbeTimeout, e2ePoll, func() (bool, error) {
		_, pod, _ := l.get(ctx, "/e2e-stable", Hostname(0))
		if pod == e2ePods[next] {
			lat = time.Since(t0)
			return true, nil
		}
		return false, nil
	})
	return lat, err
}

// StreamResult counts a constant request stream.
type StreamResult struct {
	Requests   int64   `json:"requests"`
	Failed     int64   `json:"failed"`
	FirstError string  `json:"first_error,omitempty"`
	Seconds    float64 `json:"seconds"`
	// EndpointChanges are the rolling restarts of the stream's backend
	// during it: the new one added, then the old one removed.
	EndpointChanges int `json:"endpoint_changes"`
}

// Stream sends rate requests per second to the stable route for d while
// the e2e Service's endpoints roll from one backend to the other every
// roll (make before break, as a rolling restart does), and counts the
// requests that did not get a 200 from a backend.
func (l *EnvoyLoop) Stream(ctx context.Context, rate int, d, roll time.Duration) StreamResult {
	var res StreamResult
	var reqs, failed atomic.Int64
	var first atomic.Value
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second / time.Duration(rate))
		defer t.Stop()
		var inflight sync.WaitGroup
		defer inflight.Wait()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			inflight.Add(1)
			go func() {
				defer inflight.Done()
				rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer rcancel()
				reqs.Add(1)
				code, pod, err := l.get(rctx, "/e2e-stable", Hostname(0))
				if err != nil || code != http.StatusOK || pod == "" {
					failed.Add(1)
					first.CompareAndSwap(nil, fmt.Sprintf("%d %q %v", code, pod, err))
				}
			}()
		}
	}()
	t := time.NewTicker(roll)
	defer t.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-t.C:
		}
		next := 1 - l.current
		if err := l.writeSlice(context.Background(), l.current, next); err != nil {
			continue
		}
		// The new endpoint is in EDS before the old one leaves.
		_ = poll(ctx, roll, e2ePoll, func() (bool, error) {
			_, pod, _ := l.get(ctx, "/e2e-stable", Hostname(0))
			return pod == e2ePods[next], nil
		})
		if err := l.writeSlice(context.Background(), next); err == nil {
			l.current = next
			res.EndpointChanges++
		}
	}
	wg.Wait()
	res.Requests, res.Failed, res.Seconds = reqs.Load(), failed.Load(), round(time.Since(start).Seconds(), 1)
	if v, ok := first.Load().(string); ok {
		res.FirstError = v
	}
	return res
}

// E2EDetails are a stage's end-to-end probes (details.json).
type E2EDetails struct {
	RouteToFirst200      *ProbeStats   `json:"route_to_first_200,omitempty"`
	RouteToFirst200Churn *ProbeStats   `json:"route_to_first_200_churn,omitempty"`
	EndpointToNewPod     *ProbeStats   `json:"endpoint_to_new_pod,omitempty"`
	StreamChurn          *StreamResult `json:"stream_churn,omitempty"`
	EnvoyRSSMiB          float64       `json:"envoy_rss_mib"`
	// TCPRoute create → first connection reaching the TCP backend
	// (tcpe2e.go), quiet and under churn.
	TCPRouteToFirstConnection      *ProbeStats `json:"tcp_route_to_first_connection,omitempty"`
	TCPRouteToFirstConnectionChurn *ProbeStats `json:"tcp_route_to_first_connection_churn,omitempty"`
}

// e2eQuiet runs the quiet end-to-end probes of stage n.
func (s *suite) e2eQuiet(ctx context.Context, n int) *E2EDetails {
	d := &E2EDetails{}
	d.RouteToFirst200 = s.probes(ctx, s.cfg.Probes, func(k int) (time.Duration, error) {
		return s.loop.RouteToFirst200(ctx, n, k)
	})
	if s.loop.TCPErr() == nil {
		d.TCPRouteToFirstConnection = s.probes(ctx, s.cfg.Probes, func(k int) (time.Duration, error) {
			return s.loop.TCPRouteToFirstConnection(ctx, n, k)
		})
	}
	d.EndpointToNewPod = s.probes(ctx, s.cfg.EndpointProbes, func(int) (time.Duration, error) {
		return s.loop.EndpointSwitch(ctx)
	})
	if rss, err := s.loop.RSSMiB(); err == nil {
		d.EnvoyRSSMiB = rss
	}
	e := s.res.EndToEnd[Key(n)]
	if d.RouteToFirst200.Probes > 0 {
		e.RouteToFirst200 = ptr.To(d.RouteToFirst200.Create)
	}
	if d.EndpointToNewPod.Probes > 0 {
		e.EndpointToNewPod = ptr.To(d.EndpointToNewPod.Create)
	}
	if t := d.TCPRouteToFirstConnection; t != nil && t.Probes > 0 {
		e.TCPRouteToFirstConnection = ptr.To(t.Create)
	}
	e.EnvoyRSSMiB = d.EnvoyRSSMiB
	s.res.EndToEnd[Key(n)] = e
	s.logf("stage %d: through Envoy: route → first 200 %+v, endpoint → new pod %+v, Envoy RSS %.1f MiB",
		n, d.RouteToFirst200.Create, d.EndpointToNewPod.Create, d.EnvoyRSSMiB)
	if t := d.TCPRouteToFirstConnection; t != nil {
		s.logf("stage %d: through Envoy: TCPRoute → first connection %+v (%d failed: %s)", n, t.Create, t.Failures, t.FirstError)
	}
	return d
}

// e2eChurn runs, under churn, the route probes through Envoy and then a
// constant request stream with rolling endpoint changes for window.
func (s *suite) e2eChurn(ctx context.Context, n int, d *E2EDetails, window time.Duration) {
	d.RouteToFirst200Churn = s.probes(ctx, s.cfg.Probes, func(k int) (time.Duration, error) {
		return s.loop.RouteToFirst200(ctx, n, 1_000_000+k)
	})
	if s.loop.TCPErr() == nil {
		d.TCPRouteToFirstConnectionChurn = s.probes(ctx, s.cfg.Probes, func(k int) (time.Duration, error) {
			return s.loop.TCPRouteToFirstConnection(ctx, n, 1_000_000+k)
		})
	}
	st := s.loop.Stream(ctx, StreamRate, window, time.Second)
	d.StreamChurn = &st
	e := s.res.EndToEnd[Key(n)]
	if d.RouteToFirst200Churn.Probes > 0 {
		e.RouteToFirst200Churn = ptr.To(d.RouteToFirst200Churn.Create)
	}
	if t := d.TCPRouteToFirstConnectionChurn; t != nil && t.Probes > 0 {
		e.TCPRouteToFirstConnectionChurn = ptr.To(t.Create)
	}
	e.FailedRequestsChurn, e.RequestsChurn = ptr.To(st.Failed), st.Requests
	s.res.EndToEnd[Key(n)] = e
	s.logf("stage %d: through Envoy under churn: route → first 200 %+v; stream %+v", n, d.RouteToFirst200Churn.Create, st)
	if t := d.TCPRouteToFirstConnectionChurn; t != nil {
		s.logf("stage %d: through Envoy under churn: TCPRoute → first connection %+v (%d failed: %s)", n, t.Create, t.Failures, t.FirstError)
	}
}

// StreamRate is the request rate of the stream under churn.
const StreamRate = 200
