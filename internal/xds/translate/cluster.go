package translate

import (
	"fmt"
	"net/netip"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/portico-dev/portico/internal/ir"
)

const (
	// connectTimeout bounds the TCP (and TLS) connect to an endpoint.
	connectTimeout = 10 * time.Second
	// httpProtocolOptionsKey is the typed_extension_protocol_options key of
	// upstream HTTP options.
	httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
)

// clustersAndEndpoints gives one EDS cluster and one ClusterLoadAssignment
// per ir.Cluster. An assignment exists even with no endpoints, so the
// snapshot stays consistent and Envoy does not wait for it.
func (t *translator) clustersAndEndpoints() (clusters, endpoints []types.Resource, err error) {
	t.clusters = make(map[string]bool, len(t.gw.Clusters))
	var http2 *anypb.Any
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

		cl := &clusterv3.Cluster{
			Name:                 c.Name,
			ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
			EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{
				EdsConfig:   adsConfigSource(),
				ServiceName: c.Name,
			},
			ConnectTimeout: durationpb.New(connectTimeout),
			LbPolicy:       clusterv3.Cluster_ROUND_ROBIN,
		}
		switch c.Protocol {
		case ir.UpstreamHTTP2:
			if http2 == nil {
				if http2, err = http2ProtocolOptions(); err != nil {
					return nil, nil, err
				}
			}
			cl.TypedExtensionProtocolOptions = map[string]*anypb.Any{httpProtocolOptionsKey: proto.CloneOf(http2)}
		case ir.UpstreamHTTP1, "":
			// HTTP/1.1 is Envoy's default upstream protocol.
		default:
			return nil, nil, fmt.Errorf("cluster %q: unknown protocol %q", c.Name, c.Protocol)
		}
		clusters = append(clusters, cl)
		endpoints = append(endpoints, loadAssignment(c))
	}
	return clusters, endpoints, nil
}

// http2ProtocolOptions makes Envoy speak HTTP/2 (h2c, or h2 over TLS) to the
// endpoints, as GRPCRoute backends and appProtocol h2c/grpc require.
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

// loadAssignment lists the endpoints of c in one locality. Endpoints whose
// address is not an IP (e.g. from an FQDN EndpointSlice) or whose port is
// out of range cannot be used by an EDS cluster and are left out.
func loadAssignment(c *ir.Cluster) *endpointv3.ClusterLoadAssignment {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: c.Name}
	var lbs []*endpointv3.LbEndpoint
	for _, e := range c.Endpoints {
		addr, err := netip.ParseAddr(e.Address)
		if err != nil || addr.Zone() != "" || e.Port == 0 || e.Port > 65535 {
			continue
		}
		lbs = append(lbs, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{
				Endpoint: &endpointv3.Endpoint{Address: socketAddress(addr.Unmap().String(), e.Port)},
			},
		})
	}
	if len(lbs) > 0 {
		cla.Endpoints = []*endpointv3.LocalityLbEndpoints{{LbEndpoints: lbs}}
	}
	return cla
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
func (t *translator) secretResources() ([]types.Resource, error) {
	t.secrets = make(map[string]bool, len(t.gw.Secrets))
	var out []types.Resource
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
		out = append(out, &tlsv3.Secret{
			Name: s.Name,
			Type: &tlsv3.Secret_TlsCertificate{
				TlsCertificate: &tlsv3.TlsCertificate{
					CertificateChain: inlineBytes(s.Cert),
					PrivateKey:       inlineBytes(s.Key),
				},
			},
		})
	}
	return out, nil
}

func inlineBytes(b []byte) *corev3.DataSource {
	return &corev3.DataSource{Specifier: &corev3.DataSource_InlineBytes{InlineBytes: b}}
}
