package translate

// TLS to the endpoints of a cluster (ir.UpstreamTLS, from a
// BackendTLSPolicy): an UpstreamTlsContext transport socket on the
// cluster.
//
//   - SNI is the policy's hostname;
//   - the trusted CAs are inline in the validation context (the bundle is
//     small and per Service port; its bytes are part of the cluster's
//     hash, so a changed CA is a new version of the cluster), or the
//     proxy's system CA file (wellKnownCACertificates: System);
//   - the certificate must carry one of the subject alternative names
//     (match_typed_subject_alt_names, exact: DNS names as Envoy matches
//     them, a wildcard certificate matching one label), and Envoy checks
//     the chain and the validity dates;
//   - the client certificate (the Gateway's spec.tls.backend) is the SDS
//     secret of the Gateway's Secrets it names;
//   - an HTTP/2 cluster offers ALPN h2 (gRPC servers require it over TLS),
//     an HTTP/1.1 one http/1.1; a TCP cluster offers nothing.
//
// A blocked ir.UpstreamTLS has no transport socket: such a cluster has no
// endpoints (endpointsOf), so it never connects.

import (
	"fmt"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"

	"github.com/portico-dev/portico/internal/ir"
)

const upstreamTLSSocketName = "envoy.transport_sockets.tls"

// endpointsOf is the endpoints of c the load assignment lists: none for a
// cluster whose TLS is blocked.
func endpointsOf(c *ir.Cluster) []ir.Endpoint {
	if c.TLS != nil && c.TLS.Blocked != "" {
		return nil
	}
	return c.Endpoints
}

// upstreamTLS is the transport socket of a cluster with TLS.
func (t *translator) upstreamTLS(c *ir.Cluster) (*corev3.TransportSocket, error) {
	u := c.TLS
	if u.SNI == "" {
		return nil, fmt.Errorf("cluster %q: TLS without a server name", c.Name)
	}
	if len(u.SubjectAltNames) == 0 {
		return nil, fmt.Errorf("cluster %q: TLS without subject alternative names", c.Name)
	}
	vc := &tlsv3.CertificateValidationContext{}
	switch {
	case len(u.CACertificates) > 0:
		vc.TrustedCa = inlineBytes(u.CACertificates)
	case u.SystemCAFile != "":
		vc.TrustedCa = &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: u.SystemCAFile}}
	default:
		return nil, fmt.Errorf("cluster %q: TLS without trusted CAs", c.Name)
	}
	for _, san := range u.SubjectAltNames {
		var typ tlsv3.SubjectAltNameMatcher_SanType
		switch san.Type {
		case ir.SANDNS:
			typ = tlsv3.SubjectAltNameMatcher_DNS
		case ir.SANURI:
			typ = tlsv3.SubjectAltNameMatcher_URI
		default:
			return nil, fmt.Errorf("cluster %q: subject alternative name of type %q", c.Name, san.Type)
		}
		vc.MatchTypedSubjectAltNames = append(vc.MatchTypedSubjectAltNames, &tlsv3.SubjectAltNameMatcher{
			SanType: typ,
			Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: san.Value}},
		})
	}
	common := &tlsv3.CommonTlsContext{
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: vc},
	}
	switch c.Protocol {
	case ir.UpstreamHTTP2:
		common.AlpnProtocols = []string{"h2"}
	case ir.UpstreamHTTP1, "":
		common.AlpnProtocols = []string{"http/1.1"}
	}
	if name := u.ClientCertificate; name != "" {
		if !slices.ContainsFunc(t.gw.Secrets, func(s *ir.Secret) bool { return s != nil && s.Name == name }) {
			return nil, fmt.Errorf("cluster %q: client certificate %q is not a secret of the Gateway", c.Name, name)
		}
		common.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{{Name: name, SdsConfig: sharedADS}}
	}
	ctx, err := toAny("upstream TLS of "+c.Name, &tlsv3.UpstreamTlsContext{Sni: u.SNI, CommonTlsContext: common})
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{Name: upstreamTLSSocketName, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: ctx}}, nil
}

// equalUpstreamTLS reports whether a and b configure the same TLS.
func equalUpstreamTLS(a, b *ir.UpstreamTLS) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return a.Blocked == b.Blocked && a.SNI == b.SNI && string(a.CACertificates) == string(b.CACertificates) &&
		a.SystemCAFile == b.SystemCAFile && slices.Equal(a.SubjectAltNames, b.SubjectAltNames) &&
		a.ClientCertificate == b.ClientCertificate
}
