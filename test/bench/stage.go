package bench

import (
	"context"
	"fmt"
	"sort"
	"syscall"
	"time"

	"k8s.io/utils/ptr"
)

// stage grows the workload from routes [0, from) to [0, n) and runs the
// per-N scenarios against a proxy connected to the follower.
func (s *suite) stage(ctx context.Context, from, n int) error {
	st := &Stage{Routes: n}
	s.det.Stages[Key(n)] = st
	s.load()
	begin := time.Now()
	defer s.phase(fmt.Sprintf("stage_%d", n), begin)

	t := time.Now()
	if err := Grow(ctx, s.cl.Client, from, n, 32); err != nil {
		return err
	}
	st.GrowSeconds = round(time.Since(t).Seconds(), 1)
	s.logf("stage %d: %d routes, Services and EndpointSlices created in %.1fs", n, n-from, st.GrowSeconds)

	_, follower, err := s.roles(ctx)
	if err != nil {
		return err
	}
	tc, err := s.clientTLS(ctx)
	if err != nil {
		return err
	}
	a, err := DialADS(follower.XDSAddr, InfraNamespace+"/"+ProbeGateway, tc)
	if err != nil {
		return err
	}
	defer a.Close()

	// The sync route is written after every other route: once the proxy
	// has it, the follower has translated all of them.
	t = time.Now()
	marker := fmt.Sprintf("/bench-sync-%d-z", n)
	tr := a.Track(marker)
	if err := upsertRoute(ctx, s.cl.Client, ProbeRoute(RouteNamespace(0), "sync", marker, 0)); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	_, err = a.Wait(wctx, tr, true)
	cancel()
	a.Untrack(tr)
	if err != nil {
		return fmt.Errorf("the follower's proxy never got the sync route: %w", err)
	}
	st.SyncSeconds = round(time.Since(t).Seconds(), 1)
	t = time.Now()
	s.settle(ctx, follower, 2*time.Second, 2*time.Minute)
	st.StatusDrained = s.drain(ctx, s.cfg.StatusDrainTimeout)
	a.WaitQuiet(time.Second, 30*time.Second)
	st.SettleSeconds = round(time.Since(t).Seconds(), 1)
	st.ProxyResources, st.ProxyConfigKB = proxyConfig(a)
	s.logf("stage %d: follower %s in sync after %.1fs, settled in %.1fs (status queue drained: %v); proxy holds %v",
		n, follower.Name, st.SyncSeconds, st.SettleSeconds, st.StatusDrained, st.ProxyResources)

	// 2. Propagation, quiet; translate_incremental and bytes per change.
	m0, _ := follower.Metrics(ctx)
	a0 := s.allocs(ctx)
	t0 := time.Now()
	var bytesCreate, bytesDelete []float64
	cpuWait := s.followerCPUProfile(ctx, follower, fmt.Sprintf("cpu-%d-quiet-probes", n))
	st.Propagation = s.routeProbes(ctx, a, n, 0, true, &bytesCreate, &bytesDelete)
	cpuWait()
	a1 := s.allocs(ctx)
	st.AllocQuietMBs = allocRates(a0, a1, time.Since(t0))
	m1, _ := follower.Metrics(ctx)
	if st.Propagation.Probes > 0 {
		s.res.Propagation[Key(n)] = st.Propagation.Create
	}
	if dc := m1.Sum(mTranslationCount, nil) - m0.Sum(mTranslationCount, nil); dc > 0 {
		st.Translations = int(dc)
		st.TranslateMeanMs = round((m1.Sum(mTranslationSum, nil)-m0.Sum(mTranslationSum, nil))/dc*1000, 3)
		st.XDSUpdateMeanMs = round((m1.Sum(mXDSUpdateSum, nil)-m0.Sum(mXDSUpdateSum, nil))/dc*1000, 3)
		m := s.res.TranslateIncremental[Key(n)] // keeps the in-process figure
		m.Ms = st.TranslateMeanMs
		s.res.TranslateIncremental[Key(n)] = m
	}
	if len(bytesCreate) > 0 {
		st.BytesCreateKB, st.BytesDeleteKB = kbStat(bytesCreate), kbStat(bytesDelete)
		s.res.BytesPerRouteChange[Key(n)] = st.BytesCreateKB.P50
	}
	s.logf("stage %d: propagation %+v; %d follower translations, mean %.2f ms (+ %.2f ms to the xDS cache); pushed per route change %+v kB",
		n, st.Propagation.Create, st.Translations, st.TranslateMeanMs, st.XDSUpdateMeanMs, st.BytesCreateKB)

	// 2c. TCPRoute propagation, quiet: after the HTTP probes' windows, so
	// that their translation and allocation figures stay theirs.
	st.TCPPropagation = s.tcpRouteProbes(ctx, a, n, 0)
	if st.TCPPropagation.Probes > 0 {
		s.res.TCPPropagation[Key(n)] = st.TCPPropagation.Create
	}
	s.logf("stage %d: TCPRoute propagation %+v (%d failed: %s)", n, st.TCPPropagation.Create, st.TCPPropagation.Failures, st.TCPPropagation.FirstError)

	// 5. Memory at N, after the quiet probes.
	st.Memory = s.memory(ctx, n)
	var top ReplicaMemory
	for _, m := range st.Memory {
		if m.RSSMiB > top.RSSMiB {
			top = m
		}
	}
	s.res.Memory[Key(n)] = Memory{RSSMiB: top.RSSMiB, HeapMiB: top.HeapMiB}
	s.logf("stage %d: memory %+v", n, st.Memory)

	// Through a real Envoy: route → first 200, endpoint → new pod, RSS.
	if s.loop != nil {
		s.setE2ETargets(follower)
		st.EndToEnd = s.e2eQuiet(ctx, n)
	}

	// 3. Endpoint propagation.
	st.Endpoint = s.endpointProbes(ctx, a, n)
	if st.Endpoint.Probes > 0 {
		s.res.EndpointPropagation[Key(n)] = Percentiles{P50: st.Endpoint.Create.P50, P99: st.Endpoint.Create.P99}
	}
	s.logf("stage %d: endpoint propagation %+v, split %+v", n, st.Endpoint.Create, st.Endpoint.Parts)

	// 2b and 5b. Propagation and allocation rate under churn.
	churn := StartChurn(ctx, s.cl.Client, n)
	time.Sleep(2 * time.Second)
	s.saveProfiles(ctx, "allocs", fmt.Sprintf("allocs-%d-churn-start", n))
	c0, ct0 := s.allocs(ctx), time.Now()
	st.Churn = s.routeProbes(ctx, a, n, 1_000_000, false, nil, nil)
	c1, ct1 := s.allocs(ctx), time.Now()
	st.AllocChurnProbesMBs = allocRates(c0, c1, ct1.Sub(ct0))
	st.ChurnActions = churn.actions()
	// The churn alone: the probes above add a route create and delete
	// each, several times the churn's own rate of changes.
	window := s.cfg.ChurnWindow
	if window <= 0 {
		window = 10 * time.Second
	}
	select {
	case <-ctx.Done():
	case <-time.After(window):
	}
	c2 := s.allocs(ctx)
	st.ChurnOnlySeconds = round(time.Since(ct1).Seconds(), 2)
	st.AllocChurnMBs = allocRates(c1, c2, time.Since(ct1))
	st.ChurnOnlyActions = churn.actions()
	for k, v := range st.ChurnActions {
		st.ChurnOnlyActions[k] -= v
	}
	s.saveProfiles(ctx, "allocs", fmt.Sprintf("allocs-%d-churn-end", n))
	// TCPRoute propagation under the same churn, after the allocation
	// windows (like the probes through Envoy).
	st.TCPChurn = s.tcpRouteProbes(ctx, a, n, 1_000_000)
	if st.TCPChurn.Probes > 0 {
		s.res.TCPPropagationChurn[Key(n)] = st.TCPChurn.Create
	}
	s.logf("stage %d: TCPRoute propagation under churn %+v (%d failed: %s)", n, st.TCPChurn.Create, st.TCPChurn.Failures, st.TCPChurn.FirstError)
	// Through Envoy under the same churn, after the allocation windows.
	if s.loop != nil && st.EndToEnd != nil {
		s.e2eChurn(ctx, n, st.EndToEnd, window)
	}
	churn.Stop()
	if st.Churn.Probes > 0 {
		s.res.PropagationChurn[Key(n)] = st.Churn.Create
	}
	// The largest N's rates are kept.
	s.res.AllocRateChurnMBs = ptr.To(maxValue(st.AllocChurnMBs))
	s.res.AllocRateChurnProbesMBs = ptr.To(maxValue(st.AllocChurnProbesMBs))
	s.logf("stage %d: propagation under churn %+v; alloc rate during those probes %v MB/s (churn %v); under the churn alone %v MB/s (%v in %.0f s)",
		n, st.Churn.Create, st.AllocChurnProbesMBs, st.ChurnActions, st.AllocChurnMBs, st.ChurnOnlyActions, st.ChurnOnlySeconds)
	if len(s.cfg.Sizes) > 0 && n == s.cfg.Sizes[len(s.cfg.Sizes)-1] {
		s.fleet(ctx, n)
	}
	return nil
}

