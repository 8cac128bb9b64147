package resource

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/portico-dev/portico/api/v1alpha1"
)

// Warning is a document that was read but skipped, with where it was.
type Warning struct {
	File     string
	Document int // 0-based index of the YAML document in File
	Message  string
}

func (w Warning) String() string {
	return fmt.Sprintf("%s: document %d: %s", w.File, w.Document, w.Message)
}

// LoadError is a file that could not be read or parsed. Nothing of a load
// that returns one should be used.
type LoadError struct {
	File     string
	Document int
	Err      error
}

func (e *LoadError) Error() string {
	if e.Document < 0 {
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s: document %d: %v", e.File, e.Document, e.Err)
}

func (e *LoadError) Unwrap() error { return e.Err }

// Load reads every path (a file, or a directory walked for *.yaml, *.yml and
// *.json files in lexical order) into a new built Snapshot. Unknown kinds are
// skipped and reported as warnings; unparseable YAML, or a document of a
// known kind that does not decode, is a *LoadError naming the file.
func Load(paths ...string) (*Snapshot, []Warning, error) {
	files, err := expand(paths)
	if err != nil {
		return nil, nil, err
	}
	s := New()
	var warnings []Warning
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, &LoadError{File: f, Document: -1, Err: err}
		}
		w, err := s.AddYAML(f, data)
		if err != nil {
			return nil, nil, err
		}
		warnings = append(warnings, w...)
	}
	return s.Build(), warnings, nil
}

func expand(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, &LoadError{File: p, Document: -1, Err: err}
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != p && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if IsManifest(path) {
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			return nil, &LoadError{File: p, Document: -1, Err: err}
		}
		sort.Strings(found)
		files = append(files, found...)
	}
	return files, nil
}

// IsManifest reports whether a file name looks like a manifest the loader reads.
func IsManifest(path string) bool {
	base := filepath.Base(path)
	if strings.HasPrefix(base, ".") {
		return false
	}
	switch strings.ToLower(filepath.Ext(base)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// AddYAML decodes a multi-document YAML stream into the snapshot, which
// must not be shared yet (call Build afterwards). file is used in messages
// only.
func (s *Snapshot) AddYAML(file string, data []byte) ([]Warning, error) {
	reader := utilyaml.NewYAMLReader(bufioReader(data))
	var warnings []Warning
	for i := 0; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return warnings, nil
		}
		if err != nil {
			return nil, &LoadError{File: file, Document: i, Err: err}
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			i--
			continue
		}
		w, err := s.addDocument(doc)
		if err != nil {
			return nil, &LoadError{File: file, Document: i, Err: err}
		}
		if w != "" {
			warnings = append(warnings, Warning{File: file, Document: i, Message: w})
		}
	}
}

// addDocument decodes one document. It returns a warning for a document it
// skips, and an error for one it cannot parse.
func (s *Snapshot) addDocument(doc []byte) (string, error) {
	var tm struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return "", err
	}
	if tm.Kind == "" || tm.APIVersion == "" {
		return "", errors.New("document has no apiVersion or kind")
	}
	if tm.Kind == "List" && tm.APIVersion == "v1" {
		var list struct {
			Items []map[string]any `json:"items"`
		}
		if err := yaml.Unmarshal(doc, &list); err != nil {
			return "", err
		}
		var warns []string
		for i, item := range list.Items {
			b, err := yaml.Marshal(item)
			if err != nil {
				return "", fmt.Errorf("item %d: %w", i, err)
			}
			w, err := s.addDocument(b)
			if err != nil {
				return "", fmt.Errorf("item %d: %w", i, err)
			}
			if w != "" {
				warns = append(warns, fmt.Sprintf("item %d: %s", i, w))
			}
		}
		return strings.Join(warns, "; "), nil
	}
	if tm.Metadata.Name == "" {
		return "", fmt.Errorf("%s has no metadata.name", tm.Kind)
	}
	gv := tm.GroupVersionKind()
	switch {
	case gv.Group == gwv1.GroupName:
		return s.addGatewayAPI(gv.Version, tm.Kind, doc)
	case gv.Group == "" && gv.Version == "v1":
		switch tm.Kind {
		case "Service":
			return "", decodeInto(doc, &s.Services, &corev1.Service{}, true)
		case "Secret":
			return "", decodeInto(doc, &s.Secrets, &corev1.Secret{}, true)
		case "Namespace":
			ns := &corev1.Namespace{}
			if err := yaml.UnmarshalStrict(doc, ns); err != nil {
				return "", err
			}
			s.Namespaces.Set(ns.Name, ns)
			return "", nil
		}
	case gv.Group == discoveryv1.GroupName && gv.Version == "v1" && tm.Kind == "EndpointSlice":
		return "", decodeInto(doc, &s.EndpointSlices, &discoveryv1.EndpointSlice{}, true)
	case gv == v1alpha1.GroupVersion.WithKind(v1alpha1.Kind):
		return "", decodeInto(doc, &s.ProxyConfigs, &v1alpha1.ProxyConfig{}, true)
	}
	return fmt.Sprintf("unknown kind %s %q, skipped", tm.APIVersion+"/"+tm.Kind, tm.Metadata.Name), nil
}

func (s *Snapshot) addGatewayAPI(version, kind string, doc []byte) (string, error) {
	known := map[string][]string{
		"GatewayClass":   {"v1", "v1beta1"},
		"Gateway":        {"v1", "v1beta1"},
		"ListenerSet":    {"v1"},
		"HTTPRoute":      {"v1", "v1beta1"},
		"GRPCRoute":      {"v1"},
		"ReferenceGrant": {"v1", "v1beta1"},
	}
	ok := false
	for _, v := range known[kind] {
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
		s.GatewayClasses.Set(gc.Name, gc)
		return "", nil
	case "Gateway":
		return "", decodeInto(doc, &s.Gateways, &gwv1.Gateway{}, true)
	case "ListenerSet":
		return "", decodeInto(doc, &s.ListenerSets, &gwv1.ListenerSet{}, true)
	case "HTTPRoute":
		return "", decodeInto(doc, &s.HTTPRoutes, &gwv1.HTTPRoute{}, true)
	case "GRPCRoute":
		return "", decodeInto(doc, &s.GRPCRoutes, &gwv1.GRPCRoute{}, true)
	default: // ReferenceGrant
		return "", decodeInto(doc, &s.ReferenceGrants, &gwv1beta1.ReferenceGrant{}, true)
	}
}

// namespaced is an object with ObjectMeta.
type namespaced interface {
	GetNamespace() string
	SetNamespace(string)
	GetName() string
}

// decodeInto strictly decodes doc into obj and stores it in m; objects with
// no namespace are put in "default", as kubectl would.
func decodeInto[T namespaced](doc []byte, m *Map[Key, T], obj T, defaultNS bool) error {
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return err
	}
	if obj.GetNamespace() == "" && defaultNS {
		obj.SetNamespace(metav1.NamespaceDefault)
	}
	m.Set(Key{Namespace: obj.GetNamespace(), Name: obj.GetName()}, obj)
	return nil
}

func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) == 0 || t[0] == '#' || string(t) == "---" {
			continue
		}
		out = append(out, line)
	}
	return bytes.Join(out, []byte("\n"))
}
