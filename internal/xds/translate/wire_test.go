package translate

import (
	"slices"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// checkWire checks the route configurations and load assignments of res,
// which are kept in wire form: each decodes completely (no field is left
// unknown at any depth), the result is valid, and it encodes to as many
// bytes as the wire form. That the content is right is the golden tests'
// part (they render the decoded form).
func checkWire(t *testing.T, res *Resources) {
	t.Helper()
	for _, w := range slices.Concat(res.Endpoints, res.Routes(), res.VirtualHosts) {
		name := cachev3.GetResourceName(w)
		b, err := cachev3.MarshalResource(w)
		if err != nil {
			t.Fatal(err)
		}
		d, err := Decode(w)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// The parts kept encoded: a route configuration's virtual hosts,
		// a load assignment's endpoints.
		var encoded int
		switch m := d.(type) {
		case *routev3.RouteConfiguration:
			encoded = len(m.VirtualHosts)
		case *routev3.VirtualHost:
			encoded = len(m.Routes)
		case *endpointv3.ClusterLoadAssignment:
			encoded = len(m.Endpoints)
		default:
			t.Fatalf("%s: %T", name, d)
		}
		if encoded > 0 && d == w {
			t.Errorf("%s: %T held as a message, not encoded", name, d)
		}
		if cachev3.GetResourceName(d) != name {
			t.Errorf("%s: decodes to %q", name, cachev3.GetResourceName(d))
		}
		if unknown := unknownFields(d.ProtoReflect()); unknown != "" {
			t.Errorf("%s: decoded with unknown fields in %s", name, unknown)
		}
		if err := d.(validator).ValidateAll(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if got := proto.Size(d); got != len(b) {
			t.Errorf("%s: wire form of %d bytes decodes to a %T of %d", name, len(b), d, got)
		}
	}
}

// unknownFields names the first message under m that has unknown fields.
func unknownFields(m protoreflect.Message) string {
	if len(m.GetUnknown()) > 0 {
		return string(m.Descriptor().FullName())
	}
	found := ""
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len() && found == ""; i++ {
				found = unknownFields(v.List().Get(i).Message())
			}
		case fd.IsMap():
			// Route configurations hold no maps of messages that we set.
		case fd.Message() != nil:
			found = unknownFields(v.Message())
		}
		return found == ""
	})
	return found
}

func TestWireForms(t *testing.T) {
	checkWire(t, mustTranslate(t, fullGateway()))
	checkWire(t, mustTranslate(t, generatedGateway(300)))
	checkWire(t, mustTranslate(t, vhdsGateway()))
}
