package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/portico-dev/portico/internal/proxyspec"

	"github.com/portico-dev/portico/internal/testenv"
)

// Config of a run.
type Config struct {
	Repo  string
	Out   string // results.json, details.json, logs/
	Work  string // the cluster's state (temporary)
	Mode  string // "full" or "quick"
	Sizes []int
	// Probes per N for route propagation (quiet and under churn) and for
	// endpoint propagation; each batch stops early after ProbeBudget.
	Probes, EndpointProbes int
	ProbeBudget            time.Duration
	// ConvergenceRoutes is the size of the status convergence burst; it
	// runs after the first stage. Failover runs after stage FailoverAt.
	ConvergenceRoutes int
	FailoverAt        int
	// StatusDrainTimeout bounds the wait for the leader's status queue to
	// empty after a stage's routes are created.
	StatusDrainTimeout time.Duration
	Kubeconfig         string   // use this cluster instead of starting one
	ControllerArgs     []string // extra `portico controller` flags
	SkipTranslate      bool
	SkipCluster        bool
	// SkipEnvoy leaves out the end-to-end figures through a real Envoy.
	SkipEnvoy bool
	// Profiles: save each replica's heap profile at each N, its
	// allocation profiles around the churn window and the follower's CPU
	// profile during the quiet probes under Out/profiles (the
	// controllers need --debug-pprof).
	Profiles bool
	// ChurnWindow is how long the allocation rate under churn is measured,
	// with the churn alone (after the probes under churn).
	ChurnWindow time.Duration
	// FleetStreams is the number of delta ADS streams of the fleet
	// scenario (fleet.go) at the largest N; 0 skips it.
	FleetStreams int
	Log          io.Writer
}

// Details are what results.json has no room for (details.json).
type Details struct {
	Mode              string                   `json:"mode"`
	ControllerArgs    []string                 `json:"controller_args"`
	Workload          map[string]any           `json:"workload"`
	PhasesSeconds     map[string]float64       `json:"phases_seconds"`
	Stages            map[string]*Stage        `json:"stages"`
	StatusConvergence *ConvergenceDetails      `json:"status_convergence,omitempty"`
	StatusFloor       *FloorDetails            `json:"status_floor,omitempty"`
	FailoverAtRoutes  int                      `json:"failover_at_routes,omitempty"`
	Failover          []*FailoverDetails       `json:"failover,omitempty"`
	Errors            []string                 `json:"errors"`
	TranslateFull     map[string]TranslateFull `json:"-"`
}

// Stage holds the details of one N.
type Stage struct {
	Routes          int                      `json:"routes"`
	GrowSeconds     float64                  `json:"grow_seconds"`
	SyncSeconds     float64                  `json:"sync_seconds"`
	SettleSeconds   float64                  `json:"settle_seconds"`
	StatusDrained   bool                     `json:"status_drained"`
	ProxyResources  map[string]int           `json:"proxy_resources"`
	ProxyConfigKB   map[string]float64       `json:"proxy_config_kb"`
	Propagation     *ProbeStats              `json:"propagation,omitempty"`
	Churn           *ProbeStats              `json:"propagation_churn,omitempty"`
	Endpoint        *ProbeStats              `json:"endpoint_propagation,omitempty"`
	BytesCreateKB   *Stat                    `json:"bytes_create_kb,omitempty"`
	BytesDeleteKB   *Stat                    `json:"bytes_delete_kb,omitempty"`
	Translations    int                      `json:"follower_translations_during_probes"`
	TranslateMeanMs float64                  `json:"follower_translation_mean_ms"`
	XDSUpdateMeanMs float64                  `json:"follower_xds_update_mean_ms"`
	Memory          map[string]ReplicaMemory `json:"memory"`
	AllocQuietMBs   map[string]float64       `json:"alloc_rate_quiet_mb_s"`
	// AllocChurnProbesMBs: during the probes under churn, which add a
	// route create and delete per probe to the churn.
	AllocChurnProbesMBs map[string]float64 `json:"alloc_rate_churn_probes_mb_s"`
	ChurnActions        map[string]int64   `json:"churn_actions"`
	// AllocChurnMBs: under the churn alone, for ChurnOnlySeconds after the
	// probes, with ChurnOnlyActions.
	AllocChurnMBs    map[string]float64 `json:"alloc_rate_churn_mb_s"`
	ChurnOnlySeconds float64            `json:"churn_only_seconds"`
	ChurnOnlyActions map[string]int64   `json:"churn_only_actions"`
	EndToEnd         *E2EDetails        `json:"end_to_end,omitempty"`
	// TCPPropagation and TCPChurn: TCPRoute probes (tcproute.go), quiet
	// and under churn.
	TCPPropagation *ProbeStats `json:"tcp_propagation,omitempty"`
	TCPChurn       *ProbeStats `json:"tcp_propagation_churn,omitempty"`
}

