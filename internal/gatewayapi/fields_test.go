package gatewayapi

import (
	"fmt"
	"github.com/portico-dev/portico/internal/resource"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/yaml"
)

// The guard of the issue "nothing silently dropped": every spec field of the
// Gateway API CRDs Portico ships is translated, rejected with the condition
// the spec names, or listed with a reason in testdata/crd-fields.yaml.

const (
	crdDir     = "../../charts/portico/crds"
	crdGlob    = "gateway.networking.k8s.io_*.yaml"
	fieldsFile = "testdata/crd-fields.yaml"
	strictEnv  = "PORTICO_FIELDS_STRICT"
)

// Dispositions of crd-fields.yaml entries (see its header).
const (
	dispHandled         = "handled"
	dispRejected        = "rejected"
	dispIgnored         = "ignored"
	dispUnsupportedKind = "unsupported-kind"
	dispTodoDropped     = "todo-dropped"
)

// decodedSpecs are the spec types Portico decodes each kind it reads into
// (resource/load.go, provider/kube): a CRD field they lack is dropped on
// decoding, before any translation could see it.
var decodedSpecs = map[string]reflect.Type{
	resource.KindGatewayClass.String():     reflect.TypeFor[gwv1.GatewayClassSpec](),
	resource.KindGateway.String():          reflect.TypeFor[gwv1.GatewaySpec](),
	resource.KindListenerSet.String():      reflect.TypeFor[gwv1.ListenerSetSpec](),
	resource.KindHTTPRoute.String():        reflect.TypeFor[gwv1.HTTPRouteSpec](),
	resource.KindGRPCRoute.String():        reflect.TypeFor[gwv1.GRPCRouteSpec](),
	resource.KindTLSRoute.String():         reflect.TypeFor[gwv1.TLSRouteSpec](),
	resource.KindTCPRoute.String():         reflect.TypeFor[gwv1.TCPRouteSpec](),
	resource.KindUDPRoute.String():         reflect.TypeFor[gwv1.UDPRouteSpec](),
	"ReferenceGrant":                       reflect.TypeFor[gwv1beta1.ReferenceGrantSpec](),
	resource.KindBackendTLSPolicy.String(): reflect.TypeFor[gwv1.BackendTLSPolicySpec](),
}

// knownReasons are the condition reasons of the Gateway API that a
// rejection can name.
var knownReasons = func() map[string]bool {
	m := map[string]bool{}
	for _, r := range []string{
		string(gwv1.GatewayClassReasonInvalidParameters), string(gwv1.GatewayClassReasonUnsupported),
		string(gwv1.GatewayClassReasonUnsupportedVersion), string(gwv1.GatewayReasonInvalid),
		string(gwv1.GatewayReasonInvalidParameters), string(gwv1.GatewayReasonUnsupportedAddress),
		string(gwv1.GatewayReasonAddressNotUsable), string(gwv1.GatewayReasonListenersNotValid),
		string(gwv1.GatewayReasonInvalidClientCertificateRef), string(gwv1.GatewayReasonRefNotPermitted),
		string(gwv1.ListenerReasonHostnameConflict), string(gwv1.ListenerReasonProtocolConflict),
		string(gwv1.ListenerReasonPortUnavailable), string(gwv1.ListenerReasonUnsupportedProtocol),
		string(gwv1.ListenerReasonUnsupportedValue), string(gwv1.ListenerReasonNoValidCACertificate),
		string(gwv1.ListenerReasonInvalidCertificateRef), string(gwv1.ListenerReasonInvalidRouteKinds),
		string(gwv1.ListenerReasonRefNotPermitted), string(gwv1.ListenerReasonInvalidCACertificateRef),
		string(gwv1.ListenerReasonInvalidCACertificateKind), string(gwv1.ListenerReasonInvalid),
		string(gwv1.ListenerSetReasonNotAllowed), string(gwv1.ListenerSetReasonListenersNotValid),
		string(gwv1.ListenerSetReasonInvalid), string(gwv1.ListenerEntryReasonListenerConflict),
		string(gwv1.ListenerEntryReasonTooManyListeners), string(gwv1.RouteReasonNotAllowedByListeners),
		string(gwv1.RouteReasonNoMatchingListenerHostname), string(gwv1.RouteReasonNoMatchingParent),
		string(gwv1.RouteReasonUnsupportedValue), string(gwv1.RouteReasonIncompatibleFilters),
		string(gwv1.RouteReasonRefNotPermitted), string(gwv1.RouteReasonInvalidKind),
		string(gwv1.RouteReasonBackendNotFound), string(gwv1.RouteReasonUnsupportedProtocol),
		string(gwv1.PolicyReasonInvalid), string(gwv1.PolicyReasonConflicted),
		string(gwv1.PolicyReasonTargetNotFound), string(gwv1.BackendTLSPolicyReasonNoValidCACertificate),
		string(gwv1.BackendTLSPolicyReasonInvalidCACertificateRef), string(gwv1.BackendTLSPolicyReasonInvalidKind),
	} {
		m[r] = true
	}
	return m
}()

