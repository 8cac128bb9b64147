package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// Streaming: the admin debug endpoints write the document of one Gateway
// (or the statuses) straight to the response, so that what a request holds
// in memory is one piece of it, not the whole. A piece is one resource,
// except in route configurations, whose pieces are the configuration
// without its virtual hosts, each virtual host without its routes, and each
// route: a plaintext listener's configuration holds every route of the
// Gateway (hundreds of megabytes as generic JSON at 300,000 routes).
// Translate keeps a configuration's virtual hosts, and a virtual host's
// routes, as separate encodings (translate/wire.go), which are decoded here
// one at a time.
//
// Without header redaction the bytes are exactly those of JSON on the
// rendered value (WriteGatewayXDS ≡ JSON(GatewayXDSOf(…)), WriteStatuses ≡
// JSON(Statuses(…))): the same protojson field order, indentation and
// trailing newline.

// StreamOptions control WriteGatewayXDS.
type StreamOptions struct {
	Options
	// RedactHeaders replaces header values set by header modifiers and
	// the values (or patterns) of header and query parameter matches with
	// Redacted; names are kept. Values of pseudo-headers (":method",
	// ":path"…) are protocol elements, not credentials, and are kept.
	RedactHeaders bool
}

// WriteGatewayXDS writes the document of r (as GatewayXDSOf renders it) to
// w, one piece at a time; see the streaming notes above. r is not
// modified. On an error w holds a truncated document.
func WriteGatewayXDS(w io.Writer, r *translate.Resources, opts StreamOptions) error {
	s := newStreamer(w, opts)
	o := s.beginObject(0)
	o.key("gateway")
	s.value(r.Gateway, 1)
	o.key("version")
	s.value(r.Version, 1)
	for _, list := range []struct {
		key string
		rs  []types.Resource
	}{
		{"listeners", r.Listeners}, {"routes", r.Routes()}, {"clusters", r.Clusters},
		{"endpoints", r.Endpoints}, {"secrets", r.Secrets},
		{"scopedRoutes", r.ScopedRoutes}, {"hostScopeFilters", r.HostScopeFilters},
	} {
		if len(list.rs) == 0 && (list.key == "scopedRoutes" || list.key == "hostScopeFilters") {
			continue // omitted when empty, as GatewayXDS's
		}
		o.key(list.key)
		a := s.beginArray(1)
		for _, res := range list.rs {
			a.elem()
			if err := s.resource(res, 2); err != nil {
				return fmt.Errorf("gateway %s: %s: %w", r.Gateway, list.key, err)
			}
		}
		a.end()
	}
	o.end()
	s.raw("\n")
	return s.err
}

// WriteStatuses writes the statuses of res (as Statuses renders them) to
// w, one object at a time.
func WriteStatuses(w io.Writer, res *gatewayapi.Result) error {
	s := newStreamer(w, StreamOptions{})
	a := s.beginArray(0)
	if res != nil {
		for _, st := range res.StatusSet.All() {
			a.elem()
			s.value(StatusObject{
				APIVersion: APIVersion,
				Kind:       st.Kind.String(),
				Metadata:   Metadata{Namespace: st.Namespace, Name: st.Name},
				Status:     typedStatus(st),
			}, 1)
			if s.err != nil {
				return s.err
			}
		}
	}
	a.end()
	s.raw("\n")
	return s.err
}

// streamer writes indented JSON (two spaces, like JSON) to w piece by
// piece. The first error sticks: later writes do nothing.
type streamer struct {
	w       io.Writer
	opts    StreamOptions
	compact bytes.Buffer // one piece, compact
	enc     *json.Encoder
	out     bytes.Buffer // one piece, indented
	err     error
}

func newStreamer(w io.Writer, opts StreamOptions) *streamer {
	s := &streamer{w: w, opts: opts}
	s.enc = json.NewEncoder(&s.compact)
	s.enc.SetEscapeHTML(false)
	return s
}

func indent(depth int) string { return strings.Repeat("  ", depth) }

