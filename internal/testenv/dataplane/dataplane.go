// Package dataplane is the local data plane of the kwok cluster: for each
// Pod kwok has placed on a fake Node (and given an IP from its pod CIDR),
// it runs the real process behind the Pod's image, each Pod in a network
// namespace of its own that holds the Pod's IP, all joined by one bridge
// on the host; and it gives every LoadBalancer Service an address that
// reaches a Ready Pod of that Service. It is test-only code, used by the
// conformance run (test/conformance) to send the suite's traffic.
//
// Design:
//
//   - One loop (sync) reconciles what runs with what the API server says,
//     woken by Pod and Service informers, by readiness changes and once a
//     second (restarts, retries). Starting a Pod is what a kubelet does,
//     as far as the processes can tell (kubelet.go): the environment with
//     fieldRefs, $(VAR) in the arguments, ConfigMap and Secret volumes
//     laid out and mounted kubelet-style, the container's user and the
//     Pod's fsGroup (testenv.Container), the Pod's net.* sysctls, and its
//     readiness probes, run from the host against the Pod's IP.
//   - What runs is behind one seam, Runtime (runtime.go): EnvoyRuntime for
//     Portico's proxies (image envoyproxy/envoy, through
//     testenv.LaunchEnvoy) and EchoBasic for the conformance suite's
//     backend; an image no runtime handles is reported (Unsupported) and
//     its Pod left alone.
//   - Network: testenv.Bridge and testenv.Netns. The bridge holds the
//     gateway address (outside kwok's pod range, which kwok hands out from
//     its first address on), each namespace its Pod's IP on eth0 with a
//     MAC derived from the IP by testenv (kwok reuses the IPs of deleted
//     Pods; the neighbours' ARP entries then stay right) and no default route:
//     a Pod reaches the bridge's prefix and nothing else. Load-balancer
//     addresses come from a pool inside the bridge's prefix and outside
//     the pod range; each is on the host's side of the bridge, where one
//     forwarder per TCP Service port sends each new connection to a Ready,
//     not terminating Pod in turn (loadbalancer.go), and one per UDP
//     Service port does so for each new client session, answering from
//     the address the client sent to (udp.go); the Service's
//     status.loadBalancer.ingress gets it once it has a Ready Pod behind
//     it. Host services (Forward) are TCP forwarders on the gateway
//     address to loopback targets. There is no
//     NAT and no forwarding anywhere else; Close removes every namespace,
//     veth and the bridge, and so does a watchdog process if the test
//     process dies without closing (watchdog.go).
//   - Pods annotated KubeletAnnotation get the rest of a kubelet
//     (terminate.go): their Ready condition follows their probes, and
//     their deletion is a graceful termination (preStop hooks, SIGTERM,
//     the grace period), after which the data plane deletes them.
//   - Logs: each container's stdout and stderr go to a CRI-format file
//     that kwok serves as the Pod's log through the API server (logs.go).
package dataplane

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/portico-dev/portico/internal/infra"
	"github.com/portico-dev/portico/internal/testenv"
)

// Defaults of Options, matching hack/cluster-up.sh (kwok --cidr).
var (
	DefaultPodCIDR       = netip.MustParsePrefix("10.244.0.0/16")
	DefaultBridge        = netip.MustParsePrefix("10.244.0.0/15")
	DefaultGateway       = netip.MustParseAddr("10.245.255.254")
	DefaultLoadBalancers = netip.MustParsePrefix("10.245.0.0/24")
)

// Options configure a DataPlane.
type Options struct {
	// Config is the cluster's (cluster-admin).
	Config *rest.Config
	// Runtimes run the containers; the first that handles an image runs
	// it. Envoy is added when none handles envoyproxy/envoy.
	Runtimes []Runtime
	// PodCIDR is kwok's pod range: Pods with an IP in it are run.
	PodCIDR netip.Prefix
	// Bridge is the bridge's prefix (PodCIDR and LoadBalancers in it),
	// Gateway the host's address on it (outside PodCIDR).
	Bridge  netip.Prefix
	Gateway netip.Addr
	// LoadBalancers is the pool of load-balancer addresses.
	LoadBalancers netip.Prefix
	// Logf reports Pods started, stopped, failing and unsupported.
	Logf func(format string, args ...any)
}

// Unsupported is a Pod the data plane does not run, why, and the
// Services (of its namespace) that select it.
type Unsupported struct {
	Namespace, Pod, Image, Reason string
	Services                      []string
}