func maxValue(m map[string]float64) float64 {
	var v float64
	for _, x := range m {
		v = max(v, x)
	}
	return v
}

// routeProbes runs up to cfg.Probes route probes, numbered from offset.
func (s *suite) routeProbes(ctx context.Context, a *ADS, n, offset int, quiet bool, bc, bd *[]float64) *ProbeStats {
	return s.createDeleteProbes(ctx, func(k int) (RouteProbe, error) {
		return ProbeRouteOnce(ctx, s.cl.Client, a, n, offset+k, quiet)
	}, bc, bd)
}

// createDeleteProbes runs up to cfg.Probes probes of f (k from 0) within
// the probe budget, stopping after three failures in a row; Create and
// Delete hold the latencies, bc and bd (when not nil) collect the bytes.
func (s *suite) createDeleteProbes(ctx context.Context, f func(k int) (RouteProbe, error), bc, bd *[]float64) *ProbeStats {
	ps := &ProbeStats{}
	var creates, deletes Durations
	start := time.Now()
	fails := 0
	for k := 0; k < s.cfg.Probes && time.Since(start) < s.cfg.ProbeBudget && ctx.Err() == nil; k++ {
		p, err := f(k)
		if err != nil {
			ps.Failures++
			if ps.FirstError == "" {
				ps.FirstError = err.Error()
			}
			if fails++; fails >= 3 {
				break
			}
			continue
		}
		fails = 0
		creates, deletes = append(creates, p.Create), append(deletes, p.Delete)
		if bc != nil {
			*bc, *bd = append(*bc, float64(p.BytesCreate)), append(*bd, float64(p.BytesDelete))
		}
	}
	ps.Probes, ps.Seconds = len(creates), round(time.Since(start).Seconds(), 1)
	del := deletes.Latency()
	ps.Create, ps.Delete = creates.Latency(), &del
	return ps
}