func (s *streamer) raw(str string) {
	if s.err == nil {
		_, s.err = io.WriteString(s.w, str)
	}
}

// value writes v, a value at nesting depth depth.
func (s *streamer) value(v any, depth int) {
	if s.err != nil {
		return
	}
	s.compact.Reset()
	if s.err = s.enc.Encode(v); s.err != nil {
		return
	}
	s.out.Reset()
	b := s.compact.Bytes()
	if s.err = json.Indent(&s.out, b[:len(b)-1], indent(depth), "  "); s.err != nil {
		return
	}
	_, s.err = s.w.Write(s.out.Bytes())
}

// fail records err (the first error sticks) and returns the sticky error.
func (s *streamer) fail(err error) error {
	if s.err == nil {
		s.err = err
	}
	return s.err
}

// container writes an object or an array member by member.
type container struct {
	s           *streamer
	depth, n    int
	open, close string
}

func (s *streamer) beginObject(depth int) *container {
	s.raw("{")
	return &container{s: s, depth: depth, open: "{", close: "}"}
}

func (s *streamer) beginArray(depth int) *container {
	s.raw("[")
	return &container{s: s, depth: depth, open: "[", close: "]"}
}

// elem starts the next element of an array.
func (c *container) elem() {
	if c.n > 0 {
		c.s.raw(",")
	}
	c.n++
	c.s.raw("\n" + indent(c.depth+1))
}

// key starts the next member of an object.
func (c *container) key(k string) {
	c.elem()
	c.s.value(k, c.depth+1)
	c.s.raw(": ")
}

func (c *container) end() {
	if c.n > 0 {
		c.s.raw("\n" + indent(c.depth))
	}
	c.s.raw(c.close)
}

// resource writes one resource at depth, a route configuration in pieces.
func (s *streamer) resource(r types.Resource, depth int) error {
	if rc, ok := r.(*routev3.RouteConfiguration); ok {
		return s.routeConfig(rc, depth)
	}
	v, err := s.render(r, false)
	if err != nil {
		return s.fail(err)
	}
	s.value(v, depth)
	return s.err
}

// render is Resource with the header redaction of s's options. A message
// that is not fresh (it may be read concurrently) is copied before it is
// redacted.
func (s *streamer) render(m types.Resource, fresh bool) (any, error) {
	if m == nil {
		return nil, nil
	}
	if s.opts.RedactHeaders {
		d, err := translate.Decode(m) // a resource in wire form: a fresh copy
		if err != nil {
			return nil, err
		}
		fresh = fresh || d != m
		if m = d; redactHeaders(m, false) {
			if !fresh {
				m = proto.Clone(m)
			}
			redactHeaders(m, true)
		}
	}
	return Resource(m, s.opts.Options)
}

var (
	routeConfigVHostsField = (&routev3.RouteConfiguration{}).ProtoReflect().Descriptor().Fields().ByName("virtual_hosts")
	vhostRoutesField       = (&routev3.VirtualHost{}).ProtoReflect().Descriptor().Fields().ByName("routes")
)

// routeConfig writes rc: its fields but the virtual hosts, with the
// virtual hosts (decoded one at a time from the encodings translate keeps
// as unknown fields) at their place in protojson's field order.
func (s *streamer) routeConfig(rc *routev3.RouteConfiguration, depth int) error {
	vhosts, ok := splitRepeated(rc.ProtoReflect().GetUnknown(), routeConfigVHostsField.Number())
	if !ok { // unknown fields that are not virtual hosts: render as a whole
		v, err := s.render(rc, false)
		if err != nil {
			return s.fail(err)
		}
		s.value(v, depth)
		return s.err
	}
	// The fields but the virtual hosts, without sharing rc's messages.
	shell := &routev3.RouteConfiguration{}
	rc.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd != routeConfigVHostsField {
			shell.ProtoReflect().Set(fd, v)
		}
		return true
	})
	shell = proto.Clone(shell).(*routev3.RouteConfiguration)
	known := rc.GetVirtualHosts()
	return s.withStreamedField(shell, routeConfigVHostsField, len(known)+len(vhosts), depth, func(a *container) error {
		for _, vh := range known {
			a.elem()
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(vh)
			if err != nil {
				return s.fail(err)
			}
			if err := s.virtualHost(b, depth+2); err != nil {
				return err
			}
		}
		for _, b := range vhosts {
			a.elem()
			if err := s.virtualHost(b, depth+2); err != nil {
				return err
			}
		}
		return nil
	})
}

