// Package conformance runs the upstream Gateway API conformance suite
// (sigs.k8s.io/gateway-api/conformance v1.7.0) against Portico.
//
// By default (`make conformance`, PORTICO_CONFORMANCE=1) it starts a kwok
// cluster (hack/cluster-up.sh; or uses $PORTICO_KUBECONFIG), installs the
// Gateway API v1.7.0 standard CRDs and Portico's CRDs, starts the local
// data plane (internal/testenv/dataplane: every Pod kwok places runs as a
// real process — Envoy for Portico's proxies, the suite's echo-basic for
// its backends — in a network namespace holding the Pod's IP, and every
// LoadBalancer Service gets an address that reaches a Ready Pod), runs
// two Portico replicas in-process (leader election, provisioning, xDS
// over mTLS through the data plane's bridge), creates the GatewayClass
// "portico" and runs the suite with the features Portico publishes in the
// GatewayClass's status.supportedFeatures: the status and the traffic
// tests of every claimed feature. Only tests whose backends the data
// plane cannot run are skipped (unrunnableTests).
//
// With PORTICO_CONFORMANCE_FULL=1 it runs against a real cluster where
// Portico is installed ($PORTICO_KUBECONFIG or $KUBECONFIG), with no test
// skipped: see docs/conformance.md.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientset "k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwv1alpha3 "sigs.k8s.io/gateway-api/apis/v1alpha3"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	gwxv1alpha1 "sigs.k8s.io/gateway-api/apisx/v1alpha1"
	"sigs.k8s.io/gateway-api/conformance"
	confv1 "sigs.k8s.io/gateway-api/conformance/apis/v1"
	confconfig "sigs.k8s.io/gateway-api/conformance/utils/config"
	"sigs.k8s.io/gateway-api/conformance/utils/suite"
	"sigs.k8s.io/gateway-api/pkg/features"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/controller"
	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/testenv"
	"github.com/portico-dev/portico/internal/testenv/dataplane"
)

const (
	// portico's namespace on the kwok cluster: leader Lease, xDS PKI
	// Secrets and the ProxyConfig of the GatewayClass.
	porticoNamespace = "portico-system"
	// defaultGatewayClass is the class the suite runs against.
	defaultGatewayClass = "portico"
	replicas            = 2
)

// kwokTimeouts bound the suite's waits on the kwok cluster, where every
// status the suite waits for lands within seconds: a failing status test
// fails within half a minute instead of the upstream minutes. The real
// cluster (PORTICO_CONFORMANCE_FULL) uses the upstream defaults.
func kwokTimeouts() confconfig.TimeoutConfig {
	tc := confconfig.DefaultTimeoutConfig()
	for _, d := range []*time.Duration{
		&tc.CreateTimeout, &tc.DeleteTimeout,
		&tc.GatewayMustHaveAddress, &tc.GatewayMustHaveCondition,
		&tc.GatewayStatusMustHaveListeners, &tc.GatewayListenersMustHaveConditions,
		&tc.ListenerSetMustHaveCondition, &tc.ListenerSetListenersMustHaveConditions,
		&tc.GWCMustBeAccepted, &tc.HTTPRouteMustNotHaveParents, &tc.HTTPRouteMustHaveCondition,
		&tc.TLSRouteMustHaveCondition, &tc.TCPRouteMustHaveCondition, &tc.UDPRouteMustHaveCondition,
		&tc.RouteMustHaveParents, &tc.LatestObservedGenerationSet, &tc.DefaultTestTimeout,
	} {
		*d = 30 * time.Second
	}
	tc.NamespacesMustBeReady = 120 * time.Second
	return tc
}

