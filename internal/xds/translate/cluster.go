package translate

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"unicode/utf8"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/ir"
)

// Parts shared by every cluster. Messages are never modified once built,
// and encoding is safe for concurrent use, so clusters may share them.
var (
	edsClusterType = &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS}
	sharedADS      = adsConfigSource()
)

const (
	// httpProtocolOptionsKey is the typed_extension_protocol_options key of
	// upstream HTTP options.
	httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
)

// clustersAndEndpoints gives one EDS cluster and one ClusterLoadAssignment
// per ir.Cluster. An assignment exists even with no endpoints, so the
// snapshot stays consistent and Envoy does not wait for it.
func (t *translator) clustersAndEndpoints() (clusters, endpoints []*entry, err error) {
	if prev := t.memo; prev.src != nil && prev.clusterNames != nil {
		if sameSlice(prev.src.Clusters, t.gw.Clusters) {
			// The same clusters as last time: their translations as a whole.
			t.clusters = prev.clusterNames
			t.next.clusterNames, t.next.clusters = prev.clusterNames, prev.clusters
			t.next.irClusters, t.next.irEndpoints = prev.irClusters, prev.irEndpoints
			return prev.ents[clusterIdx], prev.ents[endpointIdx], nil
		}
		if cl, ep, ok, err := t.clustersInPlace(prev); ok || err != nil {
			return cl, ep, err
		}
		if cl, ep, ok, err := t.clustersMerged(prev); ok || err != nil {
			return cl, ep, err
		}
	}
	defer func() {
		if err == nil {
			// In IR order, for clustersInPlace; the results are sorted.
			t.next.irClusters, t.next.irEndpoints = slices.Clone(clusters), slices.Clone(endpoints)
		}
	}()
	t.clusters = make(map[string]bool, len(t.gw.Clusters))
	t.next.clusterNames = t.clusters
	for _, c := range t.gw.Clusters {
		if c == nil {
			return nil, nil, fmt.Errorf("nil cluster")
		}
		if c.Name == "" || c.Name == InvalidBackendCluster {
			return nil, nil, fmt.Errorf("cluster of service %s/%s: invalid name %q", c.ServiceNamespace, c.ServiceName, c.Name)
		}
		if t.clusters[c.Name] {
			return nil, nil, fmt.Errorf("cluster %q is listed twice", c.Name)
		}
		t.clusters[c.Name] = true

		old := t.memo.clusters.get(c.Name)
		if old != nil && old.sameCluster(c) && slices.Equal(old.endpoints, endpointsOf(c)) {
			// Unchanged: its translation as it is (entries are immutable).
			t.next.clusters.base[c.Name] = old
			clusters = append(clusters, old.cluster)
			endpoints = append(endpoints, old.cla)
			continue
		}
		ce := &clusterEntry{protocol: c.Protocol, tls: c.TLS, endpoints: endpointsOf(c)}
		if old != nil && old.sameCluster(c) {
			ce.cluster = old.cluster
		} else if ce.cluster, err = t.clusterEntry(c); err != nil {
			return nil, nil, err
		}
		if old != nil && old.sameEndpoints(c.Protocol, endpointsOf(c)) {
			ce.cla = old.cla
		} else if ce.cla, err = t.claEntry(c); err != nil {
			return nil, nil, err
		}
		t.next.clusters.base[c.Name] = ce
		clusters = append(clusters, ce.cluster)
		endpoints = append(endpoints, ce.cla)
	}
	return clusters, endpoints, nil
}

// clustersInPlace translates the clusters when they are those of the
// previous translation, by name and position, some of them changed (new
// endpoints, typically): only those are translated again. ok is false
// when the clusters are not the same.
func (t *translator) clustersInPlace(prev *gatewayMemo) (clusters, endpoints []*entry, ok bool, err error) {
	old, cur := prev.src.Clusters, t.gw.Clusters
	if len(old) != len(cur) {
		return nil, nil, false, nil
	}
	for i, c := range cur {
		if c == nil || (c != old[i] && c.Name != old[i].Name) {
			return nil, nil, false, nil
		}
	}
	cl, ep := prev.irClusters, prev.irEndpoints
	changed := map[string]*clusterEntry{}
	for i, c := range cur {
		if c == old[i] {
			continue
		}
		ce := *prev.clusters.get(c.Name)
		sameEndpoints := ce.sameEndpoints(c.Protocol, endpointsOf(c))
		if !ce.sameCluster(c) {
			e, err := t.clusterEntry(c)
			if err != nil {
				return nil, nil, false, err
			}
			if sameSlice(cl, prev.irClusters) {
				cl = slices.Clone(cl)
			}
			cl[i], ce.cluster, ce.protocol, ce.tls = e, e, c.Protocol, c.TLS
		}
		if !sameEndpoints {
			e, err := t.claEntry(c)
			if err != nil {
				return nil, nil, false, err
			}
			if sameSlice(ep, prev.irEndpoints) {
				ep = slices.Clone(ep)
			}
			ep[i], ce.cla = e, e
		}
		ce.endpoints = endpointsOf(c)
		changed[c.Name] = &ce
	}
	t.clusters = prev.clusterNames
	t.next.clusterNames, t.next.clusters = prev.clusterNames, prev.clusters.with(changed)
	t.next.irClusters, t.next.irEndpoints = cl, ep
	sorted := func(ir, same, sortedPrev []*entry) []*entry {
		if sameSlice(ir, same) {
			return sortedPrev
		}
		return slices.Clone(ir) // sorted by translate
	}
	return sorted(cl, prev.irClusters, prev.ents[clusterIdx]), sorted(ep, prev.irEndpoints, prev.ents[endpointIdx]), true, nil
}

