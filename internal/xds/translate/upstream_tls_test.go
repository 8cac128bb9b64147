package translate

import (
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/portico-dev/portico/internal/ir"
)

// withTLS returns a copy of g whose cluster i has tls.
func withTLS(g *ir.Gateway, i int, tls *ir.UpstreamTLS) *ir.Gateway {
	c := cowGateway(g)
	cl := *c.Clusters[i]
	cl.TLS = tls
	c.Clusters[i] = &cl
	return c
}

func upstreamContext(t *testing.T, r *Resources, name string) *tlsv3.UpstreamTlsContext {
	t.Helper()
	cl := byID(t, r, "C/"+name).(*clusterv3.Cluster)
	if cl.GetTransportSocket() == nil {
		return nil
	}
	var u tlsv3.UpstreamTlsContext
	if err := cl.GetTransportSocket().GetTypedConfig().UnmarshalTo(&u); err != nil {
		t.Fatal(err)
	}
	return &u
}

// A cluster's TLS becomes its UpstreamTlsContext, on every path of the
// memo (the same as a fresh translation each time); a blocked one has no
// endpoints whatever the IR says; a client certificate must be a secret
// of the Gateway.
func TestUpstreamTLS(t *testing.T) {
	x := NewTranslator()
	base := fullGateway()
	if _, err := x.Translate(base); err != nil {
		t.Fatal(err)
	}
	tls := &ir.UpstreamTLS{SNI: "a.internal", CACertificates: []byte(certA),
		SubjectAltNames:   []ir.SubjectAltName{{Type: ir.SANDNS, Value: "a.internal"}, {Type: ir.SANURI, Value: "spiffe://x/y"}},
		ClientCertificate: secretA}
	g1 := withTLS(base, 0, tls)
	r1, err := x.Translate(g1)
	if err != nil {
		t.Fatal(err)
	}
	sameAsFresh(t, g1, r1)
	u := upstreamContext(t, r1, clusterA)
	if u == nil || u.GetSni() != "a.internal" || len(u.GetCommonTlsContext().GetValidationContext().GetMatchTypedSubjectAltNames()) != 2 ||
		u.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()[0].GetName() != secretA ||
		strings.Join(u.GetCommonTlsContext().GetAlpnProtocols(), ",") != "http/1.1" {
		t.Fatalf("upstream TLS %v", u)
	}

	// Another CA: the cluster is translated again (memo: same endpoints).
	other := *tls
	other.CACertificates, other.SystemCAFile = nil, "/etc/ssl/certs/ca-certificates.crt"
	g2 := withTLS(g1, 0, &other)
	r2, err := x.Translate(g2)
	if err != nil {
		t.Fatal(err)
	}
	sameAsFresh(t, g2, r2)
	if f := upstreamContext(t, r2, clusterA).GetCommonTlsContext().GetValidationContext().GetTrustedCa().GetFilename(); f != other.SystemCAFile {
		t.Errorf("trusted CA file %q", f)
	}

	// Blocked: no transport socket, no endpoints.
	g3 := withTLS(g2, 0, &ir.UpstreamTLS{Blocked: "no usable CA"})
	r3, err := x.Translate(g3)
	if err != nil {
		t.Fatal(err)
	}
	sameAsFresh(t, g3, r3)
	if upstreamContext(t, r3, clusterA) != nil {
		t.Error("a blocked cluster has a transport socket")
	}
	if cla := decodedCLA(t, r3, clusterA); len(cla.GetEndpoints()) != 0 {
		t.Errorf("a blocked cluster has endpoints: %v", cla.GetEndpoints())
	}
	// Back to plaintext.
	r4, err := x.Translate(base)
	if err != nil {
		t.Fatal(err)
	}
	sameAsFresh(t, base, r4)

	missing := *tls
	missing.ClientCertificate = "default/nope"
	if _, err := Translate(withTLS(base, 0, &missing)); err == nil || !strings.Contains(err.Error(), "client certificate") {
		t.Errorf("a client certificate that is no secret: err %v", err)
	}
	h2 := withTLS(base, 1, &ir.UpstreamTLS{SNI: "b.internal", CACertificates: []byte(certA), SubjectAltNames: []ir.SubjectAltName{{Type: ir.SANDNS, Value: "b.internal"}}})
	r5, err := Translate(h2)
	if err != nil {
		t.Fatal(err)
	}
	if a := upstreamContext(t, r5, clusterB).GetCommonTlsContext().GetAlpnProtocols(); len(a) != 1 || a[0] != "h2" {
		t.Errorf("HTTP/2 cluster ALPN %v", a)
	}
}

func decodedCLA(t *testing.T, r *Resources, name string) *endpointv3.ClusterLoadAssignment {
	t.Helper()
	for _, e := range r.Endpoints {
		d, err := Decode(e)
		if err != nil {
			t.Fatal(err)
		}
		if cla, ok := d.(*endpointv3.ClusterLoadAssignment); ok && cla.GetClusterName() == name {
			return cla
		}
	}
	t.Fatalf("no load assignment %s", name)
	return nil
}
