package gatewayapi

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
)

// irBuilder assembles the IR of one Gateway: its listeners, the virtual
// hosts of their route configurations, and the clusters and secrets they
// use.
type irBuilder struct {
	t       *translator
	gw      *ir.Gateway
	secrets map[string]*ir.Secret
	// clientCert names the Secret of the Gateway's client certificate
	// for TLS backends; empty for none.
	clientCert string
	// oldVhosts are the virtual hosts of the Gateway's previous assembly
	// (none without one), newVhosts those of this one.
	oldVhosts, newVhosts map[vhostKey]*vhostMemo
}

// Assembly is what the IR of a Gateway was assembled from: its virtual
// hosts, and the clusters they use, counted. The IR's cluster list is
// derived from the counts; an assembly given back to the next translation
// (Cache.Assembly) lets it reuse the virtual hosts whose routes did not
// change and update the counts by what changed only.
type Assembly struct {
	vhosts map[vhostKey]*vhostMemo
	// uses counts the uses of each cluster by the virtual hosts; clusters
	// is the IR's list of them.
	uses     map[string]clusterCount
	clusters []*ir.Cluster
	// clientCert is the Gateway's client certificate its TLS clusters
	// name.
	clientCert string
}

// clusterCount counts the virtual hosts (and L4 chains) using a cluster,
// those of them routing HTTP, and those asking for HTTP/2.
type clusterCount struct {
	def         *clusterDef
	n, http, h2 int
}

func (t *translator) gatewayIR(g *gatewayState) *ir.Gateway {
	b := &irBuilder{
		t:          t,
		clientCert: g.clientCert,
		gw:         &ir.Gateway{Namespace: g.obj.Namespace, Name: g.obj.Name, Proxy: g.settings, Addresses: t.bindAddresses(g)},
		secrets:    map[string]*ir.Secret{},
		newVhosts:  map[vhostKey]*vhostMemo{},
	}
	prev := t.cache.Assembly(g.key())
	if prev != nil {
		b.oldVhosts = prev.vhosts
	}
	// By port, UDP ports after the TCP ones of the same number (portKey).
	byPort := map[int32][]*listener{}
	var ports []int32
	for _, l := range g.merged {
		if !l.programmed() {
			continue
		}
		k := l.portKey()
		if byPort[k] == nil {
			ports = append(ports, k)
		}
		byPort[k] = append(byPort[k], l)
	}
	sort.Slice(ports, func(i, j int) bool {
		pi, pj := byPort[ports[i]][0].port, byPort[ports[j]][0].port
		return pi < pj || (pi == pj && ports[i] < ports[j])
	})
	for _, k := range ports {
		ls := byPort[k]
		port := ls[0].port
		// Conflict detection leaves one class of protocols per port.
		switch portClass(ls[0].protocol) {
		case gwv1.HTTPSProtocolType:
			b.gw.Listeners = append(b.gw.Listeners, b.httpsListener(port, ls))
		case gwv1.TCPProtocolType:
			b.gw.Listeners = append(b.gw.Listeners, b.tcpListener(port, ls[0]))
		case gwv1.UDPProtocolType:
			b.gw.Listeners = append(b.gw.Listeners, b.udpListener(port, ls[0]))
		default:
			b.gw.Listeners = append(b.gw.Listeners, b.httpListener(port, ls))
		}
	}
	m := b.memoClusters(prev)
	t.cache.KeepAssembly(g.key(), m)
	b.gw.Clusters = m.clusters
	if b.clientCert != "" && slices.ContainsFunc(m.clusters, func(c *ir.Cluster) bool { return c.TLS != nil && c.TLS.ClientCertificate != "" }) {
		b.secrets[b.clientCert] = t.secrets[b.clientCert].secret
	}
	for _, s := range b.secrets {
		b.gw.Secrets = append(b.gw.Secrets, s)
	}
	sort.Slice(b.gw.Secrets, func(i, j int) bool { return b.gw.Secrets[i].Name < b.gw.Secrets[j].Name })
	return b.gw
}

// httpListener merges the HTTP listeners of one port into one filter chain
// with a virtual host per hostname.
func (b *irBuilder) httpListener(port int32, ls []*listener) *ir.Listener {
	name := fmt.Sprintf("http-%d", port)
	fc := &ir.FilterChain{Name: name, RouteConfig: b.routeConfig(name, uint32(port), ls, false)}
	b.chainAuth(fc, uint32(port), ls)
	return &ir.Listener{Name: name, Port: uint32(port), Protocol: ir.ProtocolHTTP, FilterChains: []*ir.FilterChain{fc}}
}

