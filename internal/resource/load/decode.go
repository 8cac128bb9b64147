package load

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/api/v1alpha1"
	"github.com/portico-dev/portico/internal/resource"
)

// snapshot and keyed name the types the decoder fills.
type (
	snapshot     = resource.Snapshot
	keyed[T any] = resource.Map[resource.Key, T]
)

// maxItemWarnings bounds the item warnings joined into the warning of one
// List document.
const maxItemWarnings = 10

// decoder decodes the documents of one file. Decoded objects are staged in
// pending and added to the snapshot only once the whole file decoded, so
// that a file that fails adds nothing.
type decoder struct {
	limits  Limits
	objects int
	pending []func(*snapshot)
}

// typeMeta is what every document is first decoded into, from JSON.
type typeMeta struct {
	APIVersion looseString `json:"apiVersion"`
	Kind       looseString `json:"kind"`
	Metadata   struct {
		Name      looseString `json:"name"`
		Namespace looseString `json:"namespace"`
	} `json:"metadata"`
}

func (tm *typeMeta) gvk() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(string(tm.APIVersion), string(tm.Kind))
}

// looseString is a string that a number or boolean also decodes into (as
// its text), as the typed decoding of YAML scalars into strings does: the
// type peek must not refuse what the typed decoding accepts.
type looseString string

func (s *looseString) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) == 0 || string(b) == "null":
		return nil
	case b[0] == '"':
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = looseString(v)
	case b[0] == '{' || b[0] == '[':
		return errors.New("want a string")
	default:
		*s = looseString(b)
	}
	return nil
}

// document decodes one document: a YAML document of the file (depth 0) or
// an item of a List nested depth deep (JSON). Each is parsed once into
// JSON for its kind (a List's items are then streamed from that JSON) and
// once into its typed object. It returns a warning for a document it
// skips, and an error for one it cannot parse or that exceeds a limit (a
// *RefusedError).
func (d *decoder) document(doc []byte, depth int) (string, error) {
	j := doc
	if depth == 0 {
		if n := int64(len(doc)); n > d.limits.MaxDocumentBytes {
			return "", refused(ReasonTooLarge, "document of %d bytes is larger than the limit of %d bytes "+
				"(split it into several documents)", n, d.limits.MaxDocumentBytes)
		}
		var err error
		if j, err = yaml.YAMLToJSON(doc); err != nil {
			return "", err
		}
	}
	var tm typeMeta
	if err := json.Unmarshal(j, &tm); err != nil {
		return "", fmt.Errorf("cannot read apiVersion, kind and metadata: %w", err)
	}
	if tm.Kind == "" || tm.APIVersion == "" {
		return "", errors.New("document has no apiVersion or kind")
	}
	if tm.Kind == "List" && tm.APIVersion == "v1" {
		if depth >= d.limits.MaxListDepth {
			return "", refused(ReasonListTooDeep, "Lists nested more than %d deep", d.limits.MaxListDepth)
		}
		return d.list(j, depth+1)
	}
	d.objects++
	if d.objects > d.limits.MaxObjects {
		return "", refused(ReasonTooManyObjects, "more than %d objects in one file", d.limits.MaxObjects)
	}
	if tm.Metadata.Name == "" {
		return "", fmt.Errorf("%s has no metadata.name", tm.Kind)
	}
	return d.object(&tm, doc)
}

// list decodes the items of a List given as JSON, streaming them one at a
// time; depth is the depth of its items.
func (d *decoder) list(j []byte, depth int) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(j))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", errors.New("a List must be an object")
	}
	var warns []string
	skipped := 0
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return "", err
		}
		if key != "items" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return "", err
			}
			continue
		}
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		if tok == nil { // items: null
			continue
		}
		if tok != json.Delim('[') {
			return "", errors.New("the items of a List must be a list")
		}
		for i := 0; dec.More(); i++ {
			var item json.RawMessage
			if err := dec.Decode(&item); err != nil {
				return "", fmt.Errorf("item %d: %w", i, err)
			}
			w, err := d.document(item, depth)
			if err != nil {
				return "", fmt.Errorf("item %d: %w", i, err)
			}
			switch {
			case w == "":
			case len(warns) < maxItemWarnings:
				warns = append(warns, fmt.Sprintf("item %d: %s", i, w))
			default:
				skipped++
			}
		}
		if _, err := dec.Token(); err != nil { // ]
			return "", err
		}
	}
	if skipped > 0 {
		warns = append(warns, fmt.Sprintf("and %d more items skipped", skipped))
	}
	return strings.Join(warns, "; "), nil
}

