package statustree

import (
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestMentions(t *testing.T) {
	for _, tc := range []struct {
		text, id string
		want     bool
	}{
		{"Service team/app does not exist", "team/app", true},
		{"Service team/app2 does not exist", "team/app", false},
		{"Service myteam/app does not exist", "team/app", false},
		{"backendRefs[0]: Service team/app has no UDP port 53", "team/app", true},
		{"use Service team/app", "team/app", true},
		{"Service team/app.x, then team/app", "team/app", true},
		{"", "team/app", false},
	} {
		if got := mentions(tc.text, tc.id); got != tc.want {
			t.Errorf("mentions(%q, %q) = %v, want %v", tc.text, tc.id, got, tc.want)
		}
	}
}

func TestHostnamesMatch(t *testing.T) {
	for _, tc := range []struct {
		listener string
		route    []gwv1.Hostname
		want     bool
	}{
		{"", []gwv1.Hostname{"a.example.com"}, true},
		{"a.example.com", nil, true},
		{"*.example.com", []gwv1.Hostname{"a.example.com"}, true},
		{"*.example.com", []gwv1.Hostname{"a.b.example.com"}, true},
		{"*.example.com", []gwv1.Hostname{"example.com"}, false},
		{"a.example.com", []gwv1.Hostname{"*.example.com"}, true},
		{"A.Example.com", []gwv1.Hostname{"a.example.com"}, true},
		{"a.example.com", []gwv1.Hostname{"b.example.com", "c.example.com"}, false},
		{"*.example.com", []gwv1.Hostname{"*.a.example.com"}, true},
		{"*.example.com", []gwv1.Hostname{"*.example.org"}, false},
	} {
		if got := hostnamesMatch(tc.listener, tc.route); got != tc.want {
			t.Errorf("hostnamesMatch(%q, %q) = %v, want %v", tc.listener, tc.route, got, tc.want)
		}
	}
}

func TestConditionProblem(t *testing.T) {
	for _, tc := range []struct {
		c    Condition
		want bool
	}{
		{Condition{Type: "Accepted", Status: "True"}, false},
		{Condition{Type: "Accepted", Status: "False"}, true},
		{Condition{Type: "Accepted", Status: "Unknown"}, true},
		{Condition{Type: "Conflicted", Status: "False"}, false},
		{Condition{Type: "Conflicted", Status: "True"}, true},
		{Condition{Type: "PartiallyInvalid", Status: "True"}, true},
		{Condition{Type: "Accepted", Status: "True", Stale: true}, true},
	} {
		if got := tc.c.Problem(); got != tc.want {
			t.Errorf("%+v.Problem() = %v, want %v", tc.c, got, tc.want)
		}
	}
}