// crdFieldPaths returns the kind of a CRD and the paths of the spec fields
// of its served versions, sorted and deduplicated.
func crdFieldPaths(data []byte) (string, []string, error) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return "", nil, err
	}
	kind := crd.Spec.Names.Kind
	if kind == "" {
		return "", nil, fmt.Errorf("CRD %q has no spec.names.kind", crd.Name)
	}
	set := map[string]bool{}
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return "", nil, fmt.Errorf("%s %s has no openAPIV3Schema", kind, v.Name)
		}
		spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
		if !ok {
			return "", nil, fmt.Errorf("%s %s has no spec in its schema", kind, v.Name)
		}
		walkSchema(kind+".spec", &spec, set)
	}
	return kind, sortedSet(set), nil
}

// walkSchema adds to out the path of every property under s: "[]" stands
// for array items, "{}" for map values (additionalProperties).
func walkSchema(prefix string, s *apiextensionsv1.JSONSchemaProps, out map[string]bool) {
	for name, p := range s.Properties {
		path := prefix + "." + name
		out[path] = true
		walkSchema(path, &p, out)
	}
	if s.Items != nil {
		if s.Items.Schema != nil {
			walkSchema(prefix+"[]", s.Items.Schema, out)
		}
		for i := range s.Items.JSONSchemas {
			walkSchema(prefix+"[]", &s.Items.JSONSchemas[i], out)
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		walkSchema(prefix+"{}", s.AdditionalProperties.Schema, out)
	}
}

// loadCRDFields reads every Gateway API CRD of dir: the paths of each kind,
// recorded once.
func loadCRDFields(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, crdGlob))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no %s in %s", crdGlob, dir)
	}
	set := map[string]bool{}
	kinds := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		kind, paths, err := crdFieldPaths(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		if prev, dup := kinds[kind]; dup {
			return nil, fmt.Errorf("kind %s is defined by %s and %s", kind, prev, f)
		}
		kinds[kind] = f
		for _, p := range paths {
			set[p] = true
		}
	}
	return sortedSet(set), nil
}

// fieldCheck is the comparison of the schema paths with the entries.
type fieldCheck struct {
	Missing []string // schema paths without an entry
	Stale   []string // entries naming no schema path
	Invalid []string // malformed entries, with why
	Todo    []string // todo-dropped paths, with their entry
	// Counts counts the schema paths by disposition.
	Counts map[string]int
}

var goFileRE = regexp.MustCompile(`[\w./-]+\.go\b`)

