package translate

import (
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Wire forms of route configurations.
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

var (
	vhostRoutesField  = fieldNumber(&routev3.VirtualHost{}, "routes")
	routeConfigVHosts = fieldNumber(&routev3.RouteConfiguration{}, "virtual_hosts")
)

func fieldNumber(m proto.Message, name protoreflect.Name) protowire.Number {
	return m.ProtoReflect().Descriptor().Fields().ByName(name).Number()
}

// vhostWire returns the encoding of a virtual host from the encoding of
// the virtual host without routes (shell) and its routes'.
func vhostWire(shell []byte, routes []*routeEntry) []byte {
	n := len(shell)
	for _, r := range routes {
		n += protowire.SizeTag(vhostRoutesField) + protowire.SizeBytes(len(r.wire))
	}
	b := make([]byte, 0, n)
	b = append(b, shell...)
	for _, r := range routes {
		b = protowire.AppendTag(b, vhostRoutesField, protowire.BytesType)
		b = protowire.AppendBytes(b, r.wire)
	}
	return b
}

// routeConfigWire returns a copy of shell (a RouteConfiguration without
// virtual hosts) carrying the encodings of vhosts as unknown fields.
func routeConfigWire(shell *routev3.RouteConfiguration, vhosts []*vhostEntry) *routev3.RouteConfiguration {
	n := 0
	for _, v := range vhosts {
		n += protowire.SizeTag(routeConfigVHosts) + protowire.SizeBytes(len(v.wire))
	}
	raw := make([]byte, 0, n)
	for _, v := range vhosts {
		raw = protowire.AppendTag(raw, routeConfigVHosts, protowire.BytesType)
		raw = protowire.AppendBytes(raw, v.wire)
	}
	w := proto.Clone(shell).(*routev3.RouteConfiguration)
	w.ProtoReflect().SetUnknown(raw)
	return w
}

// Decode returns r as a message whose fields can be read: a route
// configuration in wire form is decoded, with its virtual hosts and
// routes; any other resource is r itself.
func Decode(r types.Resource) (types.Resource, error) {
	rc, ok := r.(*routev3.RouteConfiguration)
	if !ok || len(rc.ProtoReflect().GetUnknown()) == 0 {
		return r, nil
	}
	b, err := proto.Marshal(rc)
	if err != nil {
		return nil, err
	}
	out := &routev3.RouteConfiguration{}
	if err := proto.Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("route configuration %q: %w", rc.GetName(), err)
	}
	return out, nil
}