// httpsListener makes a filter chain per HTTPS listener (hostnames are
// distinct on a port), selected by SNI, and the chains of the TLS
// listeners' routes (tlsChains); the listener without hostname is the
// catch-all chain.
func (b *irBuilder) httpsListener(port int32, ls []*listener) *ir.Listener {
	name := fmt.Sprintf("https-%d", port)
	out := &ir.Listener{Name: name, Port: uint32(port), Protocol: ir.ProtocolHTTPS}
	var https []*listener
	for _, l := range ls {
		if l.protocol == gwv1.HTTPSProtocolType {
			https = append(https, l)
		}
	}
	// Several HTTPS listeners share one guarded table (misdirected.go).
	var shared *ir.RouteConfig
	if len(https) > 1 {
		shared = b.routeConfig(name, uint32(port), https, true)
	}
	for _, l := range ls {
		if l.protocol == gwv1.TLSProtocolType {
			out.FilterChains = append(out.FilterChains, b.tlsChains(name, l)...)
			continue
		}
		host := l.hostname
		fc := &ir.FilterChain{Name: name + "/" + vhostName(host)}
		if host != "" {
			fc.ServerNames = []string{host}
		}
		for i, c := range l.certs {
			fc.CertificateSecrets = append(fc.CertificateSecrets, c)
			if sec := l.secrets[i]; sec != nil {
				b.secrets[c] = sec
			}
		}
		fc.ClientValidation = l.clientValidation
		if shared != nil {
			fc.RouteConfig, fc.ListenerTag = shared, listenerTag(l)
		} else {
			fc.RouteConfig = b.routeConfig(fc.Name, uint32(port), []*listener{l}, false)
		}
		b.chainAuth(fc, uint32(port), []*listener{l})
		out.FilterChains = append(out.FilterChains, fc)
	}
	sort.Slice(out.FilterChains, func(i, j int) bool { return out.FilterChains[i].Name < out.FilterChains[j].Name })
	return out
}

func vhostName(host string) string {
	if host == "" {
		return "*"
	}
	return host
}

// memoClusters computes the clusters of the IR from the uses of its
// virtual hosts, updating the counts of the previous IR for the virtual
// hosts that changed, and reusing its cluster list when no cluster
// appeared, disappeared or changed.
func (b *irBuilder) memoClusters(prev *Assembly) *Assembly {
	m := &Assembly{vhosts: b.newVhosts, clientCert: b.clientCert}
	// before holds, for the clusters whose counts change, whether they
	// were used, and used by HTTP/2, before.
	type state struct{ used, http, h2 bool }
	var before map[string]state // nil without prev: every cluster is new
	// tlsChanged are the clusters whose definition's TLS changed.
	tlsChanged := map[string]bool{}
	add := func(v *vhostMemo, d int) {
		for _, u := range v.uses {
			c, ok := m.uses[u.def.name]
			if !ok {
				c = clusterCount{def: u.def}
			}
			if d > 0 {
				// The latest definition: an older one may predate a
				// change of the Service (whose users were all rebuilt).
				if ok && before != nil && !sameDefTLS(c.def, u.def) {
					tlsChanged[u.def.name] = true // its BackendTLSPolicy changed
				}
				c.def = u.def
			}
			if before != nil {
				if _, ok := before[u.def.name]; !ok {
					before[u.def.name] = state{c.n > 0, c.http > 0, c.h2 > 0}
				}
			}
			c.n += d
			if !u.l4 {
				c.http += d
				if u.grpc || u.def.h2 {
					c.h2 += d
				}
			}
			m.uses[u.def.name] = c
		}
	}
	var dirty map[string]bool
	if prev == nil {
		n := 0 // an upper bound of the clusters: the map grows once
		for _, v := range b.newVhosts {
			n += len(v.uses)
		}
		m.uses = make(map[string]clusterCount, n)
		for _, v := range b.newVhosts {
			add(v, 1)
		}
	} else {
		before, dirty = map[string]state{}, map[string]bool{}
		// The previous counts are taken over: prev is not used again.
		m.uses = prev.uses
		for k, v := range prev.vhosts {
			if b.newVhosts[k] != v {
				add(v, -1)
			}
		}
		for k, v := range b.newVhosts {
			if prev.vhosts[k] != v {
				add(v, 1)
			}
		}
		for name, st := range before {
			c := m.uses[name]
			if st != (state{c.n > 0, c.http > 0, c.h2 > 0}) || tlsChanged[name] {
				dirty[name] = true
			}
		}
		if prev.clientCert != b.clientCert {
			for name, c := range m.uses {
				if c.def.tls != nil {
					dirty[name] = true
				}
			}
		}
		// Clusters of Services whose endpoints may have changed.
		if changed := b.t.cache.EndpointsChanged(); changed != nil {
			for name, c := range m.uses {
				if c.n > 0 && changed(c.def.svc) {
					dirty[name] = true
				}
			}
		}
		// Only the clusters whose counts changed can have fallen to zero.
		for name := range before {
			if m.uses[name].n <= 0 {
				delete(m.uses, name)
			}
		}
		if len(dirty) == 0 {
			m.clusters = prev.clusters
			return m
		}
		m.clusters = b.mergeClusters(m.uses, prev.clusters, dirty)
		return m
	}
	var old map[string]*ir.Cluster
	if prev != nil {
		old = make(map[string]*ir.Cluster, len(prev.clusters))
		for _, c := range prev.clusters {
			old[c.Name] = c
		}
	}
	for name, c := range m.uses {
		if c.n <= 0 {
			delete(m.uses, name)
			continue
		}
		if oc := old[name]; oc != nil && !dirty[name] {
			m.clusters = append(m.clusters, oc)
			continue
		}
		m.clusters = append(m.clusters, b.clusterOf(name, c))
	}
	slices.SortFunc(m.clusters, func(a, b *ir.Cluster) int { return strings.Compare(a.Name, b.Name) })
	return m
}

