package infra

import (
	"fmt"
	"net"
	"strconv"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/portico-dev/portico/api/v1alpha1"
)

// StandaloneTLS is how an Envoy run by hand connects to `portico
// standalone` over TLS: it trusts the CAs of CAFile and checks that the
// server's certificate names ServerName (a DNS name or an IP; default: the
// host of the xDS address), and with CertFile and KeyFile presents that
// client certificate (mutual TLS; its identity names the Gateway, see
// pki.Identity). Envoy reads the files when it starts: restart it to use
// renewed ones.
type StandaloneTLS struct {
	CAFile, CertFile, KeyFile string
	ServerName                string
}

// StandaloneBootstrap renders the bootstrap of an Envoy run by hand next
// to `portico standalone`: node.cluster names Gateway ns/name, node.id is
// nodeID, listeners and clusters come by ADS (Delta gRPC) from
// xdsAddress, over TLS when tlsOpts is not nil (plaintext otherwise),
// waiting for them however long it takes, and the admin interface listens
// on adminAddress (keep it on loopback). It is what `portico bootstrap`
// prints.
func StandaloneBootstrap(gateway, nodeID, xdsAddress, adminAddress string, tlsOpts *StandaloneTLS) (string, error) {
	return StandaloneBootstrapWith(StandaloneOptions{
		Gateway: gateway, NodeID: nodeID, XDSAddress: xdsAddress, AdminAddress: adminAddress, TLS: tlsOpts,
	})
}

// StandaloneOptions are the settings of StandaloneBootstrapWith.
type StandaloneOptions struct {
	// Gateway is ns/name (node.cluster), NodeID the Envoy's node.id.
	Gateway, NodeID string
	// XDSAddress is host:port of `portico standalone`'s xDS server,
	// AdminAddress that of Envoy's admin interface.
	XDSAddress, AdminAddress string
	// TLS, when set, is how xDS is secured (plaintext otherwise).
	TLS *StandaloneTLS
	// MetricsAddress, when set, is host:port of a metrics listener that
	// serves /stats/prometheus of the admin interface and nothing else of
	// it (metrics_listener.go), e.g. 127.0.0.1:19090 as in the
	// quickstart's bootstrap.
	MetricsAddress string
}

// StandaloneBootstrapWith is StandaloneBootstrap with a metrics listener
// when o.MetricsAddress is set. Like every bootstrap Portico writes, it
// caps client connections (overload.go; no heap limit: a process run by
// hand has no container memory limit Portico knows of).
func StandaloneBootstrapWith(o StandaloneOptions) (string, error) {
	host, port, err := hostPort(o.XDSAddress)
	if err != nil {
		return "", fmt.Errorf("infra: xDS address: %w", err)
	}
	adminHost, adminPort, err := hostPort(o.AdminAddress)
	if err != nil {
		return "", fmt.Errorf("infra: admin address: %w", err)
	}
	var ts *corev3.TransportSocket
	if o.TLS != nil {
		if ts, err = standaloneTransport(host, o.TLS); err != nil {
			return "", err
		}
	}
	xds, err := xdsCluster(host, port, time.Second, ts)
	if err != nil {
		return "", err
	}
	static := &bootstrapv3.Bootstrap_StaticResources{Clusters: []*clusterv3.Cluster{xds}}
	if o.MetricsAddress != "" {
		mHost, mPort, err := hostPort(o.MetricsAddress)
		if err != nil {
			return "", fmt.Errorf("infra: metrics address: %w", err)
		}
		if mHost == adminHost && mPort == adminPort {
			return "", fmt.Errorf("infra: the metrics address is the admin address")
		}
		metrics, err := metricsListener(mHost, mPort)
		if err != nil {
			return "", err
		}
		static.Clusters = append(static.Clusters, standaloneAdminCluster(adminHost, adminPort))
		static.Listeners = []*listenerv3.Listener{metrics}
	}
	overload, err := overloadManager(v1alpha1.ProxyConfigSpec{})
	if err != nil {
		return "", err
	}
	b := &bootstrapv3.Bootstrap{
		Node:             &corev3.Node{Id: o.NodeID, Cluster: o.Gateway},
		Admin:            &bootstrapv3.Admin{Address: socket(adminHost, adminPort)},
		DynamicResources: adsResources(),
		LayeredRuntime:   envoyRuntime(),
		StaticResources:  static,
		OverloadManager:  overload,
	}
	if err := b.ValidateAll(); err != nil {
		return "", fmt.Errorf("infra: standalone bootstrap of %s: %w", o.Gateway, err)
	}
	out, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(b)
	if err != nil {
		return "", err
	}
	return string(out) + "\n", nil
}