func TestConformance(t *testing.T) {
	full := os.Getenv("PORTICO_CONFORMANCE_FULL") == "1"
	if !full && os.Getenv("PORTICO_CONFORMANCE") != "1" {
		t.Skip("the conformance run takes minutes: run `make conformance` (PORTICO_CONFORMANCE=1), or PORTICO_CONFORMANCE_FULL=1 on a real cluster")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	repo, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()

	kubeconfig := os.Getenv("PORTICO_KUBECONFIG")
	class := defaultGatewayClass
	if !full {
		// The data plane's needs first: without network namespaces or
		// Envoy the test fails in CI and skips elsewhere.
		testenv.RequireNetns(t)
		testenv.RequireEnvoy(t)
	}
	switch {
	case full:
		if kubeconfig == "" {
			kubeconfig = os.Getenv("KUBECONFIG")
		}
		if kubeconfig == "" {
			t.Fatal("PORTICO_CONFORMANCE_FULL=1 needs the kubeconfig of a cluster with Portico installed in $PORTICO_KUBECONFIG or $KUBECONFIG")
		}
		if c := os.Getenv("PORTICO_CONFORMANCE_GATEWAYCLASS"); c != "" {
			class = c
		}
	case kubeconfig == "":
		// The local kwok cluster, as in test/e2e; stopped when the test
		// ends, the components' logs of a failed run kept in
		// $PORTICO_CONFORMANCE_ARTIFACTS (else their last lines logged).
		cluster, err := testenv.StartCluster(repo, "portico-conformance-", t.Logf)
		if errors.Is(err, testenv.ErrSkip) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cluster.Stop(t.Failed(), os.Getenv("PORTICO_CONFORMANCE_ARTIFACTS")) })
		kubeconfig = cluster.Kubeconfig
	}

	scheme := newScheme()
	cfg, c, err := testenv.Connect(kubeconfig, 100, 200, scheme)
	if err != nil {
		t.Fatal(err)
	}

	timeouts := confconfig.DefaultTimeoutConfig()
	skips := map[string]string{} // test → reason
	var dp *dataplane.DataPlane
	if !full {
		timeouts = kwokTimeouts()
		if err := testenv.InstallCRDs(context.Background(), cfg, c, repo); err != nil {
			t.Fatalf("installing CRDs: %v", err)
		}
		dp = startDataPlane(t, cfg)
		startPortico(t, cfg, c, dp)
		createGatewayClass(t, c, class)
		for _, u := range unrunnableTests {
			skips[u.test] = u.reason
		}
		for _, k := range knownFailures {
			skips[k.test] = "known failure (issue to fix): " + k.issue
		}
	}
	published := waitGatewayClass(t, c, class, timeouts.GWCMustBeAccepted)
	if !full {
		want := gatewayapi.SupportedFeatures()
		if !slices.Equal(published, want) {
			t.Fatalf("GatewayClass %s publishes %v, gatewayapi.SupportedFeatures() is %v", class, published, want)
		}
	}
	t.Logf("setup in %s; GatewayClass %s claims %d features", time.Since(started).Round(time.Millisecond), class, len(published))

	results := &runResults{byTest: map[string]string{}}
	opts := suiteOptions(t, cfg, c, scheme, class, timeouts, skips, results)
	if dp != nil {
		// GatewayStaticAddresses: a usable address is one the data
		// plane's load-balancer pool assigns on request, an unusable one
		// is outside it (lbrequest.go in internal/testenv/dataplane).
		ip := gwv1.IPAddressType
		opts.UsableNetworkAddresses = []gwv1.GatewaySpecAddress{{Type: &ip, Value: dp.UsableAddress().String()}}
		opts.UnusableNetworkAddresses = []gwv1.GatewaySpecAddress{{Type: &ip, Value: dp.UnusableAddress().String()}}
	}
	if run := os.Getenv("PORTICO_CONFORMANCE_RUN"); run != "" {
		// One test, for debugging: the suite then needs the features
		// spelled out instead of reading them from the GatewayClass.
		opts.RunTest = run
		for _, f := range published {
			opts.SupportedFeatures = append(opts.SupportedFeatures, features.FeatureName(f.Name))
		}
	}

	suiteStart := time.Now()
	t.Run("suite", func(t *testing.T) {
		conformance.RunConformanceWithOptions(t, opts)
	})
	elapsed := time.Since(suiteStart)
	t.Logf("suite ran in %s (total with setup %s)", elapsed.Round(time.Second), time.Since(started).Round(time.Second))
	results.log(t, skips)
	var blocked []string
	if dp != nil {
		blocked = reportUnsupported(t, dp)
	}
	if opts.ReportOutputPath != "" {
		if err := annotateReport(opts.ReportOutputPath, full, published, results, skips, blocked, elapsed); err != nil {
			t.Errorf("annotating %s: %v", opts.ReportOutputPath, err)
		} else {
			t.Logf("report: %s", opts.ReportOutputPath)
		}
	}
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(gwv1.Install(s))
	utilruntime.Must(gwv1beta1.Install(s))
	utilruntime.Must(gwv1alpha2.Install(s))
	utilruntime.Must(gwv1alpha3.Install(s))
	utilruntime.Must(gwxv1alpha1.Install(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	return s
}

// suiteOptions are the conformance suite's options: the features are
// read by the suite from the GatewayClass's status (the same list
// gatewayapi.SupportedFeatures() returns), the report covers the
// GATEWAY-HTTP and GATEWAY-GRPC profiles.
func suiteOptions(t *testing.T, cfg *rest.Config, c client.Client, scheme *runtime.Scheme, class string,
	timeouts confconfig.TimeoutConfig, skips map[string]string, results *runResults) suite.ConformanceOptions {
	ctrllog.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(logWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn})))
	suiteCfg := rest.CopyConfig(cfg) // the suite sets its user agent per test
	cs, err := clientset.NewForConfig(suiteCfg)
	if err != nil {
		t.Fatal(err)
	}
	var skipTests []string
	for name := range skips {
		skipTests = append(skipTests, name)
	}
	sort.Strings(skipTests)
	return suite.ConformanceOptions{
		ConfigurableOptions: suite.ConfigurableOptions{
			GatewayClassName:     class,
			CleanupBaseResources: true,
			CleanupTestResources: true,
			Mode:                 "default",
			TimeoutConfig:        timeouts,
			SkipTests:            skipTests,
			ReportOutputPath:     os.Getenv("PORTICO_CONFORMANCE_REPORT"),
			Implementation:       implementation(),
			ConformanceProfiles: []suite.ConformanceProfileName{
				suite.GatewayHTTPConformanceProfileName,
				suite.GatewayGRPCConformanceProfileName,
				suite.GatewayTLSConformanceProfileName,
				suite.GatewayTCPConformanceProfileName,
				suite.GatewayUDPConformanceProfileName,
			},
		},
		Client:        c,
		ClientOptions: client.Options{Scheme: scheme},
		Clientset:     cs,
		RestConfig:    suiteCfg,
		ManifestFS:    nil, // the suite's embedded manifests
		Hook: func(t *testing.T, test suite.ConformanceTest, _ *suite.ConformanceTestSuite) {
			results.record(t, test)
		},
	}
}

