package render

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
)

// redact returns m, or for a Secret a copy with its secret material replaced
// by Redacted. m itself is never modified: it may be served concurrently.
func redact(m proto.Message) proto.Message {
	s, ok := m.(*tlsv3.Secret)
	if !ok {
		return m
	}
	s = proto.Clone(s).(*tlsv3.Secret)
	if c := s.GetTlsCertificate(); c != nil {
		c.PrivateKey = redactedSource(c.PrivateKey)
		c.Password = redactedSource(c.Password)
		c.Pkcs12 = redactedSource(c.Pkcs12)
		if c.PrivateKeyProvider != nil {
			c.PrivateKeyProvider.ConfigType = nil
		}
	}
	if k := s.GetSessionTicketKeys(); k != nil {
		for i := range k.Keys {
			k.Keys[i] = redactedSource(k.Keys[i])
		}
	}
	if g := s.GetGenericSecret(); g != nil {
		g.Secret = redactedSource(g.Secret)
		for name, v := range g.Secrets {
			g.Secrets[name] = redactedSource(v)
		}
	}
	return s
}

// redactedSource replaces inline data; a file or environment reference holds
// no secret and is kept.
func redactedSource(d *corev3.DataSource) *corev3.DataSource {
	if d == nil {
		return nil
	}
	switch d.Specifier.(type) {
	case *corev3.DataSource_InlineBytes, *corev3.DataSource_InlineString:
		return &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: Redacted}}
	}
	return d
}
