package gatewayapi

import (
	"strings"
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestMisdirectedVirtualHosts: the route table of each HTTPS chain answers
// 421 for the hostnames other listeners of the port own, and keeps the
// virtual hosts of its own routes that its listener owns (misdirected.go).
// The Gateway is the conformance suite's same-namespace-with-https-listener
// with the routes of HTTPRouteHTTPSListenerDetectMisdirectedRequests, plus
// a route of the wildcard listener naming a hostname that the more
// specific listener owns.
func TestMisdirectedVirtualHosts(t *testing.T) {
	gw := gateway("infra", "gw",
		httpsL("https", 443, "", "cert"),
		httpsL("https-with-hostname", 443, "second-example.org", "cert"),
		httpsL("https-with-wildcard-hostname", 443, "*.wildcard.org", "cert"),
		httpsL("https-with-hostname-matching-wildcard", 443, "fourth-example.wildcard.org", "cert"),
		// Another port with one HTTPS listener: no 421 at all.
		httpsL("alone", 8443, "alone.org", "cert"),
	)
	r1 := httpRoute("infra", "r1", []gwv1.ParentReference{sectionRef("gw", "https")}, []string{"example.org"}, prefixRule("/"))
	r2 := httpRoute("infra", "r2", []gwv1.ParentReference{sectionRef("gw", "https-with-hostname")}, nil, prefixRule("/"))
	r3 := httpRoute("infra", "r3", []gwv1.ParentReference{sectionRef("gw", "https-with-wildcard-hostname")}, nil, prefixRule("/"))
	r4 := httpRoute("infra", "r4", []gwv1.ParentReference{sectionRef("gw", "https-with-hostname-matching-wildcard")}, nil, prefixRule("/"))
	// Its fourth-example.wildcard.org is owned by the exact listener: left
	// out of the wildcard chain, where it would answer what the Host
	// selects another listener for.
	r5 := httpRoute("infra", "r5", []gwv1.ParentReference{sectionRef("gw", "https-with-wildcard-hostname")}, []string{"fourth-example.wildcard.org", "x.wildcard.org"}, prefixRule("/x"))
	r6 := httpRoute("infra", "r6", []gwv1.ParentReference{sectionRef("gw", "alone")}, nil, prefixRule("/"))
	res := translate(gw, r1, r2, r3, r4, r5, r6, service("infra", "web", 80), tlsSecret("infra", "cert"))
	g := irGateway(t, res, "infra", "gw")
	var got []string
	for _, l := range g.Listeners {
		for _, fc := range l.FilterChains {
			got = append(got, fc.Name+": "+strings.Join(vhostTable(fc), " "))
		}
	}
	want := []string{
		"https-443/*: *.wildcard.org=421 example.org=r1/0 fourth-example.wildcard.org=421 second-example.org=421",
		// r5's x.wildcard.org stays (the wildcard listener owns it), its
		// fourth-example.wildcard.org does not.
		"https-443/*.wildcard.org: *=421 *.wildcard.org=r3/0 fourth-example.wildcard.org=421 second-example.org=421 x.wildcard.org=r5/0,r3/0",
		"https-443/fourth-example.wildcard.org: *=421 *.wildcard.org=421 fourth-example.wildcard.org=r4/0 second-example.org=421",
		"https-443/second-example.org: *=421 *.wildcard.org=421 fourth-example.wildcard.org=421 second-example.org=r2/0",
		"https-8443/alone.org: alone.org=r6/0",
	}
	if !equalStrings(got, want) {
		t.Errorf("filter chains\n got %q\nwant %q", got, want)
	}

	// Without routes on a listener whose hostname another listener's 421
	// host covers, its own hostname still gets a virtual host (404).
	res = translate(gw, r1, service("infra", "web", 80), tlsSecret("infra", "cert"))
	for _, fc := range irListener(t, irGateway(t, res, "infra", "gw"), "https-443").FilterChains {
		if fc.Name == "https-443/fourth-example.wildcard.org" {
			if got, want := strings.Join(vhostTable(fc), " "), "*=421 *.wildcard.org=421 fourth-example.wildcard.org= second-example.org=421"; got != want {
				t.Errorf("chain without routes\n got %q\nwant %q", got, want)
			}
		}
	}
}