// object decodes a document of a kind other than List.
func (d *decoder) object(tm *typeMeta, doc []byte) (string, error) {
	gv := tm.gvk()
	switch {
	case gv.Group == gwv1.GroupName:
		return d.gatewayAPI(gv.Version, string(tm.Kind), doc)
	case gv.Group == "" && gv.Version == "v1":
		switch tm.Kind {
		case "Service":
			return "", stage(d, doc, func(s *snapshot) *keyed[*corev1.Service] { return &s.Services }, &corev1.Service{})
		case "Secret":
			return "", stage(d, doc, func(s *snapshot) *keyed[*corev1.Secret] { return &s.Secrets }, &corev1.Secret{})
		case "Namespace":
			ns := &corev1.Namespace{}
			if err := yaml.UnmarshalStrict(doc, ns); err != nil {
				return "", err
			}
			d.pending = append(d.pending, func(s *snapshot) { s.Namespaces.Set(ns.Name, ns) })
			return "", nil
		}
	case gv.Group == discoveryv1.GroupName && gv.Version == "v1" && tm.Kind == "EndpointSlice":
		return "", stage(d, doc, func(s *snapshot) *keyed[*discoveryv1.EndpointSlice] { return &s.EndpointSlices }, &discoveryv1.EndpointSlice{})
	case gv == v1alpha1.GroupVersion.WithKind(v1alpha1.Kind):
		return "", stage(d, doc, func(s *snapshot) *keyed[*v1alpha1.ProxyConfig] { return &s.ProxyConfigs }, &v1alpha1.ProxyConfig{})
	}
	return fmt.Sprintf("unknown kind %s/%s %q, skipped", tm.APIVersion, tm.Kind, tm.Metadata.Name), nil
}

// gatewayAPIVersions are the versions of the Gateway API kinds read.
var gatewayAPIVersions = map[string][]string{
	"GatewayClass":   {"v1", "v1beta1"},
	"Gateway":        {"v1", "v1beta1"},
	"ListenerSet":    {"v1"},
	"HTTPRoute":      {"v1", "v1beta1"},
	"GRPCRoute":      {"v1"},
	"TLSRoute":       {"v1"},
	"TCPRoute":       {"v1"},
	"UDPRoute":       {"v1"},
	"ReferenceGrant": {"v1", "v1beta1"},
}

func (d *decoder) gatewayAPI(version, kind string, doc []byte) (string, error) {
	ok := false
	for _, v := range gatewayAPIVersions[kind] {
		ok = ok || v == version
	}
	if !ok {
		return fmt.Sprintf("unknown kind %s/%s/%s, skipped", gwv1.GroupName, version, kind), nil
	}
	// The served versions of these kinds share one schema, so the v1 types
	// decode all of them.
	switch kind {
	case "GatewayClass":
		gc := &gwv1.GatewayClass{}
		if err := yaml.UnmarshalStrict(doc, gc); err != nil {
			return "", err
		}
		d.pending = append(d.pending, func(s *snapshot) { s.GatewayClasses.Set(gc.Name, gc) })
		return "", nil
	case "Gateway":
		return "", stage(d, doc, func(s *snapshot) *keyed[*gwv1.Gateway] { return &s.Gateways }, &gwv1.Gateway{})
	case "ListenerSet":
		return "", stage(d, doc, func(s *snapshot) *keyed[*gwv1.ListenerSet] { return &s.ListenerSets }, &gwv1.ListenerSet{})
	case "HTTPRoute":
		return "", stage(d, doc, func(s *snapshot) *keyed[*gwv1.HTTPRoute] { return &s.HTTPRoutes }, &gwv1.HTTPRoute{})
	case "GRPCRoute":
		return "", stage(d, doc, func(s *snapshot) *keyed[*gwv1.GRPCRoute] { return &s.GRPCRoutes }, &gwv1.GRPCRoute{})
	case "TLSRoute":
		return "", stage(d, doc, func(s *snapshot) *keyed[*gwv1.TLSRoute] { return &s.TLSRoutes }, &gwv1.TLSRoute{})
	case "TCPRoute":
		return "", stage(d, doc, func(s *snapshot) *keyed[*gwv1.TCPRoute] { return &s.TCPRoutes }, &gwv1.TCPRoute{})
	case "UDPRoute":
		return "", stage(d, doc, func(s *snapshot) *keyed[*gwv1.UDPRoute] { return &s.UDPRoutes }, &gwv1.UDPRoute{})
	default: // ReferenceGrant
		return "", stage(d, doc, func(s *snapshot) *keyed[*gwv1beta1.ReferenceGrant] { return &s.ReferenceGrants }, &gwv1beta1.ReferenceGrant{})
	}
}

// namespaced is an object with ObjectMeta.
type namespaced interface {
	GetNamespace() string
	SetNamespace(string)
	GetName() string
}

// stage strictly decodes doc into obj and stages it for the map m of the
// snapshot; objects with no namespace are put in "default", as kubectl
// would.
func stage[T namespaced](d *decoder, doc []byte, m func(*snapshot) *keyed[T], obj T) error {
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return err
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace(metav1.NamespaceDefault)
	}
	k := resource.Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	d.pending = append(d.pending, func(s *snapshot) { m(s).Set(k, obj) })
	return nil
}