// implementation describes Portico in the report.
func implementation() confv1.Implementation {
	version := os.Getenv("PORTICO_VERSION")
	if version == "" {
		out, err := exec.Command("git", "describe", "--tags", "--always", "--dirty").Output()
		version = strings.TrimSpace(string(out))
		if err != nil || version == "" {
			version = "dev"
		}
	}
	return confv1.Implementation{
		Organization: "portico-dev",
		Project:      "portico",
		URL:          "https://github.com/portico-dev/portico",
		Version:      version,
		Contact:      []string{"https://github.com/portico-dev/portico/issues"},
	}
}

// xdsPort is where the proxies dial xDS: the data plane's gateway
// address forwards it to the replicas, as the portico-xds Service would.
const xdsPort = 18000

// startPortico runs the replicas in-process against the cluster, with
// short leader-election timings, provisioning and xDS over mTLS, as
// `portico controller` runs them. Proxies reach them at the data plane's
// gateway address (an IP, hence its SAN in the serving certificate).
func startPortico(t *testing.T, cfg *rest.Config, c client.Client, dp *dataplane.DataPlane) {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: porticoNamespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	xdsListeners := make([]net.Listener, replicas)
	var xdsAddrs []string
	for i := range xdsListeners {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		xdsListeners[i] = l
		xdsAddrs = append(xdsAddrs, l.Addr().String())
	}
	xdsService, err := dp.Forward(xdsPort, xdsAddrs...)
	if err != nil {
		t.Fatalf("xDS forwarder: %v", err)
	}
	for i := range replicas {
		name := fmt.Sprintf("portico-%d", i)
		xl := xdsListeners[i]
		al, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		rc := rest.CopyConfig(cfg)
		ctrl, err := controller.New(controller.Options{
			RESTConfig:        rc,
			Namespace:         porticoNamespace,
			ControllerName:    gatewayapi.DefaultControllerName,
			LeaderElectionID:  "portico-leader",
			Identity:          name,
			LeaseDuration:     4 * time.Second,
			RenewDeadline:     3 * time.Second,
			RetryPeriod:       500 * time.Millisecond,
			QPS:               100,
			Burst:             200,
			Debounce:          20 * time.Millisecond,
			MaxDelay:          200 * time.Millisecond,
			XDSListener:       xl,
			AdminListener:     al,
			Provision:         true,
			XDSServiceAddress: xdsService.String(),
			XDSTLS:            true,
			XDSExtraSANs:      []string{xdsService.Addr().String()},
			Log:               slog.New(slog.NewTextHandler(logWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn})).With("replica", name),
		})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- ctrl.Run(rctx) }()
		t.Cleanup(func() {
			stopping := time.Now()
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("replica %s stopped with an error after %s: %v", name, time.Since(stopping).Round(time.Millisecond), err)
				} else {
					t.Logf("replica %s stopped in %s", name, time.Since(stopping).Round(time.Millisecond))
				}
			case <-time.After(30 * time.Second):
				t.Errorf("replica %s did not stop in 30s; its goroutines follow", name)
				logStacks(t)
			}
		})
	}
	t.Logf("%d Portico replicas started (controller %s, Lease in %s, xDS for proxies at %s)", replicas, gatewayapi.DefaultControllerName, porticoNamespace, xdsService)
}

