// Package controller wires Portico's Kubernetes mode: the informer provider,
// the translation pipeline and xDS server (on every replica), and the status
// writer gated by leader election (on the Lease holder only).
package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/internal/admin"
	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/infra"
	"github.com/portico-dev/portico/internal/leader"
	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/pipeline"
	"github.com/portico-dev/portico/internal/pki/certstore"
	"github.com/portico-dev/portico/internal/provider/kube"
	"github.com/portico-dev/portico/internal/proxysync"
	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/status"
	xdsserver "github.com/portico-dev/portico/internal/xds/server"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// Defaults of the status writer's client-side rate limits. Status writes
// are bounded by design (one per object per change, no-op writes skipped
// against the informer cache, changes of one object at least
// status.DefaultWriteInterval apart), so their rate follows the rate of
// spec changes; the limiter only shapes bursts. The burst lets a mass
// creation of routes or a new leader's backlog through at the speed of
// StatusWorkers concurrent requests; the sustained rate caps a long storm.
const (
	DefaultStatusQPS   = 200
	DefaultStatusBurst = 1000
)

// Options configure a Controller. Zero values get the defaults of the
// `portico controller` flags.
type Options struct {
	RESTConfig       *rest.Config
	Namespace        string // where the Lease lives
	ControllerName   string
	LeaderElectionID string
	Identity         string
	LeaseDuration    time.Duration
	RenewDeadline    time.Duration
	RetryPeriod      time.Duration
	// QPS and Burst limit the client of everything but status writes
	// (informers' lists, provisioning, certificates).
	QPS   float32
	Burst int
	// StatusQPS and StatusBurst limit the status writer's own client
	// (default DefaultStatusQPS, DefaultStatusBurst); StatusWorkers is its
	// number of concurrent writes (default status.DefaultWorkers).
	StatusQPS     float32
	StatusBurst   int
	StatusWorkers int
	// Debounce and MaxDelay of the translation loop.
	Debounce, MaxDelay time.Duration
	// XDSListener and AdminListener (probes and metrics) are where to
	// serve; they are closed when Run returns.
	XDSListener   net.Listener
	AdminListener net.Listener
	// DebugListener serves the /debug endpoints (nil: none). A listener
	// that is not on loopback serves HTTPS (a self-signed certificate made
	// at start) and every request must authenticate with a bearer token
	// (TokenReview) and be allowed get on the path as a non-resource URL
	// (SubjectAccessReview); see admin.KubernetesAuth. It is closed when
	// Run returns.
	DebugListener net.Listener
	// DebugPprof serves the net/http/pprof profiles under /debug/pprof/ on
	// the debug server (off by default: profiles cost CPU while taken).
	DebugPprof bool
	// Provision turns on provisioning of each Gateway's Envoy Deployment,
	// Service, ServiceAccount and bootstrap ConfigMap (leader only); a
	// Gateway is then Programmed once its proxies can take traffic.
	Provision bool
	// XDSServiceAddress is the host:port proxies dial for xDS (default
	// portico-xds.<Namespace>.svc:18000).
	XDSServiceAddress string
	// ProxyAgentImage is the image of the proxies' shutdown-manager
	// sidecar (`portico proxy-agent`), the controller's own image
	// (default infra.DefaultAgentImage).
	ProxyAgentImage string
	// XDSTLS turns on mutual TLS on the xDS server: the leader keeps a CA,
	// the serving certificate and one client certificate per Gateway in
	// Secrets; every replica serves with the current serving certificate
	// and gives a stream only the config of the Gateway its client
	// certificate names.
	XDSTLS bool
	// XDSExtraSANs are extra DNS names or IPs of the serving certificate.
	XDSExtraSANs []string
	// XDSSecurity: client certificate lifetime, connection age, and
	// Secrets over plaintext (see XDSSecurity).
	XDSSecurity XDSSecurity
	// MaxRouteExpansion and MaxGatewayExpansion are the budgets of
	// gatewayapi.Options (0: the defaults).
	MaxRouteExpansion, MaxGatewayExpansion int
	// XDSOptions change how the IR becomes Envoy resources (the route
	// count from which tables are scoped).
	XDSOptions translate.Options
	// ProxySync configures the aggregation of the proxies' sync state
	// into the portico.dev/ProxiesInSync condition (leader only).
	ProxySync ProxySync
	Log       *slog.Logger
}

// ProxySync configures the leader's aggregation of every replica's proxy
// report (package proxysync).
type ProxySync struct {
	// Peers lists the other replicas' debug servers; nil: this replica's
	// proxies only.
	Peers func(context.Context) ([]proxysync.Peer, error)
	// Interval between rounds and StaleAfter, the stale threshold (0: the
	// proxysync defaults).
	Interval, StaleAfter time.Duration
}