// DataPlane runs the cluster's Pods. Close stops it.
type DataPlane struct {
	opts   Options
	cs     kubernetes.Interface
	logs   *logRegistry
	bridge *testenv.Bridge
	dir    string
	bin    string // binaries every user can execute
	pods   corelisters.PodLister
	svcs   corelisters.ServiceLister
	cancel context.CancelFunc
	done   chan struct{}
	kick   chan struct{}

	mu          sync.Mutex // guards what follows; sync holds it
	running     map[types.UID]*podRun
	lbs         map[types.UID]*lbAlloc
	unsupported map[string]Unsupported // ns/name → why
	forwarders  []*testenv.Forwarder
}

// New makes the bridge, starts watching the cluster and runs its Pods
// until Close. The caller checks testenv.RequireNetns and
// testenv.RequireEnvoy first.
func New(opts Options) (*DataPlane, error) {
	if opts.Config == nil {
		return nil, errors.New("dataplane: Options.Config is required")
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if !opts.PodCIDR.IsValid() {
		opts.PodCIDR = DefaultPodCIDR
	}
	if !opts.Bridge.IsValid() {
		opts.Bridge = DefaultBridge
	}
	if !opts.Gateway.IsValid() {
		opts.Gateway = DefaultGateway
	}
	if !opts.LoadBalancers.IsValid() {
		opts.LoadBalancers = DefaultLoadBalancers
	}
	switch {
	case !opts.Bridge.Contains(opts.PodCIDR.Addr()) || opts.PodCIDR.Bits() < opts.Bridge.Bits():
		return nil, fmt.Errorf("dataplane: pod CIDR %s is not within the bridge's %s", opts.PodCIDR, opts.Bridge)
	case !opts.Bridge.Contains(opts.LoadBalancers.Addr()) || opts.LoadBalancers.Overlaps(opts.PodCIDR):
		return nil, fmt.Errorf("dataplane: load balancers %s must be within %s and outside %s", opts.LoadBalancers, opts.Bridge, opts.PodCIDR)
	case opts.PodCIDR.Contains(opts.Gateway) || opts.LoadBalancers.Contains(opts.Gateway):
		return nil, fmt.Errorf("dataplane: gateway %s must be outside the pod and load-balancer ranges", opts.Gateway)
	}
	cs, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return nil, err
	}
	d := &DataPlane{
		opts: opts, cs: cs, kick: make(chan struct{}, 1), done: make(chan struct{}),
		running: map[types.UID]*podRun{}, lbs: map[types.UID]*lbAlloc{}, unsupported: map[string]Unsupported{},
	}
	if err := d.setUp(); err != nil {
		d.cleanUp()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	factory := informers.NewSharedInformerFactory(cs, 0)
	kick := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { d.wake() },
		UpdateFunc: func(any, any) { d.wake() },
		DeleteFunc: func(any) { d.wake() },
	}
	podInf, svcInf := factory.Core().V1().Pods(), factory.Core().V1().Services()
	if _, err := podInf.Informer().AddEventHandler(kick); err != nil {
		cancel()
		d.cleanUp()
		return nil, err
	}
	if _, err := svcInf.Informer().AddEventHandler(kick); err != nil {
		cancel()
		d.cleanUp()
		return nil, err
	}
	d.pods, d.svcs = podInf.Lister(), svcInf.Lister()
	factory.Start(ctx.Done())
	go func() {
		defer close(d.done)
		defer factory.Shutdown()
		factory.WaitForCacheSync(ctx.Done())
		d.loop(ctx)
	}()
	opts.Logf("dataplane: bridge %s (%s, gateway %s), Pods of %s, load balancers from %s", d.bridge.Name, opts.Bridge, opts.Gateway, opts.PodCIDR, opts.LoadBalancers)
	return d, nil
}

// setUp makes the directory, the binaries' copies, the bridge and the
// log registry.
func (d *DataPlane) setUp() error {
	dir, err := os.MkdirTemp("", "portico-dataplane-")
	if err != nil {
		return err
	}
	d.dir = dir
	d.bin = filepath.Join(dir, "bin")
	// The containers' users reach their binaries here.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(d.bin, 0o755); err != nil {
		return err
	}
	if err := d.installRuntimes(); err != nil {
		return err
	}
	d.bridge, err = testenv.NewBridge(d.opts.Gateway, d.opts.Bridge)
	if err != nil {
		return err
	}
	if err := d.startWatchdog(); err != nil {
		return err
	}
	d.logs, err = newLogRegistry(d.opts.Config, d.opts.Logf)
	return err
}

