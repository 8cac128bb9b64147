package translate

import (
	"crypto/sha256"
	"fmt"
	"unicode/utf8"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Plain EDS clusters are encoded from a template.
//
// Every cluster of a Gateway without TLS is the same message but for its
// name, which is also its EDS service name: encoding and validating each
// of them (a tenth of the xDS translation of a large Gateway) repeats the
// same work. The translator encodes and validates, once per protocol
// options (none, or HTTP/2), a template cluster without the two names,
// and cuts its deterministic encoding around the EDS config: the fields
// written before it, the EDS config's own fields (the config source) and
// the fields written after it (timeout, circuit breakers, protocol
// options, and the discovery type: protobuf writes the fields of a oneof
// after the others). A cluster's encoding is its name's field (the first
// field protobuf writes), the first part, the EDS config with its service
// name appended (its last field), and the last part: the deterministic
// encoding of the message, which TestClusterTemplateEncoding compares with
// protobuf's. What validation
// would check of the names, it checks: a name is not empty, and (for the
// encoding) valid UTF-8. Clusters with TLS are encoded as messages.

var (
	clusterNameField      = fieldNumber(&clusterv3.Cluster{}, "name")
	clusterEDSConfigField = fieldNumber(&clusterv3.Cluster{}, "eds_cluster_config")
	edsServiceNameField   = fieldNumber(&clusterv3.Cluster_EdsClusterConfig{}, "service_name")
)

// clusterTemplate is the encoding of a cluster without its names, cut
// around its EDS config.
type clusterTemplate struct {
	head, eds, tail []byte
}

// newClusterTemplate validates and cuts the encoding of cl, a cluster
// without name whose EDS config has no service name.
func newClusterTemplate(cl *clusterv3.Cluster) (*clusterTemplate, error) {
	probe := proto.CloneOf(cl)
	probe.Name = "template" // validation requires a name
	if err := validated(probe, "template"); err != nil {
		return nil, err
	}
	enc, err := deterministic.Marshal(cl)
	if err != nil {
		return nil, fmt.Errorf("cluster template: %w", err)
	}
	t := &clusterTemplate{}
	seen := false
	for b := enc; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("cluster template: %w", protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, fmt.Errorf("cluster template: %w", protowire.ParseError(m))
		}
		field := b[:n+m]
		switch {
		case num == clusterNameField:
			return nil, fmt.Errorf("cluster template has a name")
		case num != clusterEDSConfigField && !seen:
			t.head = append(t.head, field...)
		case num == clusterEDSConfigField:
			v, k := protowire.ConsumeBytes(b[n:])
			if k < 0 {
				return nil, fmt.Errorf("cluster template: %w", protowire.ParseError(k))
			}
			t.eds, seen = v, true
		default:
			t.tail = append(t.tail, field...)
		}
		b = b[n+m:]
	}
	if !seen {
		return nil, fmt.Errorf("cluster template has no EDS config")
	}
	return t, nil
}

// appendCluster appends the encoding of the template's cluster named name
// (its EDS service name too) to b.
func (t *clusterTemplate) appendCluster(b []byte, name string) []byte {
	b = protowire.AppendTag(b, clusterNameField, protowire.BytesType)
	b = protowire.AppendString(b, name)
	b = append(b, t.head...)
	inner := len(t.eds) + protowire.SizeTag(edsServiceNameField) + protowire.SizeBytes(len(name))
	b = protowire.AppendTag(b, clusterEDSConfigField, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(inner))
	b = append(b, t.eds...)
	b = protowire.AppendTag(b, edsServiceNameField, protowire.BytesType)
	b = protowire.AppendString(b, name)
	return append(b, t.tail...)
}

// templateEntry is the entry of cl, a cluster without TLS of the
// translator's settings whose names are name, encoded from the template
// of its protocol options.
func (t *translator) templateEntry(name string, cl *clusterv3.Cluster, h2 bool) (*entry, error) {
	if name == "" {
		return nil, fmt.Errorf("cluster without a name")
	}
	if !utf8.ValidString(name) {
		return nil, fmt.Errorf("cluster %q: the name is not valid UTF-8", name)
	}
	tmpl := &t.clusterTemplates[0]
	if h2 {
		tmpl = &t.clusterTemplates[1]
	}
	if *tmpl == nil {
		shape := proto.CloneOf(cl)
		shape.Name = ""
		shape.EdsClusterConfig.ServiceName = ""
		ct, err := newClusterTemplate(shape)
		if err != nil {
			return nil, err
		}
		*tmpl = ct
	}
	t.hs.buf = (*tmpl).appendCluster(t.hs.buf[:0], name)
	return newEntry(name, cl, sha256.Sum256(t.hs.buf)), nil
}