// virtualHost writes the virtual host encoded as enc, its routes decoded
// one at a time.
func (s *streamer) virtualHost(enc []byte, depth int) error {
	var shellEnc []byte
	var routes [][]byte
	for b := enc; len(b) > 0; {
		num, typ, n := protowire.ConsumeField(b)
		if n < 0 {
			return s.fail(fmt.Errorf("virtual host: %w", protowire.ParseError(n)))
		}
		if num == vhostRoutesField.Number() && typ == protowire.BytesType {
			_, _, tn := protowire.ConsumeTag(b)
			v, _ := protowire.ConsumeBytes(b[tn:n])
			routes = append(routes, v)
		} else {
			shellEnc = append(shellEnc, b[:n]...)
		}
		b = b[n:]
	}
	shell := &routev3.VirtualHost{}
	if err := proto.Unmarshal(shellEnc, shell); err != nil {
		return s.fail(fmt.Errorf("virtual host: %w", err))
	}
	return s.withStreamedField(shell, vhostRoutesField, len(routes), depth, func(a *container) error {
		for _, b := range routes {
			a.elem()
			r := &routev3.Route{}
			if err := proto.Unmarshal(b, r); err != nil {
				return s.fail(fmt.Errorf("virtual host %q: route: %w", shell.GetName(), err))
			}
			v, err := s.render(r, true)
			if err != nil {
				return s.fail(err)
			}
			s.value(v, depth+2)
			if s.err != nil {
				return s.err
			}
		}
		return nil
	})
}

// withStreamedField writes the fresh message shell (which lacks field fd)
// as an object at depth, with fd's n elements written by elems at fd's
// place in protojson's order; fd is left out when n is 0, as protojson
// leaves out empty lists.
func (s *streamer) withStreamedField(shell proto.Message, fd protoreflect.FieldDescriptor, n, depth int, elems func(*container) error) error {
	v, err := s.render(shell, true)
	if err != nil {
		return s.fail(err)
	}
	obj, ok := v.(Object)
	if !ok {
		return s.fail(fmt.Errorf("%T rendered as %T, not an object", shell, v))
	}
	fields := shell.ProtoReflect().Descriptor().Fields()
	at := len(obj)
	for i, m := range obj {
		if f := fields.ByJSONName(m.Key); f == nil || f.Index() > fd.Index() {
			at = i // extensions ("[name]") come last
			break
		}
	}
	o := s.beginObject(depth)
	for i := 0; i <= len(obj); i++ {
		if i == at && n > 0 {
			o.key(fd.JSONName())
			a := s.beginArray(depth + 1)
			if err := elems(a); err != nil {
				return err
			}
			a.end()
		}
		if i < len(obj) {
			o.key(obj[i].Key)
			s.value(obj[i].Value, depth+1)
		}
	}
	o.end()
	return s.err
}

// splitRepeated returns the values of the length-delimited fields numbered
// num in the encoding b, or false if b holds other fields.
func splitRepeated(b []byte, num protowire.Number) ([][]byte, bool) {
	var out [][]byte
	for len(b) > 0 {
		n, typ, tn := protowire.ConsumeTag(b)
		if tn < 0 || n != num || typ != protowire.BytesType {
			return nil, false
		}
		v, vn := protowire.ConsumeBytes(b[tn:])
		if vn < 0 {
			return nil, false
		}
		out = append(out, v)
		b = b[tn+vn:]
	}
	return out, true
}
