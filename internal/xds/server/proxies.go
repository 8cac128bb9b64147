package server

import (
	"fmt"
	"slices"
	"strings"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/metrics"
	"github.com/portico-dev/portico/internal/proxysync"
)

// The proxies' sync records (see package proxysync for what they mean):
// per stream and type, the responses sent and not yet answered, the last
// one ACKed and the NACK since. The callbacks keep them under their mutex,
// in the stream's state, so they cost nothing once a stream closes; a
// report copies them.

// maxOutstanding bounds the responses of one type kept while they wait for
// their answer. An xDS server sends the next response of a type after the
// proxy answered the previous one, so one is the rule; a proxy answering
// a response older than the kept ones is taken as answering the oldest.
const maxOutstanding = 4

// typeSync is the record of one type on one stream.
type typeSync struct {
	requested time.Time
	acked     *proxysync.Response
	nack      *proxysync.Nack
	nackDiff  *proxysync.Diff
	last      *proxysync.Response // the last response sent
	// outstanding are the responses sent and not answered, oldest first.
	outstanding []sentResponse
}

type sentResponse struct {
	resp proxysync.Response
	diff proxysync.Diff
}

// changed counts a change of the records.
func (c *callbacks) changed() {
	if c.rev != nil {
		c.rev.Add(1)
	}
}

func (c *callbacks) newStreamState() *streamState {
	c.changed()
	return &streamState{sent: map[string]sentState{}, opened: c.now(), sync: map[string]*typeSync{}}
}

// typeSync returns the record of typeURL on st, making it. The caller
// holds c.mu.
func (c *callbacks) typeSync(st *streamState, typeURL string) *typeSync {
	ts := st.sync[typeURL]
	if ts == nil {
		c.changed()
		ts = &typeSync{requested: c.now()}
		st.sync[typeURL] = ts
	}
	return ts
}

// recordRequest records what a request answers: the ACK or NACK of the
// response named by its nonce. The caller holds c.mu.
func (c *callbacks) recordRequest(st *streamState, req streamRequest) {
	typeURL := req.GetTypeUrl()
	if typeURL == "" {
		return
	}
	ts := c.typeSync(st, typeURL)
	nonce := req.GetResponseNonce()
	if nonce == "" {
		return
	}
	c.changed()
	i := slices.IndexFunc(ts.outstanding, func(s sentResponse) bool { return s.resp.Nonce == nonce })
	if i < 0 {
		// An answer to a response already answered (a SotW subscription
		// change repeats the last nonce), or older than the kept ones.
		return
	}
	answered := ts.outstanding[i]
	if e := req.GetErrorDetail(); e != nil {
		ts.nack = &proxysync.Nack{Version: answered.resp.Version, Nonce: nonce, Error: e.GetMessage(), Time: c.now()}
		d := mergeDiffs(ts.outstanding[:i+1])
		ts.nackDiff = &d
	} else {
		r := answered.resp
		ts.acked, ts.nack, ts.nackDiff = &r, nil, nil
	}
	ts.outstanding = slices.Delete(ts.outstanding, 0, i+1)
}

// recordSent records a response of typeURL on st. The caller holds c.mu.
func (c *callbacks) recordSent(st *streamState, typeURL string, r proxysync.Response, d proxysync.Diff) {
	c.changed()
	ts := c.typeSync(st, typeURL)
	r.Time = c.now()
	ts.last = &r
	if len(ts.outstanding) == maxOutstanding {
		ts.outstanding = slices.Delete(ts.outstanding, 0, 1)
	}
	ts.outstanding = append(ts.outstanding, sentResponse{resp: r, diff: d})
}

