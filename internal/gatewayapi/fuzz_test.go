package gatewayapi

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/resource"
	xdstranslate "github.com/portico-dev/portico/internal/xds/translate"
)

// FuzzTranslate mutates fields of a valid snapshot (hostnames, paths,
// regular expressions, ports, weights, header names, section names) and
// checks that Translate does not panic, that every HTTPRoute with a parentRef
// to a Gateway of ours has a status (the documented reason for having none
// is that no parentRef resolves to a parent of ours), and that the IR holds
// its invariants.
func FuzzTranslate(f *testing.F) {
	f.Add("*.example.com", "foo.example.com", "/api", "/v[0-9]+", int32(443), int32(80), int32(1), "x-tenant", "https", uint8(0))
	f.Add("", "", "/", ".*", int32(80), int32(80), int32(0), "Host", "", uint8(1))
	f.Add("example.com", "*.example.com", "//", "(", int32(0), int32(-1), int32(-5), ":path", "nope", uint8(2))
	f.Add("*", "10.0.0.1", "api", "(?=x)", int32(70000), int32(65536), int32(1<<30), "", "http", uint8(3))
	f.Add("FOO.example.com", "foo.example.com.", "/a/", `\`, int32(80), int32(8080), int32(2), "x y", "http", uint8(255))
	f.Add("app.example.com", "https://*.example.com", "/x", "/y", int32(80), int32(80), int32(3), "GET", "X-Token", uint8(128))
	f.Fuzz(func(t *testing.T, listenerHost, routeHost, path, regex string, port, backendPort, weight int32, header, section string, variant uint8) {
		snap := fuzzSnapshot(listenerHost, routeHost, path, regex, port, backendPort, weight, header, section, variant)
		res := Translate(snap, Options{ControllerName: testController})
		checkResult(t, snap, res)
		// The xDS stage takes whatever the Gateway API stage let through,
		// leaving nothing out: every check it makes was made first.
		for _, gw := range res.Gateways {
			x, err := xdstranslate.Translate(gw)
			if err != nil {
				t.Fatalf("the xDS stage failed Gateway %s: %v", gw.Key(), err)
			}
			if len(x.Problems) > 0 {
				t.Fatalf("the xDS stage left out %s (%s): the Gateway API stage let it through", x.Problems[0].What(), x.Problems[0].Err)
			}
		}
	})
}

func fuzzSnapshot(listenerHost, routeHost, path, regex string, port, backendPort, weight int32, header, section string, variant uint8) *resource.Snapshot {
	protocols := []gwv1.ProtocolType{gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType, gwv1.TLSProtocolType, "example.com/x"}
	l1 := gwv1.Listener{Name: "http", Port: port, Protocol: protocols[int(variant)%len(protocols)], Hostname: ptr(gwv1.Hostname(listenerHost))}
	if l1.Protocol == gwv1.HTTPSProtocolType {
		l1.TLS = &gwv1.ListenerTLSConfig{CertificateRefs: []gwv1.SecretObjectReference{{Name: "cert"}}}
	}
	l2 := httpsL("https", 443, listenerHost, "cert")
	gw := allowListeners(gateway("infra", "gw", allowAll(l1), allowAll(l2)), gwv1.NamespacesFromAll, nil)
	ls := listenerSet("apps", "ls", int(variant), "infra", "gw", httpL(section, port, routeHost))

	headerType := []gwv1.HeaderMatchType{gwv1.HeaderMatchExact, gwv1.HeaderMatchRegularExpression, "Other"}[int(variant)%3]
	match := gwv1.HTTPRouteMatch{
		Path:        &gwv1.HTTPPathMatch{Type: ptr([]gwv1.PathMatchType{gwv1.PathMatchPathPrefix, gwv1.PathMatchExact, gwv1.PathMatchRegularExpression}[int(variant)%3]), Value: ptr(path)},
		Headers:     []gwv1.HTTPHeaderMatch{{Type: &headerType, Name: gwv1.HTTPHeaderName(header), Value: regex}},
		QueryParams: []gwv1.HTTPQueryParamMatch{{Name: gwv1.HTTPHeaderName(header), Value: path}},
	}
	be := backend("web", backendPort)
	be.Weight = &weight
	rule := gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{match, regexMatch(regex)}, BackendRefs: []gwv1.HTTPBackendRef{be, backend("web", 80)}}
	if variant&4 != 0 {
		rule.Filters = []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwv1.HTTPURLRewriteFilter{
			Hostname: ptr(gwv1.PreciseHostname(routeHost)),
			Path:     &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier, ReplacePrefixMatch: ptr(path)}}}}
	}
	if variant&8 != 0 {
		rule.Filters = append(rule.Filters, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestMirror, RequestMirror: &gwv1.HTTPRequestMirrorFilter{
			BackendRef: gwv1.BackendObjectReference{Name: "web", Port: &backendPort}, Percent: &weight}})
	}
	if variant&16 != 0 {
		rule.Timeouts = &gwv1.HTTPRouteTimeouts{Request: ptr(gwv1.Duration(regex))}
	}
	if variant&64 != 0 {
		// Header modifiers with fuzzed names and values, on both sides.
		h := gwv1.HTTPHeader{Name: gwv1.HTTPHeaderName(header), Value: regex}
		rule.Filters = append(rule.Filters,
			gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterRequestHeaderModifier, RequestHeaderModifier: &gwv1.HTTPHeaderFilter{Set: []gwv1.HTTPHeader{h}, Remove: []string{path}}},
			gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterResponseHeaderModifier, ResponseHeaderModifier: &gwv1.HTTPHeaderFilter{Add: []gwv1.HTTPHeader{h}}})
	}
	if variant&128 != 0 {
		// A CORS policy and a backend's own URLRewrite (a split by path)
		// with fuzzed values.
		rule.Filters = append(rule.Filters, gwv1.HTTPRouteFilter{Type: gwv1.HTTPRouteFilterCORS, CORS: &gwv1.HTTPCORSFilter{
			AllowOrigins: []gwv1.CORSOrigin{gwv1.CORSOrigin(routeHost), gwv1.CORSOrigin("https://" + listenerHost)},
			AllowMethods: []gwv1.HTTPMethodWithWildcard{gwv1.HTTPMethodWithWildcard(header)}, AllowHeaders: []gwv1.HTTPHeaderName{gwv1.HTTPHeaderName(section)},
			MaxAge: weight, AllowCredentials: ptr(variant&1 == 0)}})
		rule.BackendRefs[0].Filters = []gwv1.HTTPRouteFilter{{Type: gwv1.HTTPRouteFilterURLRewrite, URLRewrite: &gwv1.HTTPURLRewriteFilter{
			Hostname: ptr(gwv1.PreciseHostname(listenerHost)),
			Path:     &gwv1.HTTPPathModifier{Type: gwv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr(regex)}}}}
	}
	if variant&32 != 0 {
		rule.Retry = &gwv1.HTTPRouteRetry{Codes: []gwv1.HTTPRouteRetryStatusCode{gwv1.HTTPRouteRetryStatusCode(backendPort)},
			Attempts: ptr(int(weight)), Backoff: ptr(gwv1.Duration(path))}
	}
	parents := []gwv1.ParentReference{
		{Name: "gw", Namespace: ptr(gwv1.Namespace("infra")), SectionName: ptr(gwv1.SectionName(section))},
		{Name: "gw", Namespace: ptr(gwv1.Namespace("infra")), Port: &port},
		{Kind: ptr(gwv1.Kind("ListenerSet")), Name: "ls", SectionName: ptr(gwv1.SectionName(section))},
	}
	r1 := httpRoute("apps", "r1", parents, []string{routeHost}, rule)
	r2 := httpRoute("apps", "r2", parents[:1], nil, gwv1.HTTPRouteRule{Matches: []gwv1.HTTPRouteMatch{match}})
	r3 := httpRoute("apps", "orphan", []gwv1.ParentReference{parent("missing")}, nil)
	gm := &gwv1.GRPCMethodMatch{Type: ptr(gwv1.GRPCMethodMatchRegularExpression), Service: ptr(regex), Method: ptr(header)}
	g1 := grpcRoute("apps", "g1", int(variant), parents[:2], []string{routeHost}, gwv1.GRPCRouteRule{
		Matches:     []gwv1.GRPCRouteMatch{{Method: gm}},
		BackendRefs: []gwv1.GRPCBackendRef{{BackendRef: be.BackendRef}},
	})
	svc := service("apps", "web", 80, backendPort)
	return snapshot(gw, ls, r1, r2, r3, g1, svc, tlsSecret("infra", "cert"), tlsSecret("apps", "cert"),
		slice("apps", "web", "web-1", backendPort, "10.0.0.1"))
}

// checkResult asserts properties every result must have.
func checkResult(t *testing.T, snap *resource.Snapshot, res *Result) {
	t.Helper()
	for _, k := range resource.SortedKeys(snap.HTTPRoutes) {
		r := snap.HTTPRoutes.Value(k)
		if want := hasParentOfOurs(snap, r.Namespace, r.Spec.ParentRefs); hasStatus(res, resource.KindHTTPRoute, k.Namespace, k.Name) != want {
			t.Errorf("HTTPRoute %s: has status = %v, want %v", k, !want, want)
		}
	}
	for _, s := range res.Statuses {
		var all [][]metav1.Condition
		switch {
		case s.GatewayClass != nil:
			all = append(all, s.GatewayClass.Conditions)
		case s.Gateway != nil:
			all = append(all, s.Gateway.Conditions)
			for _, l := range s.Gateway.Listeners {
				all = append(all, l.Conditions)
			}
		case s.ListenerSet != nil:
			all = append(all, s.ListenerSet.Conditions)
			for _, l := range s.ListenerSet.Listeners {
				all = append(all, l.Conditions)
			}
		case s.Route != nil:
			for _, p := range s.Route.Parents {
				all = append(all, p.Conditions)
				if !hasCond(p.Conditions, string(gwv1.RouteConditionAccepted)) || !hasCond(p.Conditions, string(gwv1.RouteConditionResolvedRefs)) {
					t.Errorf("%s: parent lacks Accepted or ResolvedRefs", s.Key())
				}
			}
		default:
			t.Errorf("%s: no typed status", s.Key())
		}
		for _, conds := range all {
			for _, c := range conds {
				if c.Reason == "" || c.ObservedGeneration != s.Generation || !c.LastTransitionTime.IsZero() || len(c.Message) > maxConditionMessage {
					t.Errorf("%s: bad condition %+v", s.Key(), c)
				}
			}
		}
	}
	for _, g := range res.Gateways {
		checkIR(t, g)
	}
}

func hasParentOfOurs(snap *resource.Snapshot, ns string, refs []gwv1.ParentReference) bool {
	ours := func(gwNS, name string) bool {
		gw := snap.Gateways.Value(resource.Key{Namespace: gwNS, Name: name})
		if gw == nil {
			return false
		}
		gc := snap.GatewayClasses.Value(string(gw.Spec.GatewayClassName))
		return gc != nil && string(gc.Spec.ControllerName) == testController
	}
	for _, ref := range refs {
		if ref.Group != nil && *ref.Group != gwv1.GroupName {
			continue
		}
		pns := ns
		if ref.Namespace != nil && *ref.Namespace != "" {
			pns = string(*ref.Namespace)
		}
		kind := "Gateway"
		if ref.Kind != nil {
			kind = string(*ref.Kind)
		}
		switch kind {
		case "Gateway":
			if ours(pns, string(ref.Name)) {
				return true
			}
		case "ListenerSet":
			ls := snap.ListenerSets.Value(resource.Key{Namespace: pns, Name: string(ref.Name)})
			if ls == nil {
				continue
			}
			gwNS := ls.Namespace
			if ls.Spec.ParentRef.Namespace != nil && *ls.Spec.ParentRef.Namespace != "" {
				gwNS = string(*ls.Spec.ParentRef.Namespace)
			}
			if ours(gwNS, string(ls.Spec.ParentRef.Name)) {
				return true
			}
		}
	}
	return false
}

// checkIR asserts the IR invariants translate relies on.
func checkIR(t *testing.T, g *ir.Gateway) {
	t.Helper()
	clusters := map[string]bool{}
	for i, c := range g.Clusters {
		if i > 0 && g.Clusters[i-1].Name >= c.Name {
			t.Errorf("clusters not sorted/unique at %s", c.Name)
		}
		clusters[c.Name] = true
	}
	secrets := map[string]bool{}
	for _, s := range g.Secrets {
		secrets[s.Name] = true
	}
	for i, l := range g.Listeners {
		if i > 0 && g.Listeners[i-1].Port >= l.Port {
			t.Errorf("listeners not sorted/unique by port")
		}
		if l.Name != fmt.Sprintf("%s-%d", map[ir.Protocol]string{ir.ProtocolHTTP: "http", ir.ProtocolHTTPS: "https"}[l.Protocol], l.Port) {
			t.Errorf("listener name %s", l.Name)
		}
		for j, fc := range l.FilterChains {
			if j > 0 && l.FilterChains[j-1].Name >= fc.Name {
				t.Errorf("filter chains not sorted/unique in %s", l.Name)
			}
			for _, s := range fc.CertificateSecrets {
				if !secrets[s] {
					t.Errorf("chain %s uses unknown secret %s", fc.Name, s)
				}
			}
			if l.Protocol == ir.ProtocolHTTPS && len(fc.CertificateSecrets) == 0 {
				t.Errorf("HTTPS chain %s without certificate", fc.Name)
			}
			for k, v := range fc.RouteConfig.VirtualHosts {
				if k > 0 && fc.RouteConfig.VirtualHosts[k-1].Name >= v.Name {
					t.Errorf("virtual hosts not sorted/unique in %s", fc.RouteConfig.Name)
				}
				names := map[string]bool{}
				for _, r := range v.Routes {
					if names[r.Name] {
						t.Errorf("route %s twice in %s", r.Name, v.Name)
					}
					names[r.Name] = true
					checkRoute(t, r, clusters)
				}
			}
		}
	}
}

func checkRoute(t *testing.T, r *ir.Route, clusters map[string]bool) {
	t.Helper()
	actions := 0
	for _, set := range []bool{r.Redirect != nil, r.DirectResponse != nil, r.Forward != nil} {
		if set {
			actions++
		}
	}
	if actions != 1 {
		t.Errorf("route %s has %d actions", r.Name, actions)
	}
	if r.Forward == nil {
		return
	}
	valid := false
	for _, b := range r.Forward.Backends {
		if b.Weight == 0 {
			t.Errorf("route %s: zero-weight backend", r.Name)
		}
		if !b.Invalid {
			valid = true
			if !clusters[b.Cluster] {
				t.Errorf("route %s: unknown cluster %s", r.Name, b.Cluster)
			}
		}
	}
	if !valid {
		t.Errorf("route %s forwards to no valid backend", r.Name)
	}
	for _, m := range r.Forward.Mirrors {
		if !clusters[m.Cluster] || m.Percent <= 0 || m.Percent > 100 {
			t.Errorf("route %s: bad mirror %+v", r.Name, m)
		}
	}
}