// clustersMerged translates the clusters when both lists, the previous
// one and gw.Clusters, are sorted by name (as gatewayapi makes them) and
// differ by some clusters added or removed (a route to a new Service,
// typically): only the added and changed clusters are translated, the
// memo takes the changes as an overlay, and the names added or removed are
// known without comparing the two sets. ok is false when a list is not
// sorted or a cluster is invalid: the full path handles (or reports) it.
func (t *translator) clustersMerged(prev *gatewayMemo) (clusters, endpoints []*entry, ok bool, err error) {
	old, cur := prev.src.Clusters, t.gw.Clusters
	oldCl, oldEp := prev.irClusters, prev.irEndpoints
	if len(oldCl) != len(old) || len(oldEp) != len(old) {
		return nil, nil, false, nil
	}
	clusters, endpoints = make([]*entry, 0, len(cur)), make([]*entry, 0, len(cur))
	changed := map[string]*clusterEntry{}
	diff := map[string]bool{} // names added or removed
	i := 0
	// drop skips the previous clusters before name, which were removed.
	drop := func(name string, last bool) bool {
		// The previous clusters passed these checks but for the order.
		for ; i < len(old) && (last || old[i].Name < name); i++ {
			if i > 0 && old[i].Name <= old[i-1].Name {
				return false
			}
			changed[old[i].Name], diff[old[i].Name] = nil, true
		}
		return true
	}
	for j, c := range cur {
		if c == nil || c.Name == "" || c.Name == InvalidBackendCluster || (j > 0 && c.Name <= cur[j-1].Name) {
			return nil, nil, false, nil
		}
		if !drop(c.Name, false) {
			return nil, nil, false, nil
		}
		if i < len(old) && old[i].Name == c.Name {
			if i > 0 && old[i].Name <= old[i-1].Name {
				return nil, nil, false, nil
			}
			if c == old[i] {
				clusters, endpoints = append(clusters, oldCl[i]), append(endpoints, oldEp[i])
				i++
				continue
			}
			ce := *prev.clusters.get(c.Name)
			sameEndpoints := ce.sameEndpoints(c.Protocol, endpointsOf(c))
			i++
			if !ce.sameCluster(c) {
				if ce.cluster, err = t.clusterEntry(c); err != nil {
					return nil, nil, false, err
				}
				ce.protocol, ce.tls = c.Protocol, c.TLS
			}
			if !sameEndpoints {
				if ce.cla, err = t.claEntry(c); err != nil {
					return nil, nil, false, err
				}
				ce.endpoints = endpointsOf(c)
			}
			changed[c.Name] = &ce
			clusters, endpoints = append(clusters, ce.cluster), append(endpoints, ce.cla)
			continue
		}
		ce := &clusterEntry{protocol: c.Protocol, tls: c.TLS, endpoints: endpointsOf(c)}
		if ce.cluster, err = t.clusterEntry(c); err != nil {
			return nil, nil, false, err
		}
		if ce.cla, err = t.claEntry(c); err != nil {
			return nil, nil, false, err
		}
		changed[c.Name], diff[c.Name] = ce, true
		clusters, endpoints = append(clusters, ce.cluster), append(endpoints, ce.cla)
	}
	if !drop("", true) {
		return nil, nil, false, nil
	}
	names := maps.Clone(prev.clusterNames)
	for n := range diff {
		if changed[n] == nil {
			delete(names, n)
		} else {
			names[n] = true
		}
	}
	t.clusters, t.clustersChanged, t.clustersDiffed = names, diff, true
	t.next.clusterNames, t.next.clusters = names, prev.clusters.with(changed)
	// Sorted by name, like the IR: translate keeps them as they are.
	t.next.irClusters, t.next.irEndpoints = clusters, endpoints
	return clusters, endpoints, true, nil
}

