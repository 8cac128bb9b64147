// Package proxysync is what Portico knows of what its proxies run: each
// replica's report of the xDS streams connected to it (Report, served on
// its debug server as /debug/proxies), the state of each proxy and
// resource type derived from it (Evaluate), and the aggregation of every
// replica's reports into one condition per Gateway (aggregate.go), which
// the leader writes as portico.dev/ProxiesInSync.
//
// # What a replica records
//
// For every stream and every resource type the proxy asked for, the xDS
// server records the responses it sent (version, nonce, time, and the
// resources each carried, up to MaxDiffNames names), and what the proxy
// answered: an ACK (a request naming the response's nonce without an
// error) or a NACK (with error_detail). A type is
//
//   - SYNCED when the last response sent was ACKed: the proxy runs what
//     the replica serves (the server answers a proxy's next watch at once
//     when anything changed, so "last response ACKed" and "nothing left to
//     send" coincide but for the microseconds between the two);
//   - NACK when the proxy rejected a response and has ACKed none since:
//     it keeps running its previous configuration of that type;
//   - PENDING while a response waits for its answer (or the proxy waits for
//     a first response), and STALE once it has waited longer than the
//     stale threshold (DefaultStaleAfter).
//
// Versions are content hashes (translate's TypeVersion for delta streams,
// the Gateway's version for the whole), equal on every replica for equal
// configuration, so the leader can tell a proxy connected to a follower
// that serves another version of its Gateway than the leader's.
package proxysync

import (
	"strings"
	"time"
)

// MaxDiffNames bounds the resource names a replica keeps of one un-ACKed
// response (the rest are counted): the diff of a proxy that is sent
// 10,000 clusters at once does not cost 10,000 names per stream.
const MaxDiffNames = 100

// DefaultStaleAfter is how long a response may wait for its ACK before its
// type counts as STALE.
const DefaultStaleAfter = 10 * time.Second

// States of a resource type of a proxy.
const (
	StateSynced  = "SYNCED"
	StatePending = "PENDING"
	StateStale   = "STALE"
	StateNack    = "NACK"
)

// Report is one replica's view of the proxies connected to it.
type Report struct {
	// Replica is the replica's identity (its leader-election identity, or
	// "standalone").
	Replica string `json:"replica"`
	// Time is when the replica made the report, on its clock.
	Time time.Time `json:"time"`
	// Received is when the aggregator received it, on the aggregator's
	// clock: the records' ages are measured on the replica's clock, from
	// Time plus what elapsed since Received, so clock skew between
	// replicas does not matter.
	Received time.Time `json:"-"`
	// Gateways are the Gateways the replica serves, by name.
	Gateways []GatewayVersion `json:"gateways"`
	// Proxies are the open xDS streams, by gateway, node id and stream.
	Proxies []Proxy `json:"proxies"`
}

// GatewayVersion is the configuration a replica serves a Gateway.
type GatewayVersion struct {
	Gateway string `json:"gateway"`
	// Version is the content hash of the Gateway's resources.
	Version string `json:"version"`
	// Since is when the replica started serving Version.
	Since time.Time `json:"since"`
}

// Proxy is one xDS stream of a proxy.
type Proxy struct {
	// NodeID is the proxy's node.id: its Pod's name for the proxies
	// Portico provisions.
	NodeID  string `json:"nodeID"`
	Gateway string `json:"gateway"`
	// Replica is the replica the stream is connected to.
	Replica string `json:"replica"`
	// Stream is the server's name of the stream ("delta/3", "sotw/7").
	Stream    string    `json:"stream"`
	Connected time.Time `json:"connected"`
	// Types are the resource types the proxy asked for, by type URL.
	Types []Type `json:"types"`
}

// Type is the state of one resource type on one stream.
type Type struct {
	TypeURL string `json:"typeURL"`
	// Requested is when the proxy first asked for the type.
	Requested time.Time `json:"requested"`
	// Sent is the last response sent; nil before the first.
	Sent *Response `json:"sent,omitempty"`
	// Acked is the last response the proxy ACKed; nil before the first.
	Acked *Response `json:"acked,omitempty"`
	// Nack is the proxy's rejection of a response, when it has ACKed none
	// since.
	Nack *Nack `json:"nack,omitempty"`
	// Unacked are the resources of the responses sent and not ACKed
	// (waiting, or rejected): what the proxy was sent and does not run.
	Unacked *Diff `json:"unacked,omitempty"`
}

// Response is a response sent on a stream.
type Response struct {
	Version string    `json:"version"`
	Nonce   string    `json:"nonce"`
	Time    time.Time `json:"time"`
	// Resources and Removed count the resources the response carried and
	// the names it removed.
	Resources int `json:"resources"`
	Removed   int `json:"removed,omitempty"`
}

// Nack is a proxy's rejection of a response.
type Nack struct {
	Version string    `json:"version"`
	Nonce   string    `json:"nonce"`
	Error   string    `json:"error"`
	Time    time.Time `json:"time"`
}

// Diff lists resources sent and not ACKed: their names (with versions,
// where the protocol carries them), the names removed, and how many of
// either were left out beyond MaxDiffNames.
type Diff struct {
	Resources []Resource `json:"resources,omitempty"`
	Removed   []string   `json:"removed,omitempty"`
	Omitted   int        `json:"omitted,omitempty"`
}

// Add adds a resource sent, or counts it in Omitted beyond MaxDiffNames.
func (d *Diff) Add(r Resource) {
	if len(d.Resources)+len(d.Removed) >= MaxDiffNames {
		d.Omitted++
		return
	}
	d.Resources = append(d.Resources, r)
}

// AddRemoved adds a name removed, or counts it in Omitted beyond
// MaxDiffNames.
func (d *Diff) AddRemoved(name string) {
	if len(d.Resources)+len(d.Removed) >= MaxDiffNames {
		d.Omitted++
		return
	}
	d.Removed = append(d.Removed, name)
}

// Resource is a resource name and its version ("" in state-of-the-world
// responses, which carry no per-resource version).
type Resource struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// State is the state of t at now with staleAfter as the stale threshold,
// and how long it has been waiting (PENDING, STALE) or since the NACK.
func (t *Type) State(now time.Time, staleAfter time.Duration) (string, time.Duration) {
	switch {
	case t.Nack != nil:
		return StateNack, now.Sub(t.Nack.Time)
	case t.Sent == nil:
		return waiting(now.Sub(t.Requested), staleAfter)
	case t.Acked == nil || t.Acked.Nonce != t.Sent.Nonce:
		return waiting(now.Sub(t.Sent.Time), staleAfter)
	}
	return StateSynced, 0
}

func waiting(age, staleAfter time.Duration) (string, time.Duration) {
	if age > staleAfter {
		return StateStale, age
	}
	return StatePending, age
}

// ShortType is the xDS service name of a type URL (LDS, RDS, CDS, EDS,
// SDS, VHDS), or the last part of the URL for others.
func ShortType(typeURL string) string {
	name := typeURL
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	switch name {
	case "Listener":
		return "LDS"
	case "RouteConfiguration":
		return "RDS"
	case "ScopedRouteConfiguration":
		return "SRDS"
	case "VirtualHost":
		return "VHDS"
	case "Cluster":
		return "CDS"
	case "ClusterLoadAssignment":
		return "EDS"
	case "Secret":
		return "SDS"
	}
	return name
}
