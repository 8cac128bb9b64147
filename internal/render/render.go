// Package render turns a translation (object statuses and per-Gateway Envoy
// resources) into the JSON / YAML document printed by `portico translate` and
// served on the admin debug endpoints.
//
// The document is
//
//	{"statuses":[{"apiVersion":…,"kind":…,"metadata":{…},"status":{…}}],
//	 "xds":[{"gateway":"ns/name","version":…,"listeners":[…],"routes":[…],
//	         "clusters":[…],"endpoints":[…],"secrets":[…]}]}
//
// Top-level keys keep this order (structs, not maps). Every Envoy resource is
// its protojson form (lowerCamel field names) re-parsed into an Object that
// keeps protojson's field order, so that the same input always renders to the
// same bytes, in JSON and YAML alike.
package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	yamlv2 "go.yaml.in/yaml/v2"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/portico-dev/portico/internal/gatewayapi"
	"github.com/portico-dev/portico/internal/xds/translate"
)

// APIVersion is the apiVersion given to every status object.
const APIVersion = "gateway.networking.k8s.io/v1"

// Redacted replaces secret material when Options.RedactSecrets is set.
const Redacted = "[redacted]"

// Options control rendering.
type Options struct {
	// RedactSecrets replaces private keys and other secret material of
	// Secret resources with Redacted. Certificates are kept.
	RedactSecrets bool
}

// Output is the rendered translation.
type Output struct {
	Statuses []StatusObject `json:"statuses"`
	XDS      []GatewayXDS   `json:"xds"`
}

// StatusOutput is the document printed for `--output status`.
type StatusOutput struct {
	Statuses []StatusObject `json:"statuses"`
}

// XDSOutput is the document printed for `--output xds`.
type XDSOutput struct {
	XDS []GatewayXDS `json:"xds"`
}

// StatusObject is the desired status of one object, shaped like the object.
type StatusObject struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   Metadata `json:"metadata"`
	// Status is the typed status of Kind (a *gwv1.GatewayStatus, …).
	Status any `json:"status"`
}

// Metadata identifies the object of a StatusObject.
type Metadata struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// GatewayXDS is the Envoy configuration of one Gateway. Each resource is an
// Object in protojson's field order.
type GatewayXDS struct {
	Gateway   string `json:"gateway"`
	Version   string `json:"version"`
	Listeners []any  `json:"listeners"`
	Routes    []any  `json:"routes"`
	Clusters  []any  `json:"clusters"`
	Endpoints []any  `json:"endpoints"`
	Secrets   []any  `json:"secrets"`
	// ScopedRoutes and HostScopeFilters are those of route tables in
	// scoped form (translate's scoped.go), when there are some.
	ScopedRoutes     []any `json:"scopedRoutes,omitempty"`
	HostScopeFilters []any `json:"hostScopeFilters,omitempty"`
}

// Build renders res (which may be nil) and xds. Statuses keep the order of
// res.StatusSet (by kind, namespace and name); gateways are sorted by name.
func Build(res *gatewayapi.Result, xds []*translate.Resources, opts Options) (*Output, error) {
	out := &Output{Statuses: Statuses(res), XDS: []GatewayXDS{}}
	for _, r := range xds {
		if r == nil {
			continue
		}
		g, err := GatewayXDSOf(r, opts)
		if err != nil {
			return nil, err
		}
		out.XDS = append(out.XDS, g)
	}
	sort.SliceStable(out.XDS, func(i, j int) bool { return out.XDS[i].Gateway < out.XDS[j].Gateway })
	return out, nil
}

// Statuses renders the statuses of res (nil gives an empty, non-nil list).
func Statuses(res *gatewayapi.Result) []StatusObject {
	objs := []StatusObject{}
	if res == nil {
		return objs
	}
	objs = slices.Grow(objs, res.StatusSet.Len())
	for _, s := range res.StatusSet.All() {
		objs = append(objs, StatusObject{
			APIVersion: APIVersion,
			Kind:       s.Kind.String(),
			Metadata:   Metadata{Namespace: s.Namespace, Name: s.Name},
			Status:     typedStatus(s),
		})
	}
	return objs
}

