package inputs

import (
	"testing"

	"github.com/portico-dev/portico/internal/resource"
	"github.com/portico-dev/portico/internal/resource/load"
)

type records []string

func (r *records) Read(owner, ref resource.Ref) {
	*r = append(*r, owner.Kind.String()+" "+owner.Key.Name+" read "+ref.Kind.String()+" "+ref.Key.Namespace+"/"+ref.Key.Name)
}

// grant is a ReferenceGrant of namespace b named name, in YAML.
func grant(name string) string {
	return `apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {namespace: b, name: ` + name + `}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: a}]
  to: [{group: "", kind: Service}]
`
}

// A Reader For an owner records its reads as the owner's and leaves the
// Reader it came from as it was; the Readers of a translation share one
// ReferenceGrant index.
func TestForBindsAnOwner(t *testing.T) {
	snap := resource.New()
	if _, err := load.AddYAML(snap, "grants.yaml", []byte(grant("two")+"---\n"+grant("one"))); err != nil {
		t.Fatal(err)
	}
	snap.Build()
	var rec records
	root := New(snap, &rec)
	gw := resource.Ref{Kind: resource.KindGateway, Key: resource.Key{Namespace: "a", Name: "gw"}}
	route := resource.Ref{Kind: resource.KindHTTPRoute, Key: resource.Key{Namespace: "a", Name: "r"}}
	byGateway, byRoute := root.For(gw), root.For(route)

	root.Service(resource.Key{Namespace: "a", Name: "unowned"})
	byGateway.Secret(resource.Key{Namespace: "a", Name: "cert"})
	first := byRoute.ReferenceGrants("b")
	byGateway.Service(resource.Key{Namespace: "b", Name: "svc"})
	again := byGateway.ReferenceGrants("b")
	root.For(resource.Ref{}).Namespace("a")

	want := records{
		"Gateway gw read Secret a/cert",
		"HTTPRoute r read ReferenceGrant b/",
		"Gateway gw read Service b/svc",
		"Gateway gw read ReferenceGrant b/",
	}
	if len(rec) != len(want) {
		t.Fatalf("records = %q, want %q", rec, want)
	}
	for i := range want {
		if rec[i] != want[i] {
			t.Errorf("record %d = %q, want %q", i, rec[i], want[i])
		}
	}
	if len(first) != 2 || first[0].Name != "one" || first[1].Name != "two" {
		t.Fatalf("ReferenceGrants(b) = %v, want one and two, sorted", first)
	}
	if &first[0] != &again[0] {
		t.Error("the Readers of a translation built the ReferenceGrant index twice")
	}
	if root.owner != (resource.Ref{}) || byGateway.owner != gw {
		t.Errorf("owners changed: root %v, byGateway %v", root.owner, byGateway.owner)
	}
}

// BackendTLSPolicies are found by the Service they target (core Services
// only, each policy once however many of its targetRefs name the Service)
// and recorded by namespace; the CA sources are recorded by key.
func TestBackendTLSPoliciesByService(t *testing.T) {
	policy := func(name string, targets string) string {
		return `apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {namespace: b, name: ` + name + `}
spec:
  targetRefs: ` + targets + `
  validation: {hostname: x.example, wellKnownCACertificates: System}
`
	}
	docs := policy("two", `[{group: "", kind: Service, name: svc, sectionName: https}, {group: "", kind: Service, name: svc, sectionName: alt}]`) +
		"---\n" + policy("one", `[{group: "", kind: Service, name: svc}, {group: "", kind: Service, name: other}]`) +
		"---\n" + policy("foreign", `[{group: example.com, kind: Service, name: svc}]`)
	snap := resource.New()
	if _, err := load.AddYAML(snap, "policies.yaml", []byte(docs)); err != nil {
		t.Fatal(err)
	}
	snap.Build()
	var rec records
	route := resource.Ref{Kind: resource.KindHTTPRoute, Key: resource.Key{Namespace: "a", Name: "r"}}
	r := New(snap, &rec).For(route)
	got := r.BackendTLSPolicies(resource.Key{Namespace: "b", Name: "svc"})
	if len(got) != 2 || got[0].Name != "one" || got[1].Name != "two" {
		t.Fatalf("BackendTLSPolicies(b/svc) = %v, want one and two", got)
	}
	if o := r.BackendTLSPolicies(resource.Key{Namespace: "b", Name: "other"}); len(o) != 1 || o[0].Name != "one" {
		t.Errorf("BackendTLSPolicies(b/other) = %v", o)
	}
	if o := r.BackendTLSPolicies(resource.Key{Namespace: "a", Name: "svc"}); len(o) != 0 {
		t.Errorf("BackendTLSPolicies(a/svc) = %v, want none (policies target their own namespace)", o)
	}
	r.ConfigMap(resource.Key{Namespace: "b", Name: "ca"})
	r.ClusterTrustBundle("bundle")
	want := records{
		"HTTPRoute r read BackendTLSPolicy b/",
		"HTTPRoute r read BackendTLSPolicy b/",
		"HTTPRoute r read BackendTLSPolicy a/",
		"HTTPRoute r read ConfigMap b/ca",
		"HTTPRoute r read ClusterTrustBundle /bundle",
	}
	if len(rec) != len(want) {
		t.Fatalf("records = %q, want %q", rec, want)
	}
	for i := range want {
		if rec[i] != want[i] {
			t.Errorf("record %d = %q, want %q", i, rec[i], want[i])
		}
	}
}
