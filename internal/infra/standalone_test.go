package infra

import (
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

// StandaloneBootstrap connects over plaintext without TLS options, over
// TLS checking the server's name with them, and presents a client
// certificate (mutual TLS) when given one.
func TestStandaloneBootstrapTLS(t *testing.T) {
	parse := func(out string) (*bootstrapv3.Bootstrap, *tlsv3.UpstreamTlsContext) {
		t.Helper()
		b := &bootstrapv3.Bootstrap{}
		if err := protojson.Unmarshal([]byte(out), b); err != nil {
			t.Fatal(err)
		}
		if err := b.ValidateAll(); err != nil {
			t.Fatal(err)
		}
		ts := b.StaticResources.Clusters[0].TransportSocket
		if ts == nil {
			return b, nil
		}
		up := &tlsv3.UpstreamTlsContext{}
		if err := ts.GetTypedConfig().UnmarshalTo(up); err != nil {
			t.Fatal(err)
		}
		return b, up
	}
	out, err := StandaloneBootstrap("default/quickstart", "e1", "127.0.0.1:18000", "127.0.0.1:9901", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, up := parse(out); up != nil {
		t.Fatal("plaintext bootstrap has a TLS transport socket")
	}

	out, err = StandaloneBootstrap("default/quickstart", "e1", "127.0.0.1:18000", "127.0.0.1:9901",
		&StandaloneTLS{CAFile: "/c/ca.crt", CertFile: "/c/gw.crt", KeyFile: "/c/gw.key"})
	if err != nil {
		t.Fatal(err)
	}
	_, up := parse(out)
	common := up.GetCommonTlsContext()
	vc := common.GetValidationContext()
	if up == nil || vc.GetTrustedCa().GetFilename() != "/c/ca.crt" || up.Sni != "" {
		t.Fatalf("TLS context %v", up)
	}
	if m := vc.GetMatchTypedSubjectAltNames(); len(m) != 1 || m[0].SanType != tlsv3.SubjectAltNameMatcher_IP_ADDRESS ||
		m[0].Matcher.GetExact() != "127.0.0.1" {
		t.Errorf("server name check %v, want the IP SAN 127.0.0.1", m)
	}
	if c := common.GetTlsCertificates(); len(c) != 1 || c[0].CertificateChain.GetFilename() != "/c/gw.crt" ||
		c[0].PrivateKey.GetFilename() != "/c/gw.key" {
		t.Errorf("client certificate %v", c)
	}

	out, err = StandaloneBootstrap("default/quickstart", "e1", "xds.example.test:18000", "127.0.0.1:9901",
		&StandaloneTLS{CAFile: "/c/ca.crt"})
	if err != nil {
		t.Fatal(err)
	}
	_, up = parse(out)
	if up.Sni != "xds.example.test" || len(up.GetCommonTlsContext().GetTlsCertificates()) != 0 {
		t.Errorf("TLS without client certificate: SNI %q, certificates %v", up.Sni, up.GetCommonTlsContext().GetTlsCertificates())
	}

	for name, o := range map[string]*StandaloneTLS{
		"no CA":   {CertFile: "/c/gw.crt", KeyFile: "/c/gw.key"},
		"no key":  {CAFile: "/c/ca.crt", CertFile: "/c/gw.crt"},
		"no cert": {CAFile: "/c/ca.crt", KeyFile: "/c/gw.key"},
	} {
		if _, err := StandaloneBootstrap("default/quickstart", "e1", "127.0.0.1:18000", "127.0.0.1:9901", o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
