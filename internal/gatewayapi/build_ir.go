package gatewayapi

import (
	"fmt"
	"sort"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
)

// buildIR builds the IR of every accepted Gateway, sorted by
// namespace/name.
func (t *translator) buildIR() []*ir.Gateway {
	var out []*ir.Gateway
	for _, g := range t.gwOrder {
		if g.accepted {
			out = append(out, t.gatewayIR(g))
		}
	}
	return out
}

// irBuilder collects the clusters and secrets one Gateway uses.
type irBuilder struct {
	t        *translator
	gw       *ir.Gateway
	clusters map[string]*ir.Cluster
	secrets  map[string]*ir.Secret
}

func (t *translator) gatewayIR(g *gatewayState) *ir.Gateway {
	b := &irBuilder{
		t:        t,
		gw:       &ir.Gateway{Namespace: g.obj.Namespace, Name: g.obj.Name},
		clusters: map[string]*ir.Cluster{},
		secrets:  map[string]*ir.Secret{},
	}
	byPort := map[int32][]*listener{}
	var ports []int32
	for _, l := range g.merged {
		if !l.programmed() {
			continue
		}
		if byPort[l.port] == nil {
			ports = append(ports, l.port)
		}
		byPort[l.port] = append(byPort[l.port], l)
	}
	sort.Slice(ports, func(i, j int) bool { return ports[i] < ports[j] })
	for _, port := range ports {
		ls := byPort[port]
		// Conflict detection leaves one protocol per port.
		if ls[0].protocol == gwv1.HTTPSProtocolType {
			b.gw.Listeners = append(b.gw.Listeners, b.httpsListener(port, ls))
		} else {
			b.gw.Listeners = append(b.gw.Listeners, b.httpListener(port, ls))
		}
	}
	for _, c := range b.clusters {
		b.gw.Clusters = append(b.gw.Clusters, c)
	}
	sort.Slice(b.gw.Clusters, func(i, j int) bool { return b.gw.Clusters[i].Name < b.gw.Clusters[j].Name })
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
	return &ir.Listener{
		Name: name, Port: uint32(port), Protocol: ir.ProtocolHTTP,
		FilterChains: []*ir.FilterChain{{
			Name:        name,
			RouteConfig: b.routeConfig(name, uint32(port), ls),
		}},
	}
}

// httpsListener makes a filter chain per listener (hostnames are distinct
// on a port), selected by SNI; the listener without hostname is the
// catch-all chain.
func (b *irBuilder) httpsListener(port int32, ls []*listener) *ir.Listener {
	name := fmt.Sprintf("https-%d", port)
	out := &ir.Listener{Name: name, Port: uint32(port), Protocol: ir.ProtocolHTTPS}
	for _, l := range ls {
		host := l.hostname
		fc := &ir.FilterChain{Name: name + "/" + vhostName(host)}
		if host != "" {
			fc.ServerNames = []string{host}
		}
		for _, c := range l.certs {
			fc.CertificateSecrets = append(fc.CertificateSecrets, c)
			if e := b.t.secrets[c]; e.secret != nil {
				b.secrets[c] = e.secret
			}
		}
		fc.RouteConfig = b.routeConfig(fc.Name, uint32(port), []*listener{l})
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

// useClusters registers the clusters of a placed route. A cluster is
// HTTP/2 when its appProtocol says so or a GRPCRoute of the Gateway uses it.
func (b *irBuilder) useClusters(cr *compiledRoute, grpc bool) {
	for _, def := range cr.clusters {
		c := b.clusters[def.name]
		if c == nil {
			c = &ir.Cluster{
				Name:             def.name,
				ServiceNamespace: def.svc.Namespace,
				ServiceName:      def.svc.Name,
				ServicePort:      def.port.Port,
				Protocol:         ir.UpstreamHTTP1,
				Endpoints:        b.t.endpointsOf(def),
			}
			b.clusters[def.name] = c
		}
		if def.h2 || grpc {
			c.Protocol = ir.UpstreamHTTP2
		}
	}
}