// mergeClusters returns prev (sorted by name, as memoClusters makes it)
// with the dirty clusters made again from their counts, or left out when
// no longer used: the cost is that of the change, not of a new list built
// through a map of every cluster.
func (b *irBuilder) mergeClusters(uses map[string]clusterCount, prev []*ir.Cluster, dirty map[string]bool) []*ir.Cluster {
	names := make([]string, 0, len(dirty))
	for n := range dirty {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]*ir.Cluster, 0, len(prev)+len(names))
	emit := func(name string) {
		if c, ok := uses[name]; ok && c.n > 0 {
			out = append(out, b.clusterOf(name, c))
		}
	}
	i := 0
	for _, c := range prev {
		for ; i < len(names) && names[i] < c.Name; i++ {
			emit(names[i])
		}
		if i < len(names) && names[i] == c.Name {
			emit(names[i])
			i++
			continue
		}
		out = append(out, c)
	}
	for ; i < len(names); i++ {
		emit(names[i])
	}
	if len(out) == 0 {
		return nil // as the full path leaves it
	}
	return out
}

// clusterOf is the IR cluster of name, used as c counts.
func (b *irBuilder) clusterOf(name string, c clusterCount) *ir.Cluster {
	var proto ir.UpstreamProtocol
	switch {
	case c.h2 > 0:
		proto = ir.UpstreamHTTP2
	case c.http > 0:
		proto = ir.UpstreamHTTP1
	case c.def.udp:
		proto = ir.UpstreamUDP
	default:
		proto = ir.UpstreamTCP
	}
	out := &ir.Cluster{
		Name:             name,
		ServiceNamespace: c.def.svc.Namespace,
		ServiceName:      c.def.svc.Name,
		ServicePort:      c.def.port.Port,
		Protocol:         proto,
	}
	if e := c.def.tls; e != nil {
		tls := *e.tls
		if tls.Blocked == "" {
			tls.ClientCertificate = b.clientCert
		}
		out.TLS = &tls
	}
	if out.TLS == nil || out.TLS.Blocked == "" {
		out.Endpoints = b.t.endpointsOf(c.def)
	}
	return out
}

// sameDefTLS reports whether two definitions of a cluster configure the
// same TLS.
func sameDefTLS(a, b *clusterDef) bool {
	if a.tls == nil || b.tls == nil {
		return a.tls == b.tls
	}
	x, y := a.tls.tls, b.tls.tls
	return x.Blocked == y.Blocked && x.SNI == y.SNI && string(x.CACertificates) == string(y.CACertificates) &&
		x.SystemCAFile == y.SystemCAFile && slices.Equal(x.SubjectAltNames, y.SubjectAltNames)
}
