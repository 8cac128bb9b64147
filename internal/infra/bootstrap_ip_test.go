package infra

import (
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/portico-dev/portico/api/v1alpha1"
)

// xdsTLS is the UpstreamTlsContext of the bootstrap's xDS cluster.
func xdsTLS(t *testing.T, p Params) *tlsv3.UpstreamTlsContext {
	t.Helper()
	out, err := Bootstrap("apps", "edge", v1alpha1.ProxyConfigSpec{}, p)
	if err != nil {
		t.Fatal(err)
	}
	b := &bootstrapv3.Bootstrap{}
	if err := protojson.Unmarshal([]byte(out), b); err != nil {
		t.Fatal(err)
	}
	for _, c := range b.StaticResources.Clusters {
		if c.Name != xdsClusterName {
			continue
		}
		tc := &tlsv3.UpstreamTlsContext{}
		if err := c.TransportSocket.GetTypedConfig().UnmarshalTo(tc); err != nil {
			t.Fatal(err)
		}
		return tc
	}
	t.Fatal("no xDS cluster")
	return nil
}

func sanMatchers(tc *tlsv3.UpstreamTlsContext) []*tlsv3.SubjectAltNameMatcher {
	return tc.CommonTlsContext.GetCombinedValidationContext().GetDefaultValidationContext().GetMatchTypedSubjectAltNames()
}

// An xDS address given as an IP (--xds-service-address 10.0.0.5:18000
// with --xds-extra-san 10.0.0.5) is verified against the serving
// certificate's IP SANs: a DNS SAN matcher never matches an IP SAN, so
// such proxies could not connect. No SNI is sent for an IP (RFC 6066).
func TestBootstrapXDSAddressIP(t *testing.T) {
	for _, tc := range []struct {
		addr, name string
		typ        tlsv3.SubjectAltNameMatcher_SanType
		sni        string
	}{
		{"portico-xds.portico-system.svc:18000", "portico-xds.portico-system.svc", tlsv3.SubjectAltNameMatcher_DNS, "portico-xds.portico-system.svc"},
		{"10.0.0.5:18000", "10.0.0.5", tlsv3.SubjectAltNameMatcher_IP_ADDRESS, ""},
		{"[fd00::5]:18000", "fd00::5", tlsv3.SubjectAltNameMatcher_IP_ADDRESS, ""},
	} {
		got := xdsTLS(t, Params{XDSAddress: tc.addr, XDSServerName: tc.name})
		m := sanMatchers(got)
		if len(m) != 1 || m[0].SanType != tc.typ || m[0].GetMatcher().GetExact() != tc.name {
			t.Errorf("%s: SAN matchers %v, want one %s matcher for %s", tc.addr, m, tc.typ, tc.name)
		}
		if got.Sni != tc.sni {
			t.Errorf("%s: SNI %q, want %q", tc.addr, got.Sni, tc.sni)
		}
	}
}
