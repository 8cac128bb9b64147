package translate

import (
	"bytes"
	"fmt"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Wire forms of route configurations and load assignments.
//
// A RouteConfiguration holds every virtual host of a listener: at 10,000
// routes it encodes to about half a megabyte, and encoding it again for
// each change of one route costs milliseconds, more than the rest of the
// change. The translator already encodes each route once, to hash it; it
// keeps that encoding, and assembles a virtual host's encoding from its
// routes' and a route configuration's from its virtual hosts'. A
// protobuf message is the concatenation of its fields, and a repeated
// message field the concatenation of one length-prefixed field per
// element, in any order; so the route configuration in Resources.Routes is
// the configuration without its virtual hosts, carrying their encodings as
// unknown fields, which proto encodes by copying them. Only the encodings
// are kept: the messages of routes are built in scratch space, encoded
// and dropped, and Decode rebuilds the message for those who read it.
//
// Load assignments are kept the same way, for memory: the seven messages
// of each endpoint take ten times the bytes of its encoding, which is
// written directly, without the messages (claenc.go). A load assignment
// in Resources.Endpoints holds its cluster name (which the xDS cache
// reads) and its endpoints as unknown fields.

var (
	vhostRoutesField  = fieldNumber(&routev3.VirtualHost{}, "routes")
	routeConfigVHosts = fieldNumber(&routev3.RouteConfiguration{}, "virtual_hosts")
	claNameField      = fieldNumber(&endpointv3.ClusterLoadAssignment{}, "cluster_name")
)

func fieldNumber(m proto.Message, name protoreflect.Name) protowire.Number {
	return m.ProtoReflect().Descriptor().Fields().ByName(name).Number()
}

// vhostWire returns the encoding of a virtual host from the encoding of
// the virtual host without routes (shell) and its routes', and the same
// bytes framed as a virtual_hosts field of a RouteConfiguration (the
// encoding is the end of the framed form: one allocation, and a route
// config of this virtual host alone, hostRouteConfig, copies nothing).
func vhostWire(shell []byte, routes []*routeEntry) (wire, framed []byte) {
	n := len(shell)
	for _, r := range routes {
		n += protowire.SizeTag(vhostRoutesField) + protowire.SizeBytes(len(r.wire))
	}
	head := protowire.SizeTag(routeConfigVHosts) + protowire.SizeVarint(uint64(n))
	b := make([]byte, 0, head+n)
	b = protowire.AppendTag(b, routeConfigVHosts, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	b = append(b, shell...)
	for _, r := range routes {
		b = protowire.AppendTag(b, vhostRoutesField, protowire.BytesType)
		b = protowire.AppendBytes(b, r.wire)
	}
	return b[head:], b
}

// routeConfigWire returns a copy of shell (a RouteConfiguration without
// virtual hosts) carrying the encodings of vhosts as unknown fields.
func routeConfigWire(shell *routev3.RouteConfiguration, vhosts []*vhostEntry) *routev3.RouteConfiguration {
	n := 0
	for _, v := range vhosts {
		n += len(v.framed)
	}
	raw := make([]byte, 0, n)
	for _, v := range vhosts {
		raw = append(raw, v.framed...)
	}
	w := proto.Clone(shell).(*routev3.RouteConfiguration)
	w.ProtoReflect().SetUnknown(raw)
	return w
}

// claWire returns the wire form of a load assignment named name whose
// deterministic encoding is enc: the name as a field (the xDS cache reads
// it), the endpoints as the unknown fields that follow it in enc. A
// deterministic encoding writes fields in number order, so enc starts with
// the name's field.
func claWire(name string, enc []byte) (*endpointv3.ClusterLoadAssignment, error) {
	rest, err := fieldsAfterName(enc, claNameField, name)
	if err != nil {
		return nil, fmt.Errorf("load assignment %q: %w", name, err)
	}
	w := &endpointv3.ClusterLoadAssignment{ClusterName: name}
	if len(rest) > 0 {
		w.ProtoReflect().SetUnknown(bytes.Clone(rest))
	}
	return w, nil
}

// fieldsAfterName returns the fields of enc, the deterministic encoding of
// a message whose first field is the string field (number) with value
// name (left out when empty), that follow that field: a deterministic
// encoding writes fields in number order.
func fieldsAfterName(enc []byte, field protowire.Number, name string) ([]byte, error) {
	var head []byte
	if name != "" {
		head = protowire.AppendTag(nil, field, protowire.BytesType)
		head = protowire.AppendString(head, name)
	}
	if !bytes.HasPrefix(enc, head) {
		return nil, fmt.Errorf("encoding does not start with its name")
	}
	return enc[len(head):], nil
}

// Decode returns r as a message whose fields can all be read: a resource
// in wire form (a route configuration or a load assignment) is decoded;
// any other resource is r itself.
func Decode(r types.Resource) (types.Resource, error) {
	if r == nil || len(r.ProtoReflect().GetUnknown()) == 0 {
		return r, nil
	}
	b, err := proto.Marshal(r)
	if err != nil {
		return nil, err
	}
	out := r.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("%T: %w", r, err)
	}
	return out, nil
}