// createGatewayClass creates (or updates) the suite's GatewayClass and its
// ProxyConfig: one proxy replica behind a LoadBalancer Service, whose
// address the data plane assigns and routes to the proxy's Pod.
func createGatewayClass(t *testing.T, c client.Client, class string) {
	t.Helper()
	ctx := context.Background()
	pc := &v1alpha1.ProxyConfig{ObjectMeta: metav1.ObjectMeta{Namespace: porticoNamespace, Name: "conformance"}}
	spec := v1alpha1.ProxyConfigSpec{
		Replicas: ptr.To[int32](1),
		Service:  v1alpha1.ProxyService{Type: corev1.ServiceTypeLoadBalancer},
	}
	if err := upsert(ctx, c, pc, func() { pc.Spec = spec }); err != nil {
		t.Fatalf("ProxyConfig: %v", err)
	}
	gc := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: class}}
	gcSpec := gwv1.GatewayClassSpec{
		ControllerName: gwv1.GatewayController(gatewayapi.DefaultControllerName),
		ParametersRef: &gwv1.ParametersReference{
			Group: "portico.dev", Kind: v1alpha1.Kind, Name: pc.Name, Namespace: ptr.To(gwv1.Namespace(porticoNamespace)),
		},
		Description: ptr.To("Portico conformance run"),
	}
	if err := upsert(ctx, c, gc, func() { gc.Spec = gcSpec }); err != nil {
		t.Fatalf("GatewayClass: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), gc)
		_ = c.Delete(context.Background(), pc)
	})
}

func upsert(ctx context.Context, c client.Client, obj client.Object, mutate func()) error {
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		mutate()
		return c.Create(ctx, obj)
	}
	if err != nil {
		return err
	}
	mutate()
	return c.Update(ctx, obj)
}

