package refs

import (
	"slices"
	"testing"

	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestParentOf(t *testing.T) {
	for _, c := range []struct {
		name string
		ref  gwv1.ParentReference
		want Parent
	}{
		{"defaults: Gateway of the route's namespace",
			gwv1.ParentReference{Name: "gw"},
			Parent{Object: Object{GroupGateway, KindGateway, "apps", "gw"}}},
		{"empty namespace is the route's",
			gwv1.ParentReference{Name: "gw", Namespace: ptr.To(gwv1.Namespace(""))},
			Parent{Object: Object{GroupGateway, KindGateway, "apps", "gw"}}},
		{"explicit namespace",
			gwv1.ParentReference{Name: "gw", Namespace: ptr.To(gwv1.Namespace("infra"))},
			Parent{Object: Object{GroupGateway, KindGateway, "infra", "gw"}}},
		{"ListenerSet",
			gwv1.ParentReference{Name: "ls", Kind: ptr.To(gwv1.Kind(KindListenerSet))},
			Parent{Object: Object{GroupGateway, KindListenerSet, "apps", "ls"}}},
		{"explicit core group is kept, not defaulted",
			gwv1.ParentReference{Name: "svc", Group: ptr.To(gwv1.Group("")), Kind: ptr.To(gwv1.Kind("Service"))},
			Parent{Object: Object{"", "Service", "apps", "svc"}}},
		{"sectionName and port",
			gwv1.ParentReference{Name: "gw", SectionName: ptr.To(gwv1.SectionName("https")), Port: ptr.To(gwv1.PortNumber(443))},
			Parent{Object: Object{GroupGateway, KindGateway, "apps", "gw"}, SectionName: "https", Port: 443, HasPort: true}},
		{"empty sectionName is unset",
			gwv1.ParentReference{Name: "gw", SectionName: ptr.To(gwv1.SectionName(""))},
			Parent{Object: Object{GroupGateway, KindGateway, "apps", "gw"}}},
		{"port 0 is set, not any port",
			gwv1.ParentReference{Name: "gw", Port: ptr.To(gwv1.PortNumber(0))},
			Parent{Object: Object{GroupGateway, KindGateway, "apps", "gw"}, HasPort: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ParentOf("apps", c.ref); got != c.want {
				t.Errorf("ParentOf = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestParentKinds(t *testing.T) {
	gw := ParentOf("ns", gwv1.ParentReference{Name: "a"})
	ls := ParentOf("ns", gwv1.ParentReference{Name: "a", Kind: ptr.To(gwv1.Kind(KindListenerSet))})
	other := ParentOf("ns", gwv1.ParentReference{Name: "a", Group: ptr.To(gwv1.Group("example.com")), Kind: ptr.To(gwv1.Kind(KindGateway))})
	if !gw.IsGateway() || gw.IsListenerSet() {
		t.Errorf("%+v: want a Gateway", gw)
	}
	if !ls.IsListenerSet() || ls.IsGateway() {
		t.Errorf("%+v: want a ListenerSet", ls)
	}
	if other.IsGateway() || other.IsListenerSet() {
		t.Errorf("%+v: a Gateway of another group is neither", other)
	}
	got := ParentsOf("ns", []gwv1.ParentReference{{Name: "a"}, {Name: "a", Kind: ptr.To(gwv1.Kind(KindListenerSet))}})
	if !slices.Equal(got, []Parent{gw, ls}) {
		t.Errorf("ParentsOf = %+v", got)
	}
}

// TestParentIdentity: two parentRefs name the same parent and section when
// their ParentOf are equal, defaults applied.
func TestParentIdentity(t *testing.T) {
	ns := func(s string) *gwv1.Namespace { n := gwv1.Namespace(s); return &n }
	for _, c := range []struct {
		name string
		a, b gwv1.ParentReference
		want bool
	}{
		{"defaults equal explicit values",
			gwv1.ParentReference{Name: "gw"},
			gwv1.ParentReference{Name: "gw", Group: ptr.To(gwv1.Group(GroupGateway)), Kind: ptr.To(gwv1.Kind(KindGateway)), Namespace: ns("apps")},
			true},
		{"other namespace",
			gwv1.ParentReference{Name: "gw"}, gwv1.ParentReference{Name: "gw", Namespace: ns("infra")}, false},
		{"other kind",
			gwv1.ParentReference{Name: "gw"}, gwv1.ParentReference{Name: "gw", Kind: ptr.To(gwv1.Kind(KindListenerSet))}, false},
		{"other section",
			gwv1.ParentReference{Name: "gw", SectionName: ptr.To(gwv1.SectionName("a"))},
			gwv1.ParentReference{Name: "gw", SectionName: ptr.To(gwv1.SectionName("b"))}, false},
		{"empty section is no section",
			gwv1.ParentReference{Name: "gw", SectionName: ptr.To(gwv1.SectionName(""))}, gwv1.ParentReference{Name: "gw"}, true},
		{"port 0 is not unset",
			gwv1.ParentReference{Name: "gw", Port: ptr.To(gwv1.PortNumber(0))}, gwv1.ParentReference{Name: "gw"}, false},
		{"same port",
			gwv1.ParentReference{Name: "gw", Port: ptr.To(gwv1.PortNumber(80))}, gwv1.ParentReference{Name: "gw", Port: ptr.To(gwv1.PortNumber(80))}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ParentOf("apps", c.a) == ParentOf("apps", c.b); got != c.want {
				t.Errorf("same parent = %v, want %v", got, c.want)
			}
		})
	}
}

func TestGatewayOf(t *testing.T) {
	for _, c := range []struct {
		name string
		ref  gwv1.ParentGatewayReference
		want Object
		gw   bool
	}{
		{"defaults", gwv1.ParentGatewayReference{Name: "gw"}, Object{GroupGateway, KindGateway, "apps", "gw"}, true},
		{"namespace", gwv1.ParentGatewayReference{Name: "gw", Namespace: ptr.To(gwv1.Namespace("infra"))}, Object{GroupGateway, KindGateway, "infra", "gw"}, true},
		{"empty namespace", gwv1.ParentGatewayReference{Name: "gw", Namespace: ptr.To(gwv1.Namespace(""))}, Object{GroupGateway, KindGateway, "apps", "gw"}, true},
		{"other kind", gwv1.ParentGatewayReference{Name: "gw", Kind: ptr.To(gwv1.Kind("Other"))}, Object{GroupGateway, "Other", "apps", "gw"}, false},
		{"other group", gwv1.ParentGatewayReference{Name: "gw", Group: ptr.To(gwv1.Group("example.com"))}, Object{"example.com", KindGateway, "apps", "gw"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := GatewayOf("apps", c.ref)
			if got != c.want || got.IsGateway() != c.gw {
				t.Errorf("GatewayOf = %+v (Gateway %v), want %+v (%v)", got, got.IsGateway(), c.want, c.gw)
			}
		})
	}
}

func TestEntryOf(t *testing.T) {
	base := Entry{Group: GroupGateway, Kind: KindGateway, Name: "gw"}
	for _, c := range []struct {
		name string
		ref  gwv1.ParentReference
		want Entry
	}{
		{"schema defaults", gwv1.ParentReference{Name: "gw"}, base},
		{"explicit defaults are the same entry",
			gwv1.ParentReference{Name: "gw", Group: ptr.To(gwv1.Group(GroupGateway)), Kind: ptr.To(gwv1.Kind(KindGateway))}, base},
		{"namespace as written, not resolved",
			gwv1.ParentReference{Name: "gw", Namespace: ptr.To(gwv1.Namespace("apps"))},
			Entry{Group: GroupGateway, Kind: KindGateway, Namespace: "apps", Name: "gw"}},
		{"unset and empty namespace are one entry (the CRD's rule)",
			gwv1.ParentReference{Name: "gw", Namespace: ptr.To(gwv1.Namespace(""))}, base},
		{"unset and empty sectionName are one entry",
			gwv1.ParentReference{Name: "gw", SectionName: ptr.To(gwv1.SectionName(""))}, base},
		{"unset port and port 0 are one entry",
			gwv1.ParentReference{Name: "gw", Port: ptr.To(gwv1.PortNumber(0))}, base},
		{"section and port",
			gwv1.ParentReference{Name: "gw", SectionName: ptr.To(gwv1.SectionName("http")), Port: ptr.To(gwv1.PortNumber(80))},
			Entry{Group: GroupGateway, Kind: KindGateway, Name: "gw", SectionName: "http", Port: 80}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := EntryOf(c.ref); got != c.want {
				t.Errorf("EntryOf = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestStoredParentRef(t *testing.T) {
	in := gwv1.ParentReference{Name: "gw", SectionName: ptr.To(gwv1.SectionName("http"))}
	got := StoredParentRef(in)
	if in.Group != nil || in.Kind != nil {
		t.Fatalf("argument modified: %+v", in)
	}
	if got.Group == nil || *got.Group != GroupGateway || got.Kind == nil || *got.Kind != KindGateway {
		t.Errorf("defaults not applied: %+v", got)
	}
	if got.Namespace != nil || got.Port != nil || got.SectionName == nil || *got.SectionName != "http" || got.Name != "gw" {
		t.Errorf("other fields changed: %+v", got)
	}
	*got.SectionName = "changed"
	if *in.SectionName != "http" {
		t.Errorf("result shares pointers with its argument")
	}
	kept := StoredParentRef(gwv1.ParentReference{Name: "s", Group: ptr.To(gwv1.Group("")), Kind: ptr.To(gwv1.Kind("Service"))})
	if *kept.Group != "" || *kept.Kind != "Service" {
		t.Errorf("set fields replaced: %+v", kept)
	}
	if EntryOf(got) != EntryOf(StoredParentRef(got)) || EntryOf(in) != EntryOf(StoredParentRef(in)) {
		t.Errorf("the stored form is another entry")
	}
}

func TestBackendOf(t *testing.T) {
	for _, c := range []struct {
		name string
		ref  gwv1.BackendObjectReference
		want Backend
		svc  bool
	}{
		{"defaults: a core Service of the route's namespace",
			gwv1.BackendObjectReference{Name: "svc"}, Backend{Object: Object{"", KindService, "apps", "svc"}}, true},
		{"port", gwv1.BackendObjectReference{Name: "svc", Port: ptr.To(gwv1.PortNumber(8080))},
			Backend{Object: Object{"", KindService, "apps", "svc"}, Port: 8080, HasPort: true}, true},
		{"explicit core group and kind",
			gwv1.BackendObjectReference{Name: "svc", Group: ptr.To(gwv1.Group("")), Kind: ptr.To(gwv1.Kind("Service"))},
			Backend{Object: Object{"", KindService, "apps", "svc"}}, true},
		{"other namespace", gwv1.BackendObjectReference{Name: "svc", Namespace: ptr.To(gwv1.Namespace("other"))},
			Backend{Object: Object{"", KindService, "other", "svc"}}, true},
		{"empty namespace is the route's", gwv1.BackendObjectReference{Name: "svc", Namespace: ptr.To(gwv1.Namespace(""))},
			Backend{Object: Object{"", KindService, "apps", "svc"}}, true},
		{"other kind", gwv1.BackendObjectReference{Name: "x", Kind: ptr.To(gwv1.Kind("Other"))},
			Backend{Object: Object{"", "Other", "apps", "x"}}, false},
		{"other group, default kind", gwv1.BackendObjectReference{Name: "x", Group: ptr.To(gwv1.Group("example.com"))},
			Backend{Object: Object{"example.com", KindService, "apps", "x"}}, false},
		{"port 0 is set", gwv1.BackendObjectReference{Name: "svc", Port: ptr.To(gwv1.PortNumber(0))},
			Backend{Object: Object{"", KindService, "apps", "svc"}, HasPort: true}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := BackendOf("apps", c.ref)
			if got != c.want || got.IsService() != c.svc {
				t.Errorf("BackendOf = %+v (Service %v), want %+v (%v)", got, got.IsService(), c.want, c.svc)
			}
		})
	}
}

func TestCertificateOf(t *testing.T) {
	for _, c := range []struct {
		name   string
		ref    gwv1.SecretObjectReference
		want   Object
		secret bool
	}{
		{"defaults: a core Secret of the listener's namespace", gwv1.SecretObjectReference{Name: "tls"}, Object{"", KindSecret, "infra", "tls"}, true},
		{"explicit core group and kind",
			gwv1.SecretObjectReference{Name: "tls", Group: ptr.To(gwv1.Group("")), Kind: ptr.To(gwv1.Kind("Secret"))}, Object{"", KindSecret, "infra", "tls"}, true},
		{"other namespace", gwv1.SecretObjectReference{Name: "tls", Namespace: ptr.To(gwv1.Namespace("certs"))}, Object{"", KindSecret, "certs", "tls"}, true},
		{"empty namespace", gwv1.SecretObjectReference{Name: "tls", Namespace: ptr.To(gwv1.Namespace(""))}, Object{"", KindSecret, "infra", "tls"}, true},
		{"other kind", gwv1.SecretObjectReference{Name: "tls", Kind: ptr.To(gwv1.Kind("ConfigMap"))}, Object{"", "ConfigMap", "infra", "tls"}, false},
		{"other group", gwv1.SecretObjectReference{Name: "tls", Group: ptr.To(gwv1.Group("example.com"))}, Object{"example.com", KindSecret, "infra", "tls"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := CertificateOf("infra", c.ref)
			if got != c.want || got.IsSecret() != c.secret {
				t.Errorf("CertificateOf = %+v (Secret %v), want %+v (%v)", got, got.IsSecret(), c.want, c.secret)
			}
		})
	}
}

func TestLocalOf(t *testing.T) {
	got := LocalOf("apps", gwv1.LocalObjectReference{Group: "", Kind: "ConfigMap", Name: "ca"})
	if want := (Object{"", "ConfigMap", "apps", "ca"}); got != want {
		t.Errorf("LocalOf = %+v, want %+v", got, want)
	}
}

func TestTargetOf(t *testing.T) {
	target := func(group, kind, name string, section *string) gwv1.LocalPolicyTargetReferenceWithSectionName {
		r := gwv1.LocalPolicyTargetReferenceWithSectionName{LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{
			Group: gwv1.Group(group), Kind: gwv1.Kind(kind), Name: gwv1.ObjectName(name)}}
		if section != nil {
			s := gwv1.SectionName(*section)
			r.SectionName = &s
		}
		return r
	}
	for _, c := range []struct {
		name    string
		ref     gwv1.LocalPolicyTargetReferenceWithSectionName
		want    Target
		svc     bool
		covers  []string
		ignores []string
	}{
		{"a whole Service, in the policy's namespace", target("", "Service", "svc", nil),
			Target{Object: Object{"", KindService, "apps", "svc"}}, true, []string{"", "http", "grpc"}, nil},
		{"one port of a Service", target("", "Service", "svc", ptr.To("http")),
			Target{Object: Object{"", KindService, "apps", "svc"}, SectionName: "http"}, true, []string{"http"}, []string{"", "grpc"}},
		{"empty sectionName is the whole object", target("", "Service", "svc", ptr.To("")),
			Target{Object: Object{"", KindService, "apps", "svc"}}, true, []string{"", "x"}, nil},
		{"no default group: a Gateway target names its group", target(GroupGateway, "Gateway", "gw", ptr.To("https")),
			Target{Object: Object{GroupGateway, KindGateway, "apps", "gw"}, SectionName: "https"}, false, []string{"https"}, []string{"http"}},
		{"a Service of another group is not a Service", target("example.com", "Service", "svc", nil),
			Target{Object: Object{"example.com", KindService, "apps", "svc"}}, false, []string{""}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := TargetOf("apps", c.ref)
			if got != c.want || got.IsService() != c.svc {
				t.Errorf("TargetOf = %+v (Service %v), want %+v (%v)", got, got.IsService(), c.want, c.svc)
			}
			for _, s := range c.covers {
				if !got.Covers(s) {
					t.Errorf("does not cover section %q", s)
				}
			}
			for _, s := range c.ignores {
				if got.Covers(s) {
					t.Errorf("covers section %q", s)
				}
			}
		})
	}
	all := TargetsOf("apps", []gwv1.LocalPolicyTargetReferenceWithSectionName{target("", "Service", "a", nil), target("", "Service", "b", ptr.To("p"))})
	if len(all) != 2 || all[0].Name != "a" || all[1].SectionName != "p" {
		t.Errorf("TargetsOf = %+v", all)
	}
}

func TestObjectID(t *testing.T) {
	if got := (Object{Namespace: "ns", Name: "n"}).ID(); got != "ns/n" {
		t.Errorf("ID = %q", got)
	}
}