// ProbeStats summarise a batch of probes.
type ProbeStats struct {
	Probes     int      `json:"probes"`
	Failures   int      `json:"failures"`
	Seconds    float64  `json:"seconds"`
	Create     Latency  `json:"create"` // or pod Ready → EDS for endpoint probes
	Delete     *Latency `json:"delete,omitempty"`
	FirstError string   `json:"first_error,omitempty"`
	// Parts split Create where a probe can tell (endpoint probes: the
	// Pod's Ready to the suite seeing its EndpointSlice, and that to EDS).
	Parts map[string]Latency `json:"parts,omitempty"`
}

// Stat is a median and a maximum.
type Stat struct {
	P50 float64 `json:"p50"`
	Max float64 `json:"max"`
}

// ReplicaMemory of one replica at the end of a stage's quiet probes.
type ReplicaMemory struct {
	Replica    string  `json:"replica"`
	RSSMiB     float64 `json:"rss_mib"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
	HeapMiB    float64 `json:"heap_inuse_mib"`
}

type suite struct {
	cfg      Config
	cl       *Cluster
	res      *Results
	det      *Details
	bin      string
	args     []string
	replicas []*Replica
	// loop is the real Envoy of the end-to-end figures (nil without
	// one); e2eTargets the replicas' xDS addresses it dials, the
	// follower's first ([]string; every replica serves xDS, so a failover
	// does not cut it off).
	loop       *EnvoyLoop
	e2eTargets atomic.Value
}

// setE2ETargets points the Envoy loop at follower first, then the other
// replicas.
func (s *suite) setE2ETargets(follower *Replica) {
	targets := []string{follower.XDSAddr}
	for _, r := range s.replicas {
		if r != follower {
			targets = append(targets, r.XDSAddr)
		}
	}
	s.e2eTargets.Store(targets)
}

func (s *suite) logf(format string, args ...any) {
	fmt.Fprintf(s.cfg.Log, "%s bench: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (s *suite) fail(what string, err error) {
	s.logf("ERROR %s: %v", what, err)
	s.det.Errors = append(s.det.Errors, what+": "+err.Error())
}

// phase records how long a phase took, and the load average.
func (s *suite) phase(name string, start time.Time) {
	s.det.PhasesSeconds[name] = round(time.Since(start).Seconds(), 1)
	s.load()
}

func (s *suite) load() {
	s.res.Machine.LoadAvgMax = max(s.res.Machine.LoadAvgMax, LoadAvg())
}

// Run runs the suite. Scenario failures are recorded in Details.Errors and
// the run goes on; the error is for failures that stop it.
func Run(ctx context.Context, cfg Config) (*Results, *Details, error) {
	if cfg.Log == nil {
		cfg.Log = os.Stderr
	}
	s := &suite{cfg: cfg, res: NewResults(), det: &Details{
		Mode: cfg.Mode, ControllerArgs: cfg.ControllerArgs, PhasesSeconds: map[string]float64{},
		Stages: map[string]*Stage{}, Errors: []string{},
		Workload: map[string]any{
			"gateways": Gateways, "route_namespaces": RouteNS, "hostnames_per_gateway": HostsPerGW,
			"services": "one headless, selector-less Service and EndpointSlice (2 endpoints) per route",
			"live":     fmt.Sprintf("per namespace a Service over a Deployment of %d kwok Pods; 1 route in %d uses it", LiveReplicas, LiveEvery),
			"churn":    fmt.Sprintf("%d route spec changes/s and %d live Pod restarts/s", ChurnRouteUpdatesPerSec, ChurnPodRestartsPerSec),
			"probes":   fmt.Sprintf("%d route probes (quiet and churn) and %d endpoint probes per N, each batch at most %s", cfg.Probes, cfg.EndpointProbes, cfg.ProbeBudget),
		},
	}}
	start := time.Now()
	s.res.Machine = DescribeMachine(cfg.Repo)
	s.load()
	s.res.Machine.Mode = cfg.Mode
	s.res.Machine.XDSTLS = true
	s.res.Machine.Replicas = 2
	s.res.Machine.Processes = true
	s.res.Machine.Kube = "kube-apiserver v1.37.2 + etcd + kwok v0.8.0 (hack/cluster-up.sh)"
	defer func() { s.res.Machine.RuntimeS = round(time.Since(start).Seconds(), 1) }()

	if !cfg.SkipTranslate {
		t := time.Now()
		for _, n := range cfg.Sizes {
			tf, err := FullTranslation(n)
			if err != nil {
				s.fail(fmt.Sprintf("full translation at %d routes", n), err)
				continue
			}
			s.logf("full translation at %d routes: %.2f ms, %d allocs", n, tf.Ms, tf.Allocs)
			s.res.TranslateFull[Key(n)] = tf
			inc, err := IncrementalTranslation(n, IncrementalChanges)
			if err != nil {
				s.fail(fmt.Sprintf("incremental translation at %d routes", n), err)
				continue
			}
			s.logf("translation of one changed route at %d routes, in-process: %.3f ms", n, inc)
			m := s.res.TranslateIncremental[Key(n)]
			m.InProcessMs = &inc
			s.res.TranslateIncremental[Key(n)] = m
		}
		s.phase("translate_full", t)
		t = time.Now()
		mix, err := FullTranslationWithTCP(MixHTTPRoutes, MixTCPRoutes, MixRounds)
		if err != nil {
			s.fail(fmt.Sprintf("full translation of %d HTTPRoutes with %d TCPRoutes", MixHTTPRoutes, MixTCPRoutes), err)
		} else {
			s.res.TranslateFullTCP = mix
			s.logf("full translation of %d HTTPRoutes: %.2f ms alone, %.2f ms with %d TCPRoutes: %.3f× (rounds %v)",
				MixHTTPRoutes, mix.Alone.Ms, mix.With.Ms, MixTCPRoutes, mix.Ratio, mix.RoundRatios)
		}
		s.phase("translate_full_tcp", t)
	}
	if cfg.SkipCluster {
		return s.res, s.det, nil
	}
	if err := s.runCluster(ctx); err != nil {
		return s.res, s.det, err
	}
	return s.res, s.det, nil
}

func (s *suite) runCluster(ctx context.Context) error {
	t := time.Now()
	s.bin = filepath.Join(s.cfg.Work, "portico")
	build := testenv.GoCommand(ctx, "build", "-o", s.bin, "./cmd/portico")
	build.Dir, build.Stdout, build.Stderr = s.cfg.Repo, s.cfg.Log, s.cfg.Log
	if err := build.Run(); err != nil {
		return fmt.Errorf("building portico: %w", err)
	}
	s.phase("build", t)
	t = time.Now()
	cl, err := StartCluster(ctx, s.cfg.Repo, s.cfg.Work, s.cfg.Kubeconfig)
	if err != nil {
		return err
	}
	defer cl.Stop()
	s.cl = cl
	if err := Base(ctx, cl.Client); err != nil {
		return err
	}
	s.phase("cluster_up", t)
	s.logf("cluster up in %.1fs (%s)", time.Since(t).Seconds(), cl.Kubeconfig)

	logs := filepath.Join(s.cfg.Out, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}
	s.args = ReplicaArgs(cl.Kubeconfig, s.cfg.ControllerArgs)
	for _, name := range []string{"bench-a", "bench-b"} {
		r, err := StartReplica(s.bin, logs, name, s.args)
		if err != nil {
			return err
		}
		s.replicas = append(s.replicas, r)
	}
	defer func() {
		for _, r := range s.replicas {
			r.Stop(15 * time.Second)
		}
	}()
	for _, r := range s.replicas {
		if err := s.waitReady(ctx, r); err != nil {
			return err
		}
	}
	if _, _, err := s.roles(ctx); err != nil {
		return err
	}
	s.logf("replicas ready, leader elected")
	if !s.cfg.SkipEnvoy {
		s.startLoop(ctx, logs)
		defer func() {
			if s.loop != nil {
				if err := s.loop.Close(); err != nil {
					s.fail("stopping the envoy loop", err)
				}
				s.logf("envoy loop stopped")
			}
		}()
	}

	prev := 0
	for i, n := range s.cfg.Sizes {
		if err := s.stage(ctx, prev, n); err != nil {
			return fmt.Errorf("stage %d: %w", n, err)
		}
		prev = n
		if i == 0 && s.cfg.ConvergenceRoutes > 0 {
			s.convergence(ctx)
		}
		if n == s.cfg.FailoverAt {
			s.failover(ctx)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// startLoop starts the real Envoy of the end-to-end figures, connected
// to the follower; without it those figures are missing and details.json
// says why.
func (s *suite) startLoop(ctx context.Context, logs string) {
	_, follower, err := s.roles(ctx)
	if err == nil {
		s.setE2ETargets(follower)
		// The client certificate exists once the leader has provisioned.
		_, err = s.clientTLS(ctx)
	}
	if err == nil {
		s.loop, err = StartEnvoyLoop(ctx, s.cl.Client, func() []string { return s.e2eTargets.Load().([]string) }, logs)
	}
	if err != nil {
		s.fail("envoy in the loop (end-to-end figures skipped)", err)
		return
	}
	s.logf("envoy in the loop: LIVE, serving %s/%s", InfraNamespace, ProbeGateway)
	if err := s.loop.TCPErr(); err != nil {
		s.fail("envoy in the loop: TCPRoutes (TCP end-to-end figures skipped)", err)
	}
}

func (s *suite) waitReady(ctx context.Context, r *Replica) error {
	err := poll(ctx, 3*time.Minute, 100*time.Millisecond, func() (bool, error) {
		if r.Exited() {
			return false, fmt.Errorf("replica %s exited (see %s/logs/%s.log)", r.Name, s.cfg.Out, r.Name)
		}
		return r.Ready(ctx), nil
	})
	if err != nil {
		return fmt.Errorf("replica %s not ready: %w", r.Name, err)
	}
	return nil
}

// roles returns the leader and a follower, once exactly one replica leads.
func (s *suite) roles(ctx context.Context) (leader, follower *Replica, err error) {
	err = poll(ctx, 2*time.Minute, 50*time.Millisecond, func() (bool, error) {
		leader, follower = nil, nil
		n := 0
		for _, r := range s.replicas {
			ok, err := r.Leader(ctx)
			if err != nil {
				return false, nil
			}
			if ok {
				leader = r
				n++
			} else {
				follower = r
			}
		}
		return n == 1 && follower != nil, nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("waiting for one leader and one follower: %w", err)
	}
	return leader, follower, nil
}

// clientTLS is the client side of xDS mTLS as a proxy of ProbeGateway has
// it: the certificate the leader issued into the Gateway's Secret.
func (s *suite) clientTLS(ctx context.Context) (*tls.Config, error) {
	return s.clientTLSOf(ctx, proxyspec.ClientCertSecretName(ProbeGateway))
}

// clientTLSOf is the client TLS configuration of the client certificate
// Secret name in InfraNamespace, once the controller has written it.
func (s *suite) clientTLSOf(ctx context.Context, name string) (*tls.Config, error) {
	var sec corev1.Secret
	key := client.ObjectKey{Namespace: InfraNamespace, Name: name}
	err := poll(ctx, 2*time.Minute, 100*time.Millisecond, func() (bool, error) {
		return s.cl.Client.Get(ctx, key, &sec) == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("client certificate Secret %s: %w", key, err)
	}
	cert, err := tls.X509KeyPair(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(sec.Data["ca.crt"]) {
		return nil, errors.New("client certificate Secret without ca.crt")
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}, nil
}

// Metric names scraped from the replicas.
const (
	mTranslationCount = "portico_translation_duration_seconds_count"
	mTranslationSum   = "portico_translation_duration_seconds_sum"
	mXDSUpdateSum     = "portico_xds_update_duration_seconds_sum"
	mQueueDepth       = "portico_status_queue_depth"
	mHeapInuse        = "go_memstats_heap_inuse_bytes"
	mAllocTotal       = "go_memstats_alloc_bytes_total"
)

// settle waits until r has not translated for quiet (at most limit).
func (s *suite) settle(ctx context.Context, r *Replica, quiet, limit time.Duration) bool {
	last, changed := -1.0, time.Now()
	err := poll(ctx, limit, 100*time.Millisecond, func() (bool, error) {
		m, err := r.Metrics(ctx)
		if err != nil {
			return false, nil
		}
		if c := m.Sum(mTranslationCount, nil); c != last {
			last, changed = c, time.Now()
		}
		return time.Since(changed) >= quiet, nil
	})
	return err == nil
}

// drain waits until the leader's status queue stays empty (at most limit).
func (s *suite) drain(ctx context.Context, limit time.Duration) bool {
	zero := 0
	err := poll(ctx, limit, 200*time.Millisecond, func() (bool, error) {
		leader, _, err := s.roles(ctx)
		if err != nil {
			return false, err
		}
		m, err := leader.Metrics(ctx)
		if err != nil || !m.Has(mQueueDepth) || m.Sum(mQueueDepth, nil) != 0 {
			zero = 0
			return false, nil
		}
		zero++
		return zero >= 3, nil
	})
	return err == nil
}

// saveProfiles saves the profile (heap, allocs, …) of each replica as
// <Out>/profiles/<name>-<replica>.pb.gz when Config.Profiles is set. The
// allocs profile counts from the start of the process: two of them give
// the allocations between (go tool pprof -diff_base).
func (s *suite) saveProfiles(ctx context.Context, profile, name string) {
	if !s.cfg.Profiles {
		return
	}
	for _, r := range s.replicas {
		path := filepath.Join(s.cfg.Out, "profiles", fmt.Sprintf("%s-%s.pb.gz", name, r.Name))
		if err := r.SaveProfile(ctx, "/debug/pprof/"+profile, path); err != nil {
			s.fail(profile+" profile of "+r.Name, err)
		}
	}
}

// followerCPUProfile saves, when Config.Profiles is set, a CPU profile
// of the follower for the next 10 seconds as
// <Out>/profiles/<name>-<replica>.pb.gz (during the quiet probes: the
// follower's single-route translations); the returned function waits
// for it and records a failure.
func (s *suite) followerCPUProfile(ctx context.Context, follower *Replica, name string) (wait func()) {
	if !s.cfg.Profiles {
		return func() {}
	}
	done := make(chan error, 1)
	go func() {
		path := filepath.Join(s.cfg.Out, "profiles", fmt.Sprintf("%s-%s.pb.gz", name, follower.Name))
		done <- follower.SaveProfile(ctx, "/debug/pprof/profile?seconds=10", path)
	}()
	return func() {
		if err := <-done; err != nil {
			s.fail("CPU profile of "+follower.Name, err)
		}
	}
}

func (s *suite) memory(ctx context.Context, n int) map[string]ReplicaMemory {
	s.saveProfiles(ctx, "heap", fmt.Sprintf("heap-%d", n))
	out := map[string]ReplicaMemory{}
	leader, _, _ := s.roles(ctx)
	for _, r := range s.replicas {
		role := "follower"
		if r == leader {
			role = "leader"
		}
		rm := ReplicaMemory{Replica: r.Name}
		rm.RSSMiB, rm.PeakRSSMiB, _ = r.ProcStatus()
		if m, err := r.Metrics(ctx); err == nil {
			rm.HeapMiB = round(m.Sum(mHeapInuse, nil)/(1<<20), 1)
		}
		out[role] = rm
	}
	return out
}

// allocs scrapes go_memstats_alloc_bytes_total of every replica.
func (s *suite) allocs(ctx context.Context) map[string]float64 {
	out := map[string]float64{}
	for _, r := range s.replicas {
		if m, err := r.Metrics(ctx); err == nil {
			out[r.Name] = m.Sum(mAllocTotal, nil)
		}
	}
	return out
}

func allocRates(a, b map[string]float64, d time.Duration) map[string]float64 {
	out := map[string]float64{}
	for k, v := range b {
		if v0, ok := a[k]; ok && v >= v0 {
			out[k] = round((v-v0)/1e6/d.Seconds(), 2)
		}
	}
	return out
}

// proxyConfig summarises what the proxy holds, by type.
func proxyConfig(a *ADS) (map[string]int, map[string]float64) {
	counts, kb := map[string]int{}, map[string]float64{}
	for _, t := range ADSTypes {
		short := t[len("type.googleapis.com/"):]
		n, size := a.StateSize(t)
		counts[short], kb[short] = n, round(float64(size)/1000, 1)
	}
	return counts, kb
}