// standaloneAdminCluster is the admin cluster (bootstrap.go) of an admin
// interface on host:port.
func standaloneAdminCluster(host string, port uint32) *clusterv3.Cluster {
	c := adminCluster()
	c.LoadAssignment.Endpoints[0].LbEndpoints[0].GetEndpoint().Address = socket(host, port)
	return c
}

// standaloneTransport is the TLS transport socket of StandaloneTLS.
func standaloneTransport(host string, o *StandaloneTLS) (*corev3.TransportSocket, error) {
	if o.CAFile == "" {
		return nil, fmt.Errorf("infra: xDS over TLS needs the CA file of the server certificate")
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, fmt.Errorf("infra: a client certificate needs both its certificate and its key file")
	}
	serverName := o.ServerName
	if serverName == "" {
		serverName = host
	}
	sni, sanType := serverName, tlsv3.SubjectAltNameMatcher_DNS
	if net.ParseIP(serverName) != nil {
		sni, sanType = "", tlsv3.SubjectAltNameMatcher_IP_ADDRESS
	}
	common := &tlsv3.CommonTlsContext{
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			TrustedCa:                 &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: o.CAFile}},
			MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{{SanType: sanType, Matcher: exact(serverName)}},
		}},
	}
	if o.CertFile != "" {
		common.TlsCertificates = []*tlsv3.TlsCertificate{{
			CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: o.CertFile}},
			PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: o.KeyFile}},
		}}
	}
	a, err := anypb.New(&tlsv3.UpstreamTlsContext{Sni: sni, CommonTlsContext: common})
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{
		Name:       "envoy.transport_sockets.tls",
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a},
	}, nil
}

// adsResources: listeners and clusters by ADS over Delta gRPC from the
// xDS cluster. initial_fetch_timeout 0: Envoy's initialization waits for
// the first listeners and clusters however long xDS takes. With Envoy's
// default (15 s) a proxy that cannot reach xDS finishes initializing
// without configuration, turns LIVE and would be reported Ready.
func adsResources() *bootstrapv3.Bootstrap_DynamicResources {
	ads := &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		InitialFetchTimeout:   durationpb.New(0),
	}
	return &bootstrapv3.Bootstrap_DynamicResources{
		AdsConfig: &corev3.ApiConfigSource{
			ApiType:             corev3.ApiConfigSource_DELTA_GRPC,
			TransportApiVersion: corev3.ApiVersion_V3,
			GrpcServices: []*corev3.GrpcService{{
				TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: xdsClusterName}},
			}},
			SetNodeOnFirstMessageOnly: true,
		},
		LdsConfig: ads,
		CdsConfig: ads,
	}
}

// xdsCluster is the static cluster of the xDS server at host:port
// (resolved by DNS), over HTTP/2 (gRPC), with transport ts (nil:
// plaintext).
func xdsCluster(host string, port uint32, connectTimeout time.Duration, ts *corev3.TransportSocket) (*clusterv3.Cluster, error) {
	h2, err := anypb.New(&upstreamhttpv3.HttpProtocolOptions{
		UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{
					Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
				},
			},
		},
	})
	if err != nil {
		return nil, err
	}
	return &clusterv3.Cluster{
		Name:                 xdsClusterName,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS},
		ConnectTimeout:       durationpb.New(connectTimeout),
		TypedExtensionProtocolOptions: map[string]*anypb.Any{
			"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": h2,
		},
		TransportSocket: ts,
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: xdsClusterName,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socket(host, port)}},
			}}}},
		},
	}, nil
}

func hostPort(addr string) (string, uint32, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return "", 0, fmt.Errorf("%q: bad port", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return host, uint32(port), nil
}