// checkFields compares the schema paths with the entries of crd-fields.yaml;
// fileOK tells whether a file an entry names exists.
func checkFields(paths []string, entries map[string]string, fileOK func(string) bool) fieldCheck {
	c := fieldCheck{Counts: map[string]int{}}
	disp := map[string]string{}
	for _, key := range sortedEntryKeys(entries) {
		d, err := parseEntry(key, entries[key], fileOK)
		if err != nil {
			c.Invalid = append(c.Invalid, fmt.Sprintf("%s: %v", key, err))
			continue
		}
		disp[key] = d
	}
	inSchema := make(map[string]bool, len(paths))
	used := map[string]bool{}
	for _, p := range paths {
		inSchema[p] = true
		var prefixes []string
		for key := range entries {
			if base, ok := strings.CutSuffix(key, "*"); ok && strings.HasPrefix(p, base) {
				prefixes = append(prefixes, key)
			}
		}
		sort.Strings(prefixes)
		_, exact := entries[p]
		switch {
		case exact && len(prefixes) > 0:
			c.Invalid = append(c.Invalid, fmt.Sprintf("%s: also covered by %s", p, strings.Join(prefixes, ", ")))
		case len(prefixes) > 1:
			c.Invalid = append(c.Invalid, fmt.Sprintf("%s: covered by %s", p, strings.Join(prefixes, ", ")))
		}
		key := p
		if !exact {
			if len(prefixes) == 0 {
				c.Missing = append(c.Missing, p)
				continue
			}
			key = prefixes[0]
		}
		used[key] = true
		d, ok := disp[key]
		if !ok {
			continue // invalid, reported
		}
		c.Counts[d]++
		if d == dispTodoDropped {
			c.Todo = append(c.Todo, p+": "+entries[key])
		}
	}
	for _, key := range sortedEntryKeys(entries) {
		if !used[key] && !inSchema[key] {
			c.Stale = append(c.Stale, key)
		}
	}
	return c
}

// parseEntry validates one entry and returns its disposition.
func parseEntry(key, val string, fileOK func(string) bool) (string, error) {
	kind, _, _ := strings.Cut(key, ".")
	if !strings.HasPrefix(key, kind+".spec.") {
		return "", fmt.Errorf("path must start with <Kind>.spec.")
	}
	d, detail, ok := strings.Cut(val, ": ")
	if !ok || strings.TrimSpace(detail) == "" {
		return "", fmt.Errorf("%q: want \"<disposition>: <detail>\"", val)
	}
	if strings.HasSuffix(key, "*") && (d != dispUnsupportedKind || key != kind+".spec.*") {
		return "", fmt.Errorf("a prefix entry must be <Kind>.spec.* with disposition %s", dispUnsupportedKind)
	}
	// locations checks the files named in a location.
	locations := func(loc string) error {
		files := goFileRE.FindAllString(loc, -1)
		if len(files) == 0 {
			return fmt.Errorf("%s: %q names no .go file", d, loc)
		}
		for _, f := range files {
			if !fileOK(f) {
				return fmt.Errorf("%s: file %s does not exist", d, f)
			}
		}
		return nil
	}
	// reason splits "<Reason>; <rest>" and checks the reason.
	reason := func() (string, error) {
		r, rest, ok := strings.Cut(detail, "; ")
		if !ok || strings.TrimSpace(rest) == "" {
			return "", fmt.Errorf("%s: want \"%s: <Reason>; <detail>\"", d, d)
		}
		if !knownReasons[r] {
			return "", fmt.Errorf("%s: %q is not a Gateway API condition reason", d, r)
		}
		return rest, nil
	}
	switch d {
	case dispHandled:
		return d, locations(detail)
	case dispRejected:
		rest, err := reason()
		if err != nil {
			return "", err
		}
		return d, locations(rest)
	case dispTodoDropped:
		_, err := reason()
		return d, err
	case dispIgnored:
		if len(strings.Fields(detail)) < 4 {
			return "", fmt.Errorf("ignored: %q is no justification", detail)
		}
		return d, nil
	case dispUnsupportedKind:
		k, rest, _ := strings.Cut(detail, "; ")
		if k != kind {
			return "", fmt.Errorf("unsupported-kind: names %q, the path is of kind %s", k, kind)
		}
		if strings.TrimSpace(rest) == "" {
			return "", fmt.Errorf("unsupported-kind: say how Portico reports the kind")
		}
		return d, nil
	}
	return "", fmt.Errorf("unknown disposition %q; want %s, %s, %s, %s or %s",
		d, dispHandled, dispRejected, dispIgnored, dispUnsupportedKind, dispTodoDropped)
}