func (o *Options) defaults() {
	if o.ControllerName == "" {
		o.ControllerName = gatewayapi.DefaultControllerName
	}
	if o.LeaderElectionID == "" {
		o.LeaderElectionID = "portico-leader"
	}
	if o.Namespace == "" {
		o.Namespace = "portico-system"
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = 15 * time.Second
	}
	if o.RenewDeadline == 0 {
		o.RenewDeadline = 10 * time.Second
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = 2 * time.Second
	}
	if o.StatusWorkers == 0 {
		o.StatusWorkers = status.DefaultWorkers
	}
	if o.StatusQPS == 0 {
		o.StatusQPS = DefaultStatusQPS
	}
	if o.StatusBurst == 0 {
		o.StatusBurst = DefaultStatusBurst
	}
	if o.Identity == "" {
		o.Identity = leader.DefaultIdentity()
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.XDSServiceAddress == "" {
		o.XDSServiceAddress = "portico-xds." + o.Namespace + ".svc:18000"
	}
}

// Controller is one replica.
type Controller struct {
	opts     Options
	log      *slog.Logger
	metrics  *metrics.Metrics
	provider *kube.Provider
	pipeline *pipeline.Pipeline
	xds      *xdsserver.Server
	writer   *status.Writer
	infra    *infra.Reconciler  // nil unless Options.Provision
	certs    *certstore.Manager // nil unless Options.XDSTLS
	serving  *certstore.ServingSource
	termWG   sync.WaitGroup // goroutines of leadership terms
	elector  *leader.Elector
	admin    *admin.Server
	debug    *admin.Debug // nil without Options.DebugListener
}

// New builds a replica. Nothing runs until Run.
func New(opts Options) (*Controller, error) {
	opts.defaults()
	if opts.RESTConfig == nil || opts.XDSListener == nil || opts.AdminListener == nil {
		return nil, errors.New("controller: RESTConfig, XDSListener and AdminListener are required")
	}
	cfg := rest.CopyConfig(opts.RESTConfig)
	if opts.QPS > 0 {
		cfg.QPS = opts.QPS
	}
	if opts.Burst > 0 {
		cfg.Burst = opts.Burst
	}
	cfg.UserAgent = "portico/" + opts.Identity
	log := opts.Log.With("identity", opts.Identity)
	scheme := kube.NewScheme()

	c := &Controller{opts: opts, log: log, metrics: metrics.New()}
	// The status writer compares with the informer cache first and reads
	// live objects after a conflict.
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("controller: client: %w", err)
	}
	// The status writer has its own rate limiter: a burst of status
	// writes (a mass creation of routes, a new leader) neither waits behind
	// nor delays the other requests.
	scfg := rest.CopyConfig(cfg)
	scfg.QPS, scfg.Burst, scfg.RateLimiter = opts.StatusQPS, opts.StatusBurst, nil
	statusClient, err := client.New(scfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("controller: status client: %w", err)
	}
	c.writer = status.New(status.Config{
		Client:         statusClient,
		ControllerName: opts.ControllerName,
		Workers:        opts.StatusWorkers,
		Metrics:        status.NewMetrics(c.metrics.Registry),
		Log:            log.With("component", "status"),
	})
	// Until the first aggregation of a term, Gateways keep their live
	// proxy-sync condition.
	c.writer.SetGatewayConditions([]string{proxysync.ConditionType}, nil)
	c.writer.SetRouteConditions([]string{proxysync.ConditionType}, nil)
	c.xds = xdsserver.New(log.With("component", "xds"), c.metrics)
	pcfg := pipeline.Config{
		ControllerName:      opts.ControllerName,
		Debounce:            opts.Debounce,
		MaxDelay:            opts.MaxDelay,
		XDS:                 c.xds,
		Status:              c.writer,
		MaxRouteExpansion:   opts.MaxRouteExpansion,
		MaxGatewayExpansion: opts.MaxGatewayExpansion,
		XDSOptions:          opts.XDSOptions,
		Metrics:             c.metrics,
		Log:                 log,
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("controller: clientset: %w", err)
	}
	if opts.XDSTLS {
		var dns []string
		var ips []net.IP
		for _, san := range opts.XDSExtraSANs {
			if ip := net.ParseIP(san); ip != nil {
				ips = append(ips, ip)
			} else {
				dns = append(dns, san)
			}
		}
		c.certs, err = certstore.NewManager(certstore.Config{
			Client: cl, Namespace: opts.Namespace, DNSNames: dns, IPs: ips,
			ClientValidity: opts.XDSSecurity.ClientCertValidity,
			Log:            log.With("component", "pki"),
		})
		if err != nil {
			return nil, err
		}
		c.serving = certstore.NewServingSource(cs, opts.Namespace, log.With("component", "pki"))
		c.xds.TLS = xdsserver.TLSConfig(c.serving)
	}
	if opts.Provision {
		host, _, err := net.SplitHostPort(opts.XDSServiceAddress)
		if err != nil {
			return nil, fmt.Errorf("controller: xDS service address: %w", err)
		}
		c.infra = infra.New(infra.Config{
			Client:  cl,
			Params:  infra.Params{XDSAddress: opts.XDSServiceAddress, XDSServerName: host, AgentImage: opts.ProxyAgentImage},
			Metrics: infra.NewMetrics(c.metrics.Registry),
			Log:     log.With("component", "infra"),
		})
		if c.certs != nil {
			c.infra.SetCerts(c.certs)
		}
		pcfg.Infra = c.infra
		pcfg.Infrastructure = true
	}
	c.pipeline = pipeline.New(pcfg)
	c.provider, err = kube.New(kube.Config{
		RESTConfig: cfg,
		Scheme:     scheme,
		Notify:     func() { c.pipeline.SubmitFunc(c.provider.Snapshot) },
		Observe:    c.writer.Observe,
		Log:        log.With("component", "kube"),
	})
	if err != nil {
		return nil, err
	}
	c.writer.SetReader(c.provider.Cache())
	c.wireXDSSecurity()
	if c.infra != nil {
		// The reconciler lists provisioned objects from the informer cache.
		c.infra.SetReader(c.provider.Cache())
		c.provider.SetInfraObserver(c.infra.Observe)
	}
	// Leader election gets its own client whose requests time out, so that
	// a hung API server cannot hold a renewal (or the release) forever.
	lcfg := rest.CopyConfig(cfg)
	lcfg.Timeout = opts.RenewDeadline
	lcs, err := kubernetes.NewForConfig(lcfg)
	if err != nil {
		return nil, fmt.Errorf("controller: clientset: %w", err)
	}
	c.elector, err = leader.New(leader.Config{
		Client: lcs,
		// The Lease watch (prompt take-over after a release) is one
		// long-running request: no request timeout.
		WatchClient:      cs,
		Namespace:        opts.Namespace,
		Name:             opts.LeaderElectionID,
		Identity:         opts.Identity,
		LeaseDuration:    opts.LeaseDuration,
		RenewDeadline:    opts.RenewDeadline,
		RetryPeriod:      opts.RetryPeriod,
		OnStartedLeading: c.startTerm,
		OnStoppedLeading: func() { c.startTerm(nil) },
		Metrics:          leader.NewMetrics(c.metrics.Registry),
		Log:              log.With("component", "leader"),
	})
	if err != nil {
		return nil, err
	}
	c.admin = admin.New(log.With("component", "admin"), c.metrics, readiness{c})
	if opts.DebugListener != nil {
		dopts := admin.DebugOptions{Log: log, Source: admin.PipelineViews(c.pipeline), Profiling: opts.DebugPprof}
		if !admin.IsLoopback(opts.DebugListener.Addr()) {
			if dopts.Auth, err = admin.KubernetesAuth(cfg, log); err != nil {
				return nil, fmt.Errorf("controller: %w", err)
			}
			if dopts.TLS, _, err = admin.SelfSignedTLS(); err != nil {
				return nil, fmt.Errorf("controller: %w", err)
			}
		}
		c.debug = admin.NewDebug(dopts)
		c.debug.Handle("GET /debug/leader", http.HandlerFunc(c.serveLeader))
		c.debug.Handle("GET /debug/proxies", admin.ProxiesHandler(opts.Identity, c.xds))
	}
	return c, nil
}