func (s *suite) endpointProbes(ctx context.Context, a *ADS, n int) *ProbeStats {
	var toSlice, fromSlice Durations
	ps := s.probes(ctx, s.cfg.EndpointProbes, func(k int) (time.Duration, error) {
		p, err := ProbeEndpoint(ctx, s.cl.Client, a, n, k)
		if err == nil && (p.ReadyToSlice > 0 || p.SliceToEDS > 0) {
			toSlice, fromSlice = append(toSlice, p.ReadyToSlice), append(fromSlice, p.SliceToEDS)
		}
		return p.Total, err
	})
	if len(toSlice) > 0 {
		ps.Parts = map[string]Latency{"pod_ready_to_endpointslice": toSlice.Latency(), "endpointslice_to_eds": fromSlice.Latency()}
	}
	return ps
}

// probes runs up to count probes of f within the probe budget, stopping
// after three failures in a row; Create holds the latencies.
func (s *suite) probes(ctx context.Context, count int, f func(k int) (time.Duration, error)) *ProbeStats {
	ps := &ProbeStats{}
	var lat Durations
	start := time.Now()
	fails := 0
	for k := 0; k < count && time.Since(start) < s.cfg.ProbeBudget && ctx.Err() == nil; k++ {
		d, err := f(k)
		if err != nil {
			ps.Failures++
			if ps.FirstError == "" {
				ps.FirstError = err.Error()
			}
			if fails++; fails >= 3 {
				break
			}
			continue
		}
		fails = 0
		lat = append(lat, d)
	}
	ps.Probes, ps.Seconds = len(lat), round(time.Since(start).Seconds(), 1)
	ps.Create = lat.Latency()
	return ps
}