// typedStatus returns the status field matching s.Kind, or an empty object.
func typedStatus(s *gatewayapi.Status) any {
	switch {
	case s.GatewayClass != nil:
		return s.GatewayClass
	case s.Gateway != nil:
		return s.Gateway
	case s.ListenerSet != nil:
		return s.ListenerSet
	case s.Route != nil:
		return s.Route
	case s.Policy != nil:
		return s.Policy
	}
	return struct{}{}
}

// GatewayXDSOf renders the resources of one Gateway.
func GatewayXDSOf(r *translate.Resources, opts Options) (GatewayXDS, error) {
	g := GatewayXDS{Gateway: r.Gateway, Version: r.Version}
	var err error
	if g.Listeners, err = resources(r.Listeners, opts); err != nil {
		return GatewayXDS{}, fmt.Errorf("gateway %s: listeners: %w", r.Gateway, err)
	}
	if g.Routes, err = resources(r.Routes(), opts); err != nil {
		return GatewayXDS{}, fmt.Errorf("gateway %s: routes: %w", r.Gateway, err)
	}
	if g.Clusters, err = resources(r.Clusters, opts); err != nil {
		return GatewayXDS{}, fmt.Errorf("gateway %s: clusters: %w", r.Gateway, err)
	}
	if g.Endpoints, err = resources(r.Endpoints, opts); err != nil {
		return GatewayXDS{}, fmt.Errorf("gateway %s: endpoints: %w", r.Gateway, err)
	}
	if g.Secrets, err = resources(r.Secrets, opts); err != nil {
		return GatewayXDS{}, fmt.Errorf("gateway %s: secrets: %w", r.Gateway, err)
	}
	if len(r.ScopedRoutes) > 0 {
		if g.ScopedRoutes, err = resources(r.ScopedRoutes, opts); err != nil {
			return GatewayXDS{}, fmt.Errorf("gateway %s: scoped routes: %w", r.Gateway, err)
		}
	}
	if len(r.HostScopeFilters) > 0 {
		if g.HostScopeFilters, err = resources(r.HostScopeFilters, opts); err != nil {
			return GatewayXDS{}, fmt.Errorf("gateway %s: host-scope filters: %w", r.Gateway, err)
		}
	}
	return g, nil
}

var marshalOptions = protojson.MarshalOptions{} // lowerCamel names, no defaults

func resources(rs []types.Resource, opts Options) ([]any, error) {
	out := make([]any, 0, len(rs))
	for _, r := range rs {
		v, err := Resource(r, opts)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Resource renders one Envoy resource as an Object.
func Resource(r types.Resource, opts Options) (any, error) {
	if r == nil {
		return nil, nil
	}
	r, err := translate.Decode(r)
	if err != nil {
		return nil, err
	}
	var m proto.Message = r
	if opts.RedactSecrets {
		m = redact(r)
	}
	b, err := marshalOptions.Marshal(m)
	if err != nil {
		return nil, err
	}
	// protojson's whitespace is deliberately unstable; re-parsing it into
	// generic values (keeping protojson's field order) makes the re-encoded
	// bytes deterministic.
	v, err := parseJSON(b)
	if err != nil {
		return nil, fmt.Errorf("re-parse %T: %w", r, err)
	}
	return v, nil
}

// JSON is the document, indented by two spaces, with a trailing newline.
func (o *Output) JSON() ([]byte, error) { return JSON(o) }

// YAML is the document as YAML.
func (o *Output) YAML() ([]byte, error) { return YAML(o) }

// JSON encodes any rendered value (Output, StatusOutput, …) as indented JSON
// with a trailing newline. HTML characters are not escaped.
func JSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// YAML encodes any rendered value as YAML, converted from its JSON form
// with the JSON key order kept (sigs.k8s.io/yaml's JSONToYAML would sort the
// keys of the top-level structs).
func YAML(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var doc yamlv2.MapSlice
	if err := yamlv2.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	return yamlv2.Marshal(doc)
}