// failures describes the problems that fail the guard; strict counts
// todo-dropped entries among them.
func (c fieldCheck) failures(strict bool) string {
	var b strings.Builder
	list := func(title string, items []string) {
		if len(items) == 0 {
			return
		}
		fmt.Fprintf(&b, "%s (%d):\n", title, len(items))
		for _, it := range items {
			fmt.Fprintf(&b, "\t%s\n", it)
		}
	}
	list("CRD fields without an entry in "+fieldsFile+" (translate or reject them, then add them)", c.Missing)
	list("entries of "+fieldsFile+" naming no field of the CRDs (stale: remove them)", c.Stale)
	list("invalid entries of "+fieldsFile, c.Invalid)
	if strict {
		list("fields silently dropped (todo-dropped, "+strictEnv+"=1)", c.Todo)
	}
	return b.String()
}

// goFieldGaps lists the paths of kinds Portico decodes that the Go types do
// not have.
func goFieldGaps(paths []string) []string {
	var out []string
	for _, p := range paths {
		kind, rest, _ := strings.Cut(p, ".spec.")
		typ, ok := decodedSpecs[kind]
		if !ok {
			continue
		}
		if err := goField(typ, rest); err != nil {
			out = append(out, fmt.Sprintf("%s: %v", p, err))
		}
	}
	return out
}

// goField follows a path below spec ("rules[].retry.codes") through the
// fields of t by their JSON names.
func goField(t reflect.Type, path string) error {
	for _, part := range strings.Split(path, ".") {
		name := strings.TrimRight(part, "[]{}")
		f, ok := jsonField(derefType(t), name)
		if !ok {
			return fmt.Errorf("%s has no field with JSON name %q", derefType(t), name)
		}
		t = f
		for suffix := part[len(name):]; suffix != ""; suffix = suffix[2:] {
			t = derefType(t)
			switch {
			case strings.HasPrefix(suffix, "[]") && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
			case strings.HasPrefix(suffix, "{}") && t.Kind() == reflect.Map:
			default:
				return fmt.Errorf("%s: %s is not a %s", part, t, suffix[:2])
			}
			t = t.Elem()
		}
	}
	return nil
}

func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// jsonField finds the field of struct t encoded as name, looking into
// inlined embedded structs.
func jsonField(t reflect.Type, name string) (reflect.Type, bool) {
	if t.Kind() != reflect.Struct {
		return nil, false
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" {
			if ft, ok := jsonField(derefType(f.Type), name); ok {
				return ft, true
			}
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			return f.Type, true
		}
	}
	return nil, false
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedEntryKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func loadFieldEntries(t *testing.T, file string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]string{}
	// Strict: a duplicated key is an error, not a silent override.
	if err := yaml.UnmarshalStrict(data, &entries); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return entries
}