// Identity is the replica's leader-election identity.
func (c *Controller) Identity() string { return c.elector.Identity() }

// IsLeader reports whether the replica holds the Lease.
func (c *Controller) IsLeader() bool { return c.elector.IsLeader() }

// Pipeline is the replica's translation loop (read-only use).
func (c *Controller) Pipeline() *pipeline.Pipeline { return c.pipeline }

// StatusPending is the number of objects waiting in the status queue.
func (c *Controller) StatusPending() int { return c.writer.Pending() }

// Snapshot is the replica's current input, for tests and debugging.
func (c *Controller) Snapshot(ctx context.Context) (*resource.Snapshot, error) {
	return c.provider.Snapshot(ctx)
}

// Run runs the replica until ctx is done. On return the Lease has been
// released (if held) and every goroutine has stopped.
func (c *Controller) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 10) // one per component at most
	run := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				cancel()
			}
		}()
	}
	run("admin", func(ctx context.Context) error { return c.admin.Serve(ctx, c.opts.AdminListener) })
	if c.debug != nil {
		run("debug", func(ctx context.Context) error { return c.debug.Serve(ctx, c.opts.DebugListener) })
	}
	run("pipeline", c.pipeline.Run)
	run("kube", c.provider.Run)
	run("status", func(ctx context.Context) error { c.writer.Run(ctx); return nil })
	if c.infra != nil {
		run("infra", func(ctx context.Context) error { c.infra.Run(ctx); return nil })
	}
	if c.serving != nil {
		run("pki-serving", c.serving.Run)
	}
	run("xds", func(ctx context.Context) error {
		// Proxies get config only once the first complete translation is
		// in the cache: no proxy ever sees an empty or partial snapshot.
		select {
		case <-ctx.Done():
			_ = c.opts.XDSListener.Close()
			return nil
		case <-c.pipeline.ReadyC():
		}
		c.log.Info("serving xDS", "address", c.opts.XDSListener.Addr().String())
		return c.xds.Serve(ctx, c.opts.XDSListener)
	})
	run("leader", c.elector.Run)
	wg.Wait()
	c.termWG.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// startTerm starts (ctx non-nil) or ends (nil) a term of leadership for