func kbStat(v []float64) *Stat {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return &Stat{P50: round(s[(len(s)-1)/2]/1000, 2), Max: round(s[len(s)-1]/1000, 2)}
}

// convergence runs the status convergence scenario.
func (s *suite) convergence(ctx context.Context) {
	t := time.Now()
	defer s.phase("status_convergence", t)
	leader := func() *Replica {
		l, _, err := s.roles(ctx)
		if err != nil {
			return s.replicas[0]
		}
		return l
	}
	d, err := RunStatusConvergence(ctx, s.cl, leader, s.replicas, s.cfg.ConvergenceRoutes, s.logf)
	if err != nil {
		s.fail("status convergence", err)
		return
	}
	s.det.StatusConvergence = d
	if d.Routes == 1000 {
		s.res.StatusConvergence1000 = d.Convergence()
	}
	s.logf("status convergence: %+v", *d)
	// The burst's routes are deleted; let that settle before the next stage.
	s.drain(ctx, s.cfg.StatusDrainTimeout)

	// The same API work with the suite as the controller: the floor.
	fl, err := RunStatusFloor(ctx, s.cl, leader(), s.replicas, s.cfg.ConvergenceRoutes)
	if err != nil {
		s.fail("status floor", err)
		return
	}
	s.det.StatusFloor = fl
	if fl.Routes == 1000 && s.res.StatusConvergence1000 != nil {
		secs := fl.Seconds
		s.res.StatusConvergence1000.FloorSeconds = &secs
	}
	s.logf("status floor: %+v", *fl)
	s.drain(ctx, s.cfg.StatusDrainTimeout)
}

// failover runs graceful failovers (the first one waits for converged
// status too; a single sample depends on where the follower is in its
// retry period, so there are GracefulSamples) then a crash failover,
// restarting the stopped replica each time.
func (s *suite) failover(ctx context.Context) {
	t := time.Now()
	defer s.phase("failover", t)
	s.det.FailoverAtRoutes = s.cfg.FailoverAt
	var graceful Durations
	var crash *FailoverDetails
	for i := 0; i <= GracefulSamples; i++ {
		sig := syscall.SIGTERM
		if i == GracefulSamples {
			sig = syscall.SIGKILL
		}
		leader, follower, err := s.roles(ctx)
		if err != nil {
			s.fail("failover", err)
			return
		}
		converge := i == 0 || sig == syscall.SIGKILL
		d, err := RunFailover(ctx, s.cl.Client, leader, follower, sig, fmt.Sprint(i), converge)
		if err != nil {
			s.fail("failover "+sig.String(), err)
		} else {
			s.det.Failover = append(s.det.Failover, d)
			conv := "not awaited"
			if d.Converged != nil {
				conv = fmt.Sprintf("%v after %.0f ms", *d.Converged, d.ConvergedMs)
			}
			s.logf("failover (%s of %s): new leader after %.0f ms; status converged: %s", d.Signal, leader.Name, d.LeaderMs, conv)
			if sig == syscall.SIGKILL {
				crash = d
			} else {
				graceful = append(graceful, time.Duration(d.LeaderMs*float64(time.Millisecond)))
			}
		}
		if err := leader.Wait(30 * time.Second); err != nil {
			s.fail("failover", err)
			leader.Stop(time.Second)
		}
		r, err := StartReplica(s.bin, s.cfg.Out+"/logs", leader.Name, s.args)
		if err != nil {
			s.fail("restarting "+leader.Name, err)
			return
		}
		for j := range s.replicas {
			if s.replicas[j] == leader {
				s.replicas[j] = r
			}
		}
		if err := s.waitReady(ctx, r); err != nil {
			s.fail("restarting "+leader.Name, err)
			return
		}
		if s.loop != nil {
			s.setE2ETargets(follower)
		}
		if converge {
			s.drain(ctx, s.cfg.StatusDrainTimeout)
		}
	}
	if len(graceful) == 0 || crash == nil {
		return
	}
	lease, err := LeaseDuration(ctx, s.cl.Clientset)
	if err != nil {
		s.fail("reading the Lease", err)
	}
	s.res.Failover = &Failover{GracefulMs: graceful.Quantile(0.5), CrashMs: crash.LeaderMs, LeaseDurationS: lease}
}

// GracefulSamples is the number of graceful failovers; results.json has
// their median.
const GracefulSamples = 3