// TestCRDFields fails when a spec field of the shipped Gateway API CRDs is
// neither translated nor rejected nor justified in crd-fields.yaml, or when
// that file is stale.
func TestCRDFields(t *testing.T) {
	paths, err := loadCRDFields(crdDir)
	if err != nil {
		t.Fatal(err)
	}
	entries := loadFieldEntries(t, fieldsFile)
	fileOK := func(f string) bool {
		st, err := os.Stat(filepath.FromSlash(f))
		return err == nil && !st.IsDir()
	}
	c := checkFields(paths, entries, fileOK)
	strict := os.Getenv(strictEnv) == "1"
	if msg := c.failures(strict); msg != "" {
		t.Error(msg)
	}
	if gaps := goFieldGaps(paths); len(gaps) > 0 {
		t.Errorf("CRD fields the Go types Portico decodes do not have; they are dropped on decoding (%d):\n\t%s",
			len(gaps), strings.Join(gaps, "\n\t"))
	}
	var counts []string
	for _, d := range []string{dispHandled, dispRejected, dispIgnored, dispUnsupportedKind, dispTodoDropped} {
		counts = append(counts, fmt.Sprintf("%s %d", d, c.Counts[d]))
	}
	t.Logf("%d CRD spec fields: %s", len(paths), strings.Join(counts, ", "))
	if len(c.Todo) > 0 && !strict {
		t.Logf("fields silently dropped (todo-dropped; %s=1 fails on them) (%d):\n\t%s",
			strictEnv, len(c.Todo), strings.Join(c.Todo, "\n\t"))
	}
}