func (c *callbacks) recordSotwResponse(st *streamState, resp *discoveryv3.DiscoveryResponse) {
	var d proxysync.Diff
	for i, a := range resp.GetResources() {
		if i >= proxysync.MaxDiffNames { // counted, not decoded
			d.Omitted += len(resp.GetResources()) - i
			break
		}
		d.Add(proxysync.Resource{Name: anyName(a)})
	}
	c.recordSent(st, resp.GetTypeUrl(), proxysync.Response{
		Version: resp.GetVersionInfo(), Nonce: resp.GetNonce(), Resources: len(resp.GetResources()),
	}, d)
}

func (c *callbacks) recordDeltaResponse(st *streamState, resp *discoveryv3.DeltaDiscoveryResponse) {
	var d proxysync.Diff
	for _, r := range resp.GetResources() {
		d.Add(proxysync.Resource{Name: r.GetName(), Version: r.GetVersion()})
	}
	for _, name := range resp.GetRemovedResources() {
		d.AddRemoved(name)
	}
	c.recordSent(st, resp.GetTypeUrl(), proxysync.Response{
		Version: resp.GetSystemVersionInfo(), Nonce: resp.GetNonce(),
		Resources: len(resp.GetResources()), Removed: len(resp.GetRemovedResources()),
	}, d)
}

// anyName is the name of an encoded resource, "" when it cannot be
// decoded (the cache encoded it, so it can).
func anyName(a *anypb.Any) string {
	m, err := a.UnmarshalNew()
	if err != nil {
		return ""
	}
	return cachev3.GetResourceName(m)
}

// mergeDiffs joins the diffs of responses, oldest first: a later version
// of a name replaces an earlier one; the bound applies to the result.
func mergeDiffs(rs []sentResponse) proxysync.Diff {
	if len(rs) == 1 {
		return rs[0].diff
	}
	var out proxysync.Diff
	idx := map[string]int{}
	for _, r := range rs {
		out.Omitted += r.diff.Omitted
		for _, res := range r.diff.Resources {
			if i, ok := idx[res.Name]; ok {
				out.Resources[i] = res
				continue
			}
			idx[res.Name] = len(out.Resources)
			out.Resources = append(out.Resources, res)
		}
		out.Removed = append(out.Removed, r.diff.Removed...)
	}
	return out
}

// proxies appends the records of the open streams to out, with replica
// as their replica. The caller must not hold c.mu.
func (c *callbacks) proxies(replica string, out []proxysync.Proxy) []proxysync.Proxy {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, kind := range []struct {
		name    string
		streams map[int64]*streamState
	}{{metrics.KindSotW, c.sotw}, {metrics.KindDelta, c.delta}} {
		for id, st := range kind.streams {
			if st.gateway == "" {
				continue // no request yet
			}
			p := proxysync.Proxy{
				NodeID: st.nodeID, Gateway: st.gateway, Replica: replica,
				Stream: fmt.Sprintf("%s/%d", kind.name, id), Connected: st.opened,
			}
			for typeURL, ts := range st.sync {
				p.Types = append(p.Types, ts.report(typeURL))
			}
			slices.SortFunc(p.Types, func(a, b proxysync.Type) int { return strings.Compare(a.TypeURL, b.TypeURL) })
			out = append(out, p)
		}
	}
	return out
}

func (ts *typeSync) report(typeURL string) proxysync.Type {
	t := proxysync.Type{TypeURL: typeURL, Requested: ts.requested}
	if ts.last != nil {
		r := *ts.last
		t.Sent = &r
	}
	if ts.acked != nil {
		r := *ts.acked
		t.Acked = &r
	}
	if ts.nack != nil {
		n := *ts.nack
		t.Nack = &n
	}
	var d proxysync.Diff
	switch {
	case len(ts.outstanding) > 0:
		d = mergeDiffs(ts.outstanding)
	case ts.nackDiff != nil:
		d = *ts.nackDiff
	}
	if len(d.Resources)+len(d.Removed)+d.Omitted > 0 {
		d.Resources, d.Removed = slices.Clone(d.Resources), slices.Clone(d.Removed)
		t.Unacked = &d
	}
	return t
}