// installRuntimes puts the binaries of the runtimes where every user can
// run them, adding an EnvoyRuntime when no runtime handles Envoy and
// Portico's (the proxies' sidecar) when none handles Portico's image.
func (d *DataPlane) installRuntimes() error {
	var rts []Runtime
	hasEnvoy, hasPortico := false, false
	for _, rt := range d.opts.Runtimes {
		hasPortico = hasPortico || rt.Handles(infra.DefaultAgentImage)
		switch r := rt.(type) {
		case *ExecRuntime:
			bin, err := installBinary(r.Binary, d.bin, filepath.Base(r.Binary))
			if err != nil {
				return fmt.Errorf("dataplane: %s: %w", r.RuntimeName, err)
			}
			c := *r
			c.Binary = bin
			rt = &c
		case *EnvoyRuntime:
			hasEnvoy = true
		}
		rts = append(rts, rt)
	}
	if !hasEnvoy {
		src, err := testenv.EnvoyBinary()
		if err != nil {
			return err
		}
		bin, err := installBinary(src, d.bin, "envoy")
		if err != nil {
			return fmt.Errorf("dataplane: envoy: %w", err)
		}
		rts = append(rts, &EnvoyRuntime{Binary: bin})
	}
	if !hasPortico {
		src, err := testenv.PorticoBinary()
		if err != nil {
			return err
		}
		bin, err := installBinary(src, d.bin, "portico")
		if err != nil {
			return fmt.Errorf("dataplane: portico: %w", err)
		}
		rts = append(rts, Portico(bin))
	}
	d.opts.Runtimes = rts
	return nil
}

func newLogRegistry(cfg *rest.Config, logf func(string, ...any)) (*logRegistry, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	res, err := cs.Discovery().ServerResourcesForGroupVersion(kwokLogs.GroupVersion().String())
	served := err == nil && res != nil
	if served {
		served = false
		for _, r := range res.APIResources {
			served = served || r.Name == kwokLogs.Resource
		}
	}
	if !served {
		logf("dataplane: the cluster does not serve %s: Pod logs cannot be read through the API server", kwokLogs)
		return nil, nil
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &logRegistry{dyn: dyn, logf: logf}, nil
}

// Gateway is the host's address on the bridge, where Forward listens.
func (d *DataPlane) Gateway() netip.Addr { return d.opts.Gateway }

// Forward serves port on the gateway address, forwarding each connection
// to one of targets (loopback host:port) in turn, until Close.
func (d *DataPlane) Forward(port uint16, targets ...string) (netip.AddrPort, error) {
	ap := netip.AddrPortFrom(d.opts.Gateway, port)
	for _, t := range targets {
		if tp, err := netip.ParseAddrPort(t); err != nil || !tp.Addr().IsLoopback() {
			return ap, fmt.Errorf("dataplane: forward target %q is not a loopback host:port", t)
		}
	}
	if len(targets) == 0 {
		return ap, fmt.Errorf("dataplane: forward %s: no targets", ap)
	}
	// Round robin: each connection starts at the next target.
	var next atomic.Uint64
	f, err := testenv.Forward(ap, func() []string {
		i := int(next.Add(1)-1) % len(targets)
		return append(append([]string(nil), targets[i:]...), targets[:i]...)
	})
	if err != nil {
		return ap, err
	}
	d.mu.Lock()
	d.forwarders = append(d.forwarders, f)
	d.mu.Unlock()
	return ap, nil
}

// Unsupported lists the Pods seen that the data plane does not run.
func (d *DataPlane) Unsupported() []Unsupported {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Unsupported, 0, len(d.unsupported))
	for _, u := range d.unsupported {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Pod < out[j].Namespace+"/"+out[j].Pod
	})
	return out
}

// ContainerLog is what a running container has printed so far, as kwok
// serves it (CRI format: time, stream, F, line).
func (d *DataPlane) ContainerLog(namespace, pod, container string) (string, error) {
	d.mu.Lock()
	var path string
	for _, r := range d.running {
		if r.pod.Namespace == namespace && r.pod.Name == pod && r.dir != "" {
			path = filepath.Join(r.dir, container+".log")
		}
	}
	d.mu.Unlock()
	if path == "" {
		return "", fmt.Errorf("dataplane: Pod %s/%s is not running", namespace, pod)
	}
	b, err := os.ReadFile(path)
	return string(b), err
}

func (d *DataPlane) wake() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

func (d *DataPlane) loop(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.kick:
		case <-tick.C:
		}
		d.sync(ctx)
	}
}