// every writer: statuses and provisioned proxies.
func (c *Controller) startTerm(ctx context.Context) {
	c.writer.SetLeading(ctx)
	if ctx != nil {
		// The aggregation of the proxies' state runs for the term.
		col := c.proxySyncCollector()
		c.termWG.Add(1)
		go func() {
			defer c.termWG.Done()
			col.Run(ctx)
		}()
	} else {
		// A later term starts from the live conditions, not this term's.
		c.writer.SetGatewayConditions([]string{proxysync.ConditionType}, nil)
		c.writer.SetRouteConditions([]string{proxysync.ConditionType}, nil)
	}
	if c.infra != nil {
		c.infra.SetLeading(ctx)
	}
	if c.certs != nil && ctx != nil {
		// The certificate manager runs for the term and stops with it.
		c.termWG.Add(1)
		go func() {
			defer c.termWG.Done()
			if err := c.certs.Run(ctx); err != nil {
				c.log.Error("certificate manager stopped", "err", err)
			}
		}()
	}
}

// proxySyncCollector is the term's aggregation of the proxies' state: its
// conditions go to the status writer.
func (c *Controller) proxySyncCollector() *proxysync.Collector {
	ps := c.opts.ProxySync
	cfg := proxysync.CollectorConfig{
		Local:      func() proxysync.Report { return c.xds.ProxyReport(c.opts.Identity) },
		Peers:      ps.Peers,
		Interval:   ps.Interval,
		StaleAfter: ps.StaleAfter,
		Log:        c.log.With("component", "proxysync"),
		Sink: func(conds map[types.NamespacedName][]metav1.Condition) {
			c.writer.SetGatewayConditions([]string{proxysync.ConditionType}, conds)
		},
	}
	tracer := &routeTracer{latest: func() *gatewayapi.Result {
		if r := c.pipeline.Latest(); r != nil {
			return r.Result
		}
		return nil
	}}
	cfg.Trace = tracer.trace
	cfg.RouteSink = func(conds map[proxysync.RouteRef][]proxysync.RouteCondition) {
		c.writer.SetRouteConditions([]string{proxysync.ConditionType}, routeConditions(conds))
	}
	if ps.Peers != nil {
		rc := c.opts.RESTConfig
		cfg.Token = func() (string, error) { return bearerToken(rc) }
		cfg.Client = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: proxysync.PeerTLS()}}
	}
	return proxysync.NewCollector(cfg)
}

// bearerToken is the token of cfg (in a cluster, the ServiceAccount's,
// read again each time: the kubelet rotates it), "" when it has none.
func bearerToken(cfg *rest.Config) (string, error) {
	if cfg.BearerTokenFile != "" {
		b, err := os.ReadFile(cfg.BearerTokenFile)
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(string(b)), nil
	}
	return cfg.BearerToken, nil // "": none (a peer off loopback refuses the fetch)
}

func (c *Controller) serveLeader(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Leader   bool   `json:"leader"`
		Identity string `json:"identity"`
	}{c.elector.IsLeader(), c.elector.Identity()})
}

// readiness: ready once the caches synced and the first translation was
// handed to the xDS server.
type readiness struct{ c *Controller }

func (r readiness) Ready() bool {
	return r.c.provider.Synced() && r.c.pipeline.Ready() && (r.c.serving == nil || r.c.serving.Ready())
}
