package load

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/internal/resource"
)

// experimentalGroup is the API group of the Gateway API's experimental
// kinds (XBackendTrafficPolicy, XMesh, …).
const experimentalGroup = "gateway.networking.x-k8s.io"

// maxItemWarnings bounds the item warnings joined into the warning of one
// List document.
const maxItemWarnings = 10

// decoder decodes the documents of one file. Decoded objects are staged in
// pending and added to the snapshot only once the whole file decoded, so
// that a file that fails adds nothing.
type decoder struct {
	limits  Limits
	objects int
	pending []staged
}

// staged is an object decoded, to add to the snapshot.
type staged struct {
	kind resource.Kind
	key  resource.Key
	obj  resource.Object
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

// object decodes a document of a kind other than List: of a kind and
// version the descriptors of package resource say the loader reads. The
// versions of one kind share one schema, so the kind's type decodes all of
// them.
func (d *decoder) object(tm *typeMeta, doc []byte) (string, error) {
	gv := tm.gvk()
	kind, ok := resource.KindNamed(gv.Group, gv.Kind)
	if !ok || !slices.Contains(resource.KindOf(kind).LoadVersions, gv.Version) {
		if gv.Group == gwv1.GroupName || gv.Group == experimentalGroup {
			// A Gateway API kind Portico does not implement (or a
			// version it does not read): said plainly, as it changes
			// nothing that is served.
			return fmt.Sprintf("Gateway API kind %s/%s %q is not implemented by Portico (version %s): it is not applied to traffic or status, skipped",
				gv.Group, gv.Kind, tm.Metadata.Name, gv.Version), nil
		}
		return fmt.Sprintf("unknown kind %s/%s %q, skipped", tm.APIVersion, tm.Kind, tm.Metadata.Name), nil
	}
	desc := resource.KindOf(kind)
	obj := desc.New()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return "", err
	}
	k := resource.Key{Name: obj.GetName()}
	if !desc.ClusterScoped {
		if obj.GetNamespace() == "" { // as kubectl would
			obj.SetNamespace(metav1.NamespaceDefault)
		}
		k.Namespace = obj.GetNamespace()
	}
	d.pending = append(d.pending, staged{kind, k, obj})
	return "", nil
}
