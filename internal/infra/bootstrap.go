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
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/proxyspec"
)

const xdsClusterName = "xds_cluster"

// Bootstrap renders the Envoy bootstrap of Gateway ns/gw's proxies as JSON:
// node.cluster names the Gateway, configuration comes by ADS over Delta gRPC
// from the controller's xDS Service with mutual TLS, the admin interface
// listens on localhost only, a readiness listener answers /ready, a
// metrics listener /stats/prometheus (metrics_listener.go), and the
// overload manager caps connections and, with a memory limit, watches the
// heap (overload.go).
func Bootstrap(ns, gw string, pc v1alpha1.ProxyConfigSpec, p Params) (string, error) {
	files, err := BootstrapFiles(ns, gw, pc, p)
	if err != nil {
		return "", err
	}
	return files[bootstrapFile], nil
}

// Names of the file-based SDS secrets of the xDS connection.
const (
	sdsClientCert = "portico-xds-client"
	sdsCA         = "portico-xds-ca"
	sdsClientFile = "sds-xds-client.json"
	sdsCAFile     = "sds-xds-ca.json"
)

// BootstrapFiles renders the files of the bootstrap ConfigMap: the
// bootstrap itself and the two file-based SDS resources it references.
func BootstrapFiles(ns, gw string, pc v1alpha1.ProxyConfigSpec, p Params) (map[string]string, error) {
	boot, err := bootstrap(ns, gw, pc, p)
	if err != nil {
		return nil, err
	}
	watched := &corev3.WatchedDirectory{Path: xdsCertDir}
	client, err := sdsFile(&tlsv3.Secret{Name: sdsClientCert, Type: &tlsv3.Secret_TlsCertificate{TlsCertificate: &tlsv3.TlsCertificate{
		CertificateChain: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: xdsCertDir + "/tls.crt"}},
		PrivateKey:       &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: xdsCertDir + "/tls.key"}},
		WatchedDirectory: watched,
	}}})
	if err != nil {
		return nil, err
	}
	ca, err := sdsFile(&tlsv3.Secret{Name: sdsCA, Type: &tlsv3.Secret_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
		TrustedCa:        &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: xdsCertDir + "/ca.crt"}},
		WatchedDirectory: watched,
	}}})
	if err != nil {
		return nil, err
	}
	return map[string]string{bootstrapFile: boot, sdsClientFile: client, sdsCAFile: ca}, nil
}

// sdsFile is a file-based SDS resource: a DiscoveryResponse holding one
// Secret.
func sdsFile(s *tlsv3.Secret) (string, error) {
	if err := s.ValidateAll(); err != nil {
		return "", err
	}
	a, err := anypb.New(s)
	if err != nil {
		return "", err
	}
	out, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(&discoveryv3.DiscoveryResponse{Resources: []*anypb.Any{a}})
	return string(out), err
}

func fileSDS(path string) *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion: corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_PathConfigSource{PathConfigSource: &corev3.PathConfigSource{
			Path:             path,
			WatchedDirectory: &corev3.WatchedDirectory{Path: bootstrapDir},
		}},
	}
}

func bootstrap(ns, gw string, pc v1alpha1.ProxyConfigSpec, p Params) (string, error) {
	host, portStr, err := net.SplitHostPort(p.XDSAddress)
	if err != nil {
		return "", fmt.Errorf("infra: xDS address %q: %w", p.XDSAddress, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return "", fmt.Errorf("infra: xDS address %q: bad port", p.XDSAddress)
	}
	serverName := p.XDSServerName
	if serverName == "" {
		serverName = host
	}
	// The client certificate and the CA come by file-based SDS watching
	// the mounted Secret's directory, so Envoy picks up rotated
	// certificates without a restart (Kubernetes swaps the files
	// atomically).
	// A server name that is an IP is checked against the certificate's IP
	// SANs (a DNS matcher never matches them) and sent as no SNI, which
	// may not be an IP literal (RFC 6066).
	sni, sanType := serverName, tlsv3.SubjectAltNameMatcher_DNS
	if net.ParseIP(serverName) != nil {
		sni, sanType = "", tlsv3.SubjectAltNameMatcher_IP_ADDRESS
	}
	tlsCtx := &tlsv3.UpstreamTlsContext{
		Sni: sni,
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{
				Name:      sdsClientCert,
				SdsConfig: fileSDS(bootstrapDir + "/" + sdsClientFile),
			}},
			ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{
				CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
					DefaultValidationContext: &tlsv3.CertificateValidationContext{
						MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{{
							SanType: sanType,
							Matcher: exact(serverName),
						}},
					},
					ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{
						Name:      sdsCA,
						SdsConfig: fileSDS(bootstrapDir + "/" + sdsCAFile),
					},
				},
			},
		},
	}
	tlsAny, err := anypb.New(tlsCtx)
	if err != nil {
		return "", err
	}
	xds, err := xdsCluster(host, uint32(port), 5*time.Second, &corev3.TransportSocket{
		Name:       "envoy.transport_sockets.tls",
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: tlsAny},
	})
	if err != nil {
		return "", err
	}
	listeners, err := staticListeners(pc)
	if err != nil {
		return "", err
	}
	overload, err := overloadManager(pc)
	if err != nil {
		return "", err
	}
	b := &bootstrapv3.Bootstrap{
		Node:             &corev3.Node{Cluster: ns + "/" + gw},
		Admin:            &bootstrapv3.Admin{Address: socket("127.0.0.1", uint32(proxyspec.AdminPort))},
		DynamicResources: adsResources(),
		LayeredRuntime:   envoyRuntime(),
		StaticResources: &bootstrapv3.Bootstrap_StaticResources{
			Clusters:  []*clusterv3.Cluster{adminCluster(), xds},
			Listeners: listeners,
		},
		OverloadManager: overload,
	}
	if err := b.ValidateAll(); err != nil {
		return "", fmt.Errorf("infra: bootstrap of %s/%s: %w", ns, gw, err)
	}
	out, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(b)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// adminClusterName is the static cluster of Envoy's own admin interface,
// on loopback; only the readiness and metrics listeners route to it, each
// one path (metrics_listener.go).
const adminClusterName = "portico_admin"

func adminCluster() *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 adminClusterName,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(time.Second),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: adminClusterName,
			Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: []*endpointv3.LbEndpoint{{
				HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: socket("127.0.0.1", uint32(proxyspec.AdminPort))}},
			}}}},
		},
	}
}

// staticListeners are the readiness listener and, unless disabled, the
// metrics listener of a provisioned proxy (metrics_listener.go).
func staticListeners(pc v1alpha1.ProxyConfigSpec) ([]*listenerv3.Listener, error) {
	ready, err := readyListener()
	if err != nil {
		return nil, err
	}
	out := []*listenerv3.Listener{ready}
	metrics, err := provisionedMetricsListener(pc)
	if err != nil {
		return nil, err
	}
	if metrics != nil {
		out = append(out, metrics)
	}
	return out, nil
}

func socket(addr string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       addr,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

func exact(s string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: s}}
}