// syntheticCRD has a served and an unserved version with different fields,
// a second served version with the same fields, a status, arrays of
// objects and of scalars, and a map of objects.
const syntheticCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              name: {type: string}
              rules:
                type: array
                items:
                  type: object
                  properties:
                    codes: {type: array, items: {type: integer}}
                    retry: {type: object, properties: {attempts: {type: integer}}}
              options:
                type: object
                additionalProperties: {type: object, properties: {value: {type: string}}}
          status: {type: object, properties: {conditions: {type: array}}}
  - name: v1beta1
    served: true
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {name: {type: string}}}}}}
  - name: v1alpha1
    served: false
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object, properties: {unserved: {type: string}}}}}}
`

// TestCRDFieldsGuard shows that the guard fails: for a field without an
// entry, for a stale entry and for malformed entries.
func TestCRDFieldsGuard(t *testing.T) {
	kind, paths, err := crdFieldPaths([]byte(syntheticCRD))
	if err != nil {
		t.Fatal(err)
	}
	wantPaths := []string{
		"Widget.spec.name",
		"Widget.spec.options",
		"Widget.spec.options{}.value",
		"Widget.spec.rules",
		"Widget.spec.rules[].codes",
		"Widget.spec.rules[].retry",
		"Widget.spec.rules[].retry.attempts",
	}
	if kind != "Widget" || !reflect.DeepEqual(paths, wantPaths) {
		t.Fatalf("crdFieldPaths = %s, %q; want Widget, %q", kind, paths, wantPaths)
	}
	fileOK := func(f string) bool { return f == "widget.go" }
	complete := map[string]string{
		"Widget.spec.name":                   "ignored: a free-text name for humans only",
		"Widget.spec.options":                "rejected: UnsupportedValue; widget.go options: refused",
		"Widget.spec.options{}.value":        "rejected: UnsupportedValue; widget.go options: refused with options",
		"Widget.spec.rules":                  "handled: widget.go rules",
		"Widget.spec.rules[].codes":          "handled: widget.go codes",
		"Widget.spec.rules[].retry":          "handled: widget.go retry",
		"Widget.spec.rules[].retry.attempts": "todo-dropped: UnsupportedValue; read nowhere, reject in widget.go",
	}
	c := checkFields(paths, complete, fileOK)
	if msg := c.failures(false); msg != "" {
		t.Fatalf("complete entries fail:\n%s", msg)
	}
	if len(c.Todo) != 1 || c.failures(true) == "" {
		t.Errorf("todo-dropped: Todo = %q, strict failures %q; want one, failing", c.Todo, c.failures(true))
	}
	want := map[string]int{dispHandled: 3, dispRejected: 2, dispIgnored: 1, dispTodoDropped: 1}
	if !reflect.DeepEqual(c.Counts, want) {
		t.Errorf("Counts = %v, want %v", c.Counts, want)
	}

	// A new field in the schema (attempts without entry) and a field gone
	// from it (Widget.spec.gone).
	entries := map[string]string{}
	for k, v := range complete {
		entries[k] = v
	}
	delete(entries, "Widget.spec.rules[].retry.attempts")
	entries["Widget.spec.gone"] = "handled: widget.go gone"
	c = checkFields(paths, entries, fileOK)
	if !reflect.DeepEqual(c.Missing, []string{"Widget.spec.rules[].retry.attempts"}) ||
		!reflect.DeepEqual(c.Stale, []string{"Widget.spec.gone"}) || len(c.Invalid) != 0 {
		t.Errorf("Missing = %q, Stale = %q, Invalid = %q; want the attempts field missing, gone stale", c.Missing, c.Stale, c.Invalid)
	}
	if msg := c.failures(false); !strings.Contains(msg, "Widget.spec.rules[].retry.attempts") || !strings.Contains(msg, "Widget.spec.gone") {
		t.Errorf("failures do not name the missing and stale paths:\n%s", msg)
	}

	// Malformed entries.
	for val, why := range map[string]string{
		"dropped: nobody reads it":                         "unknown disposition",
		"handled":                                          "no detail",
		"handled: somewhere":                               "no file",
		"handled: nowhere.go f":                            "file does not exist",
		"rejected: widget.go options":                      "no reason",
		"rejected: NotAReason; widget.go options":          "unknown reason",
		"todo-dropped: should be rejected":                 "no reason",
		"ignored: because":                                 "no justification",
		"unsupported-kind: Gadget; not watched, no status": "wrong kind",
	} {
		e := map[string]string{}
		for k, v := range complete {
			e[k] = v
		}
		e["Widget.spec.name"] = val
		if c := checkFields(paths, e, fileOK); len(c.Invalid) != 1 || !strings.HasPrefix(c.Invalid[0], "Widget.spec.name: ") {
			t.Errorf("%q (%s): Invalid = %q, want one entry", val, why, c.Invalid)
		}
	}

	// A prefix entry covers a whole unsupported kind; it is stale when it
	// covers nothing, and allowed for unsupported kinds only.
	kindEntry := "unsupported-kind: Widget; not watched, no status"
	c = checkFields(paths, map[string]string{"Widget.spec.*": kindEntry, "Gadget.spec.*": "unsupported-kind: Gadget; not watched"}, fileOK)
	if len(c.Missing) != 0 || !reflect.DeepEqual(c.Stale, []string{"Gadget.spec.*"}) || len(c.Invalid) != 0 || c.Counts[dispUnsupportedKind] != len(paths) {
		t.Errorf("prefix entries: Missing = %q, Stale = %q, Invalid = %q, Counts = %v", c.Missing, c.Stale, c.Invalid, c.Counts)
	}
	c = checkFields(paths, map[string]string{"Widget.spec.rules.*": "handled: widget.go rules"}, fileOK)
	if len(c.Invalid) == 0 {
		t.Errorf("a handled prefix entry is accepted")
	}
	e := map[string]string{"Widget.spec.*": kindEntry, "Widget.spec.name": "handled: widget.go name"}
	if c := checkFields(paths, e, fileOK); len(c.Invalid) != 1 {
		t.Errorf("a path covered twice: Invalid = %q, want one entry", c.Invalid)
	}

	// The Go type check finds a CRD field the decoded type lacks.
	if err := goField(reflect.TypeFor[gwv1.HTTPRouteSpec](), "rules[].retry.codes"); err != nil {
		t.Errorf("goField(rules[].retry.codes): %v", err)
	}
	if err := goField(reflect.TypeFor[gwv1.HTTPRouteSpec](), "parentRefs[].sectionName"); err != nil {
		t.Errorf("goField(parentRefs[].sectionName) (inlined CommonRouteSpec): %v", err)
	}
	if err := goField(reflect.TypeFor[gwv1.HTTPRouteSpec](), "rules[].retry.jitter"); err == nil {
		t.Errorf("goField(rules[].retry.jitter) found a field that does not exist")
	}
}