// sync starts the Pods to run, stops those gone, restarts exited
// containers and places the load-balancer addresses.
func (d *DataPlane) sync(ctx context.Context) {
	pods, err := d.pods.List(labels.Everything())
	if err != nil {
		d.opts.Logf("dataplane: listing Pods: %v", err)
		return
	}
	want := map[types.UID]*corev1.Pod{}
	for _, p := range pods {
		if d.runnable(p) {
			want[p.UID] = p
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var stop []*podRun
	for uid, r := range d.running {
		p := want[uid]
		switch {
		case r.termDone != nil:
			// Terminating: it goes when its containers have stopped.
			select {
			case <-r.termDone:
				delete(d.running, uid)
				d.finishTermination(ctx, r)
			default:
				if p != nil && isKubeletPod(p) {
					d.reportReady(ctx, r, p)
				}
			}
		case p == nil:
			stop = append(stop, r)
			delete(d.running, uid)
		case p.DeletionTimestamp != nil:
			if r.netns == nil {
				stop = append(stop, r)
				delete(d.running, uid)
				continue
			}
			r.pod = p
			r.beginTermination(p)
		}
	}
	d.stopPods(stop)
	for uid, p := range want {
		r := d.running[uid]
		if p.DeletionTimestamp != nil {
			continue // never started once it is being deleted
		}
		if r == nil {
			r = &podRun{d: d, pod: p}
			d.running[uid] = r
		}
		r.sync(ctx)
		if isKubeletPod(p) && r.netns != nil {
			d.reportReady(ctx, r, p)
		}
	}
	d.syncLoadBalancers(ctx)
}

// runnable: a Pod on a Node, Running with an IP in the pod CIDR, not
// on the host's network, and not being deleted unless the data plane is
// its kubelet (terminate.go: it then terminates gracefully).
func (d *DataPlane) runnable(p *corev1.Pod) bool {
	if p.Spec.NodeName == "" || (p.DeletionTimestamp != nil && !isKubeletPod(p)) || p.Spec.HostNetwork || p.Status.Phase != corev1.PodRunning {
		return false
	}
	ip, err := netip.ParseAddr(p.Status.PodIP)
	return err == nil && d.opts.PodCIDR.Contains(ip)
}

// stopPods stops rs in parallel and waits.
func (d *DataPlane) stopPods(rs []*podRun) {
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(r.stop)
	}
	wg.Wait()
}

// runtime is the runtime of image, or nil.
func (d *DataPlane) runtime(image string) Runtime {
	for _, rt := range d.opts.Runtimes {
		if rt.Handles(image) {
			return rt
		}
	}
	return nil
}

func (d *DataPlane) markUnsupported(p *corev1.Pod, image, reason string) {
	key := p.Namespace + "/" + p.Name
	if _, ok := d.unsupported[key]; !ok {
		d.opts.Logf("dataplane: not running Pod %s: image %s: %s", key, image, reason)
	}
	u := Unsupported{Namespace: p.Namespace, Pod: p.Name, Image: image, Reason: reason}
	if svcs, err := d.svcs.Services(p.Namespace).List(labels.Everything()); err == nil {
		for _, s := range svcs {
			if len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(p.Labels)) {
				u.Services = append(u.Services, s.Name)
			}
		}
		sort.Strings(u.Services)
	}
	d.unsupported[key] = u
}

// Close stops every Pod, the forwarders and the watches, and removes the
// namespaces, the bridge and the directory.
func (d *DataPlane) Close() error {
	if d.cancel != nil {
		d.cancel()
		<-d.done
	}
	d.mu.Lock()
	rs := make([]*podRun, 0, len(d.running))
	for _, r := range d.running {
		rs = append(rs, r)
	}
	d.running = map[types.UID]*podRun{}
	d.stopPods(rs)
	for uid, a := range d.lbs {
		d.release(a)
		delete(d.lbs, uid)
	}
	var errs []error
	for _, f := range d.forwarders {
		errs = append(errs, f.Close())
	}
	d.forwarders = nil
	d.mu.Unlock()
	return errors.Join(append(errs, d.cleanUp())...)
}

func (d *DataPlane) cleanUp() error {
	d.stopWatchdog()
	var errs []error
	if d.bridge != nil {
		errs = append(errs, d.bridge.Close())
		d.bridge = nil
	}
	if d.dir != "" {
		errs = append(errs, os.RemoveAll(d.dir))
		d.dir = ""
	}
	return errors.Join(errs...)
}

// command runs a setup command (ip, sh) and returns its output in the
// error.
func command(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// PodDialer dials from inside a running Pod's network namespace (its
// loopback is the Pod's: e.g. Envoy's admin interface at 127.0.0.1).
func (d *DataPlane) PodDialer(namespace, pod string) (func(ctx context.Context, network, addr string) (net.Conn, error), error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.running {
		if r.pod.Namespace == namespace && r.pod.Name == pod && r.netns != nil {
			return r.netns.DialContext, nil
		}
	}
	return nil, fmt.Errorf("dataplane: Pod %s/%s is not running", namespace, pod)
}
