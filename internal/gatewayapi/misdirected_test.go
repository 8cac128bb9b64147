package gatewayapi

import (
	"strings"
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// TestMisdirectedVirtualHosts: the HTTPS chains of a port share one route
// table, each tagged with its listener; each virtual host belongs to the
// most specific listener covering it and answers 421 to the other
// listeners' chains (misdirected.go). The Gateway is the conformance
// suite's same-namespace-with-https-listener with the routes of
// HTTPRouteHTTPSListenerDetectMisdirectedRequests, plus a route of the
// wildcard listener naming a hostname that the more specific listener
// owns.
func TestMisdirectedVirtualHosts(t *testing.T) {
	gw := gateway("infra", "gw",
		httpsL("https", 443, "", "cert"),
		httpsL("https-with-hostname", 443, "second-example.org", "cert"),
		httpsL("https-with-wildcard-hostname", 443, "*.wildcard.org", "cert"),
		httpsL("https-with-hostname-matching-wildcard", 443, "fourth-example.wildcard.org", "cert"),
		// Another port with one HTTPS listener: a table of its own, no tag.
		httpsL("alone", 8443, "alone.org", "cert"),
	)
	r1 := httpRoute("infra", "r1", []gwv1.ParentReference{sectionRef("gw", "https")}, []string{"example.org"}, prefixRule("/"))
	r2 := httpRoute("infra", "r2", []gwv1.ParentReference{sectionRef("gw", "https-with-hostname")}, nil, prefixRule("/"))
	r3 := httpRoute("infra", "r3", []gwv1.ParentReference{sectionRef("gw", "https-with-wildcard-hostname")}, nil, prefixRule("/"))
	r4 := httpRoute("infra", "r4", []gwv1.ParentReference{sectionRef("gw", "https-with-hostname-matching-wildcard")}, nil, prefixRule("/"))
	// Its fourth-example.wildcard.org is owned by the exact listener: not
	// served (the wildcard listener's routes never serve what the Host
	// selects another listener for).
	r5 := httpRoute("infra", "r5", []gwv1.ParentReference{sectionRef("gw", "https-with-wildcard-hostname")}, []string{"fourth-example.wildcard.org", "x.wildcard.org"}, prefixRule("/x"))
	r6 := httpRoute("infra", "r6", []gwv1.ParentReference{sectionRef("gw", "alone")}, nil, prefixRule("/"))
	res := translate(gw, r1, r2, r3, r4, r5, r6, service("infra", "web", 80), tlsSecret("infra", "cert"))
	g := irGateway(t, res, "infra", "gw")
	table := "*=421!* *.wildcard.org=421!*.wildcard.org,r3/0 example.org=421!*,r1/0 fourth-example.wildcard.org=421!fourth-example.wildcard.org,r4/0 " +
		"second-example.org=421!second-example.org,r2/0 x.wildcard.org=421!*.wildcard.org,r5/0,r3/0"
	want := map[string]string{
		"https-443/*":                           "* " + table,
		"https-443/*.wildcard.org":              "*.wildcard.org " + table,
		"https-443/fourth-example.wildcard.org": "fourth-example.wildcard.org " + table,
		"https-443/second-example.org":          "second-example.org " + table,
		"https-8443/alone.org":                  " alone.org=r6/0",
	}
	for _, l := range g.Listeners {
		for _, fc := range l.FilterChains {
			got := fc.ListenerTag + " " + strings.Join(vhostTable(fc), " ")
			if got != want[fc.Name] {
				t.Errorf("%s:\n got %q\nwant %q", fc.Name, got, want[fc.Name])
			}
			delete(want, fc.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("missing chains %v", want)
	}

	// Listeners without routes whose hostnames a less specific listener
	// covers still own them (empty virtual hosts: 404 on their own chain,
	// 421 on the others).
	res = translate(gw, r1, service("infra", "web", 80), tlsSecret("infra", "cert"))
	fc := irListener(t, irGateway(t, res, "infra", "gw"), "https-443").FilterChains[0]
	if got, want := strings.Join(vhostTable(fc), " "), "*=421!* *.wildcard.org=421!*.wildcard.org example.org=421!*,r1/0 "+
		"fourth-example.wildcard.org=421!fourth-example.wildcard.org second-example.org=421!second-example.org"; got != want {
		t.Errorf("without routes\n got %q\nwant %q", got, want)
	}
}