// waitGatewayClass waits until the GatewayClass is Accepted with its
// supported features published, and returns them.
func waitGatewayClass(t *testing.T, c client.Client, class string, timeout time.Duration) []gwv1.SupportedFeature {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var gc gwv1.GatewayClass
		err := c.Get(context.Background(), client.ObjectKey{Name: class}, &gc)
		if err == nil {
			cond := meta.FindStatusCondition(gc.Status.Conditions, string(gwv1.GatewayClassConditionStatusAccepted))
			switch {
			case cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != gc.Generation:
				err = fmt.Errorf("not Accepted at generation %d: %+v", gc.Generation, cond)
			case len(gc.Status.SupportedFeatures) == 0:
				err = fmt.Errorf("no status.supportedFeatures")
			default:
				return gc.Status.SupportedFeatures
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GatewayClass %s: %v", class, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runResults collects each test's outcome as the suite reports it.
type runResults struct {
	mu     sync.Mutex
	byTest map[string]string // test → passed, failed, skipped
}

func (r *runResults) record(t *testing.T, test suite.ConformanceTest) {
	res := "passed"
	switch {
	case t.Failed():
		res = "failed"
	case t.Skipped():
		res = "skipped"
	}
	r.mu.Lock()
	r.byTest[test.ShortName] = res
	r.mu.Unlock()
}

// outcomes sorts the tests by outcome. A skipped test is either skipped
// by this run (in skips: unrunnable, known failure) or not run because it
// needs a feature Portico does not claim.
type outcomes struct{ passed, failed, skipped, notRun []string }

func (r *runResults) outcomes(skips map[string]string) outcomes {
	r.mu.Lock()
	defer r.mu.Unlock()
	var o outcomes
	for name, res := range r.byTest {
		_, ours := skips[name]
		switch {
		case res == "passed":
			o.passed = append(o.passed, name)
		case res == "failed":
			o.failed = append(o.failed, name)
		case ours:
			o.skipped = append(o.skipped, name)
		default:
			o.notRun = append(o.notRun, name)
		}
	}
	for _, l := range [][]string{o.passed, o.failed, o.skipped, o.notRun} {
		sort.Strings(l)
	}
	return o
}

func (r *runResults) log(t *testing.T, skips map[string]string) {
	o := r.outcomes(skips)
	t.Logf("passed %d, failed %d, skipped %d (unrunnable / known failures), not run %d (features not claimed)",
		len(o.passed), len(o.failed), len(o.skipped), len(o.notRun))
	t.Logf("passed: %s", strings.Join(o.passed, ", "))
	if len(o.failed) > 0 {
		t.Logf("FAILED: %s", strings.Join(o.failed, ", "))
	}
}

// annotateReport puts a comment header on the suite's report (which stays
// a valid upstream ConformanceReport): the mode, the claimed features, the
// tests that passed, and the skipped tests with the reason.
func annotateReport(path string, full bool, published []gwv1.SupportedFeature, r *runResults, skips map[string]string, blocked []string, elapsed time.Duration) error {
	body, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var rep confv1.ConformanceReport
	if err := yaml.UnmarshalStrict(body, &rep); err != nil {
		return fmt.Errorf("the suite's report does not parse: %w", err)
	}
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, "# "+format+"\n", args...) }
	list := func(names []string, reason func(string) string) {
		for _, n := range names {
			if reason != nil {
				line("  - %s  (%s)", n, reason(n))
			} else {
				line("  - %s", n)
			}
		}
	}
	mode := fmt.Sprintf("kwok cluster, %d in-process Portico replicas, local data plane (Envoy and echo-basic Pods run as processes in network namespaces)", replicas)
	if full {
		mode = "real cluster with Portico installed (PORTICO_CONFORMANCE_FULL=1), no test skipped"
	}
	line("Portico: Gateway API conformance %s (upstream ConformanceReport below).", rep.GatewayAPIVersion)
	line("Written by `make conformance` (test/conformance, see docs/conformance.md).")
	line("Mode: %s.", mode)
	line("Suite run time: %s.", elapsed.Round(time.Second))
	names := make([]string, 0, len(published))
	for _, f := range published {
		names = append(names, string(f.Name))
	}
	line("Claimed features (GatewayClass status.supportedFeatures): %s.", strings.Join(names, ", "))
	o := r.outcomes(skips)
	line("Passed (%d):", len(o.passed))
	list(o.passed, nil)
	if len(o.failed) > 0 {
		line("FAILED (%d):", len(o.failed))
		list(o.failed, nil)
	}
	line("Skipped (%d):", len(o.skipped))
	list(o.skipped, func(n string) string { return skips[n] })
	line("Not run (%d; they need features Portico does not claim, the mesh profile's):", len(o.notRun))
	list(o.notRun, nil)
	if len(blocked) > 0 {
		line("Pods the local data plane did not run:")
		list(blocked, nil)
	}
	return os.WriteFile(path, append([]byte(b.String()), body...), 0o644)
}

// logWriter sends Portico's and the suite's logs to the test log (lines
// after the test has ended are dropped).
func logWriter(t *testing.T) *testLog { return &testLog{t: t} }

type testLog struct{ t *testing.T }

func (w *testLog) Write(p []byte) (int, error) {
	defer func() { _ = recover() }()
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