func sameMap[K comparable, V any](a, b map[K]V) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// clusterEntry translates the EDS cluster of c.
func (t *translator) clusterEntry(c *ir.Cluster) (*entry, error) {
	// The cluster is kept: its two messages are allocated together.
	parts := &struct {
		cl  clusterv3.Cluster
		eds clusterv3.Cluster_EdsClusterConfig
	}{}
	parts.eds.EdsConfig, parts.eds.ServiceName = sharedADS, c.Name
	cl := &parts.cl
	cl.Name = c.Name
	cl.ClusterDiscoveryType = edsClusterType
	cl.EdsClusterConfig = &parts.eds
	cl.ConnectTimeout = t.settings.connectTimeout
	cl.LbPolicy = clusterv3.Cluster_ROUND_ROBIN
	cl.CircuitBreakers = t.settings.circuitBreakers
	switch c.Protocol {
	case ir.UpstreamHTTP2:
		if t.http2 == nil {
			var err error
			if t.http2, err = http2ProtocolOptions(); err != nil {
				return nil, err
			}
		}
		cl.TypedExtensionProtocolOptions = map[string]*anypb.Any{httpProtocolOptionsKey: proto.CloneOf(t.http2)}
	case ir.UpstreamHTTP1, "":
		// HTTP/1.1 is Envoy's default upstream protocol.
	case ir.UpstreamTCP, ir.UpstreamUDP:
		// Connections (tcp_proxy) and datagrams (udp_proxy) are forwarded
		// as they are: no HTTP protocol options.
	default:
		return nil, fmt.Errorf("cluster %q: unknown protocol %q", c.Name, c.Protocol)
	}
	if c.TLS == nil || c.TLS.Blocked != "" {
		return t.templateEntry(c.Name, cl, c.Protocol == ir.UpstreamHTTP2) // clusterenc.go
	}
	ts, err := t.upstreamTLS(c)
	if err != nil {
		return nil, err
	}
	cl.TransportSocket = ts
	return t.resourceEntry(c.Name, cl)
}

// http2ProtocolOptions makes Envoy speak HTTP/2 (h2c, or h2 over TLS) to the
// endpoints, as gRPC route backends and appProtocol h2c/grpc require.
func http2ProtocolOptions() (*anypb.Any, error) {
	return toAny("upstream HTTP/2 options", &httpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &httpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
					Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
				},
			},
		},
	})
}

// claEntry is the load assignment of c, kept in wire form (wire.go),
// encoded by appendLoadAssignment (claenc.go).
func (t *translator) claEntry(c *ir.Cluster) (*entry, error) {
	if c.Name == "" {
		return nil, fmt.Errorf("load assignment without a cluster name")
	}
	if !utf8.ValidString(c.Name) {
		return nil, fmt.Errorf("load assignment %q: the name is not valid UTF-8", c.Name)
	}
	t.hs.buf, t.addrs = appendLoadAssignment(t.hs.buf[:0], t.addrs, c.Name, endpointProtocol(c.Protocol), endpointsOf(c))
	h := sha256.Sum256(t.hs.buf)
	w, err := claWire(c.Name, t.hs.buf)
	if err != nil {
		return nil, err
	}
	return newEntry(c.Name, w, h), nil
}

func endpointProtocol(p ir.UpstreamProtocol) corev3.SocketAddress_Protocol {
	if p == ir.UpstreamUDP {
		return corev3.SocketAddress_UDP
	}
	return corev3.SocketAddress_TCP
}

func socketAddress(addr string, port uint32) *corev3.Address {
	return &corev3.Address{
		Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{
				Protocol:      corev3.SocketAddress_TCP,
				Address:       addr,
				PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
			},
		},
	}
}

// secretResources gives one SDS secret per ir.Secret, with the certificate
// chain and key inline. Listeners only refer to them by name.
func (t *translator) secretResources() ([]*entry, error) {
	t.secrets = make(map[string]bool, len(t.gw.Secrets))
	var out []*entry
	for _, s := range t.gw.Secrets {
		if s == nil {
			return nil, fmt.Errorf("nil secret")
		}
		if s.Name == "" {
			return nil, fmt.Errorf("secret without a name")
		}
		if t.secrets[s.Name] {
			return nil, fmt.Errorf("secret %q is listed twice", s.Name)
		}
		t.secrets[s.Name] = true
		if len(s.Cert) == 0 || len(s.Key) == 0 {
			return nil, fmt.Errorf("secret %q has an empty certificate or key", s.Name)
		}
		se := &secretEntry{cert: s.Cert, key: s.Key}
		if old := t.memo.secrets[s.Name]; old != nil && bytes.Equal(old.cert, s.Cert) && bytes.Equal(old.key, s.Key) {
			se.entry = old.entry
		} else {
			e, err := t.resourceEntry(s.Name, &tlsv3.Secret{
				Name: s.Name,
				Type: &tlsv3.Secret_TlsCertificate{
					TlsCertificate: &tlsv3.TlsCertificate{
						CertificateChain: inlineBytes(s.Cert),
						PrivateKey:       inlineBytes(s.Key),
					},
				},
			})
			if err != nil {
				return nil, err
			}
			se.entry = e
		}
		t.next.secrets[s.Name] = se
		out = append(out, se.entry)
	}
	return out, nil
}

func inlineBytes(b []byte) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
}
