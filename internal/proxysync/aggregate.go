package proxysync

import (
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConditionType is the Gateway condition of the proxies' sync state.
const ConditionType = "portico.dev/ProxiesInSync"

// Reasons of ConditionType.
const (
	ReasonInSync    = "InSync"
	ReasonRejected  = "Rejected"
	ReasonStale     = "Stale"
	ReasonNoProxies = "NoProxies"
)

// Issue is one proxy that does not run the current configuration.
type Issue struct {
	NodeID, Replica string
	// Type is the short type (CDS…) that is rejected or waits, or "" when
	// the proxy's replica serves another version of the Gateway.
	Type  string
	Nack  *Nack
	Since time.Duration
	// Resources are the resources of the rejected type the proxy was sent
	// and does not run (Type.Unacked, at most MaxDiffNames), and Delta
	// whether they are what the rejected responses changed (delta xDS:
	// they carry versions) rather than the whole set of the type.
	Resources []string
	Delta     bool
}

// Summary is the state of the proxies of one Gateway across replicas.
type Summary struct {
	Proxies int
	Nacked  []Issue
	Stale   []Issue
}

// Current is what the aggregating replica serves a Gateway: its version
// and since when.
type Current struct {
	Version string
	Since   time.Time
}

// Aggregate summarizes the proxies of every Gateway of the reports, which
// come from every replica reached. A proxy (by node id) on two replicas,
// as while it reconnects, counts once, with its newest stream. current
// gives the aggregating replica's versions: a proxy whose replica serves
// its Gateway another version counts as stale once the aggregator has
// served its own for longer than staleAfter (a follower that lags by a
// translation is not stale).
func Aggregate(reports []Report, current map[string]Current, now time.Time, staleAfter time.Duration) map[string]*Summary {
	type key struct{ gw, node string }
	newest := map[key]*Proxy{}
	versions := map[string]map[string]string{} // replica → gateway → version
	nowOf := map[string]time.Time{}            // replica → now on its clock
	for ri := range reports {
		r := &reports[ri]
		nowOf[r.Replica] = now
		if !r.Received.IsZero() {
			nowOf[r.Replica] = r.Time.Add(now.Sub(r.Received))
		}
		v := map[string]string{}
		for _, g := range r.Gateways {
			v[g.Gateway] = g.Version
		}
		versions[r.Replica] = v
		for pi := range r.Proxies {
			p := &r.Proxies[pi]
			k := key{p.Gateway, p.NodeID}
			if o := newest[k]; o == nil || p.Connected.After(o.Connected) ||
				(p.Connected.Equal(o.Connected) && p.Replica+p.Stream > o.Replica+o.Stream) {
				newest[k] = p
			}
		}
	}
	keys := make([]key, 0, len(newest))
	for k := range newest {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].gw != keys[j].gw {
			return keys[i].gw < keys[j].gw
		}
		return keys[i].node < keys[j].node
	})
	out := map[string]*Summary{}
	for _, k := range keys {
		p := newest[k]
		s := out[k.gw]
		if s == nil {
			s = &Summary{}
			out[k.gw] = s
		}
		s.Proxies++
		issue := Issue{NodeID: p.NodeID, Replica: p.Replica}
		nacked, stale := false, false
		for i := range p.Types {
			t := &p.Types[i]
			state, age := t.State(nowOf[p.Replica], staleAfter)
			switch {
			case state == StateNack && !nacked:
				nacked = true
				issue.Type, issue.Nack, issue.Since = ShortType(t.TypeURL), t.Nack, age
				if t.Unacked != nil {
					for _, r := range t.Unacked.Resources {
						issue.Resources = append(issue.Resources, r.Name)
						issue.Delta = issue.Delta || r.Version != ""
					}
				}
			case state == StateStale && !nacked && !stale:
				stale = true
				issue.Type, issue.Since = ShortType(t.TypeURL), age
			}
		}
		if !nacked && !stale {
			if c, ok := current[k.gw]; ok && now.Sub(c.Since) > staleAfter {
				if v := versions[p.Replica][k.gw]; v != c.Version {
					stale = true
					issue.Since = now.Sub(c.Since)
				}
			}
		}
		switch {
		case nacked:
			s.Nacked = append(s.Nacked, issue)
		case stale:
			s.Stale = append(s.Stale, issue)
		}
	}
	return out
}

// Condition is the ProxiesInSync condition of a Gateway with summary s
// (nil: no proxy connected), staleAfter the threshold it was computed
// with. Its message names the first proxy at fault but no ages or
// versions that change while nothing else does, so that it changes only
// when the state does.
func Condition(s *Summary, staleAfter time.Duration) metav1.Condition {
	c := metav1.Condition{Type: ConditionType}
	switch {
	case s == nil || s.Proxies == 0:
		c.Status, c.Reason = metav1.ConditionUnknown, ReasonNoProxies
		c.Message = "No proxy of this Gateway is connected to a Portico replica."
	case len(s.Nacked) > 0:
		i := s.Nacked[0]
		c.Status, c.Reason = metav1.ConditionFalse, ReasonRejected
		c.Message = fmt.Sprintf("%d of %d %s rejected the configuration: %s (replica %s) rejected %s version %s: %s",
			len(s.Nacked), s.Proxies, proxies(s.Proxies), i.NodeID, i.Replica, i.Type, i.Nack.Version, i.Nack.Error)
	case len(s.Stale) > 0:
		i := s.Stale[0]
		c.Status, c.Reason = metav1.ConditionFalse, ReasonStale
		what := "waits for " + i.Type
		if i.Type == "" {
			what = "is connected to a replica serving another version"
		}
		c.Message = fmt.Sprintf("%d of %d %s did not acknowledge the current configuration within %s: %s (replica %s) %s.",
			len(s.Stale), s.Proxies, proxies(s.Proxies), staleAfter, i.NodeID, i.Replica, what)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonInSync
		verb := "run"
		if s.Proxies == 1 {
			verb = "runs"
		}
		c.Message = fmt.Sprintf("%d %s %s the current configuration.", s.Proxies, proxies(s.Proxies), verb)
	}
	c.Message = truncate(c.Message)
	return c
}

func proxies(n int) string {
	if n == 1 {
		return "proxy"
	}
	return "proxies"
}
