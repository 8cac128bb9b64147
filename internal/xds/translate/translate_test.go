package translate

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	httpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"

	"github.com/portico-dev/portico/internal/ir"
)

func mustTranslate(t testing.TB, gw *ir.Gateway) *Resources {
	t.Helper()
	return mustTranslateWith(t, gw, Options{})
}

// vhdsOnly keeps every route table in VHDS form (no scoped tables).
var vhdsOnly = Options{ScopeAtRoutes: -1}

func mustTranslateWith(t testing.TB, gw *ir.Gateway, opts Options) *Resources {
	t.Helper()
	res, err := TranslateWith(gw, opts)
	if err != nil {
		t.Fatalf("Translate: %v", err)
	}
	return res
}

func find[T types.Resource](t testing.TB, rs []types.Resource, name string) T {
	t.Helper()
	for _, r := range rs {
		if cachev3.GetResourceName(r) == name {
			d, err := Decode(r)
			if err != nil {
				t.Fatal(err)
			}
			return d.(T)
		}
	}
	t.Fatalf("no resource %q", name)
	var zero T
	return zero
}

func names(rs []types.Resource) []string {
	var out []string
	for _, r := range rs {
		out = append(out, cachev3.GetResourceName(r))
	}
	return out
}

func hcmOf(t *testing.T, fc *listenerv3.FilterChain) *hcmv3.HttpConnectionManager {
	t.Helper()
	if len(fc.Filters) != 1 || fc.Filters[0].Name != wellknown.HTTPConnectionManager {
		t.Fatalf("chain %q filters = %v", fc.Name, fc.Filters)
	}
	h := &hcmv3.HttpConnectionManager{}
	if err := fc.Filters[0].GetTypedConfig().UnmarshalTo(h); err != nil {
		t.Fatal(err)
	}
	return h
}

func vhost(t *testing.T, rc *routev3.RouteConfiguration, name string) *routev3.VirtualHost {
	t.Helper()
	for _, vh := range rc.VirtualHosts {
		if vh.Name == name {
			return vh
		}
	}
	t.Fatalf("no virtual host %q in %q", name, rc.Name)
	return nil
}

func routeNamed(t *testing.T, vh *routev3.VirtualHost, name string) *routev3.Route {
	t.Helper()
	for _, r := range vh.Routes {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no route %q in virtual host %q", name, vh.Name)
	return nil
}

func httpRoutes(t *testing.T, res *Resources) *routev3.VirtualHost {
	t.Helper()
	return vhost(t, find[*routev3.RouteConfiguration](t, res.Routes(), "default/gw/http-80"), "any")
}

func TestTranslateIsValidAndConsistent(t *testing.T) {
	res := mustTranslate(t, fullGateway())
	if res.Gateway != "default/gw" || len(res.Version) != versionLen {
		t.Fatalf("gateway %q version %q", res.Gateway, res.Version)
	}
	checkValid(t, res)
	wantNames := map[string][]string{
		"listeners": {"default/gw/http-80", "default/gw/https-443"},
		"routes":    {"default/gw/http-80", "default/gw/https-443/a", "default/gw/https-443/any", "default/gw/https-443/b"},
		"clusters":  {clusterA, clusterB, clusterC},
		"endpoints": {clusterA, clusterB, clusterC},
		"secrets":   {secretA, secretB},
	}
	got := map[string][]string{
		"listeners": names(res.Listeners), "routes": names(res.Routes()), "clusters": names(res.Clusters),
		"endpoints": names(res.Endpoints), "secrets": names(res.Secrets),
	}
	for k, want := range wantNames {
		if strings.Join(got[k], ",") != strings.Join(want, ",") {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	snap, err := res.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Consistent(); err != nil {
		t.Fatal(err)
	}
	if v := snap.GetVersion(resourcev3.ListenerType); v != res.Version {
		t.Errorf("snapshot version %q, want %q", v, res.Version)
	}
	if n := len(snap.GetResources(resourcev3.EndpointType)); n != 3 {
		t.Errorf("snapshot has %d endpoints", n)
	}
	if n := len(res.All()); n != 2+4+3+3+2 {
		t.Errorf("All() has %d resources", n)
	}
	if bt := res.ByType(); len(bt) != len(typeOrder) || len(bt[resourcev3.SecretType]) != 2 {
		t.Errorf("ByType() = %v", bt)
	}
}

func TestEmptyGatewaySnapshot(t *testing.T) {
	res := mustTranslate(t, &ir.Gateway{Namespace: "ns", Name: "empty"})
	bt := res.ByType()
	for _, typ := range typeOrder {
		if s, ok := bt[typ]; !ok || s == nil || len(s) != 0 {
			t.Errorf("ByType()[%s] = %v, %v; want empty non-nil", typ, s, ok)
		}
	}
	if _, err := res.Snapshot(); err != nil {
		t.Fatal(err)
	}
}

func TestHTTPListener(t *testing.T) {
	res := mustTranslate(t, fullGateway())
	l := find[*listenerv3.Listener](t, res.Listeners, "default/gw/http-80")
	sa := l.Address.GetSocketAddress()
	if sa.Address != "0.0.0.0" || sa.GetPortValue() != 80 {
		t.Errorf("address = %v", sa)
	}
	if len(l.ListenerFilters) != 0 || len(l.FilterChains) != 1 || l.FilterChains[0].FilterChainMatch != nil || l.FilterChains[0].TransportSocket != nil {
		t.Fatalf("unexpected HTTP listener shape: %v", l)
	}
	h := hcmOf(t, l.FilterChains[0])
	rds := h.GetRds()
	if rds.RouteConfigName != "default/gw/http-80" || rds.ConfigSource.GetAds() == nil || rds.ConfigSource.ResourceApiVersion != corev3.ApiVersion_V3 {
		t.Errorf("rds = %v", rds)
	}
	// CORS (per-route policies; a no-op without), then the router.
	if len(h.HttpFilters) != 2 || h.HttpFilters[0].Name != wellknown.CORS || h.HttpFilters[1].Name != wellknown.Router ||
		h.HttpFilters[1].GetTypedConfig().GetTypeUrl() != "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router" {
		t.Errorf("http filters = %v", h.HttpFilters)
	}
	if !h.UseRemoteAddress.GetValue() || !h.NormalizePath.GetValue() || !h.MergeSlashes ||
		h.PathWithEscapedSlashesAction != hcmv3.HttpConnectionManager_UNESCAPE_AND_REDIRECT ||
		h.CodecType != hcmv3.HttpConnectionManager_AUTO || h.StatPrefix != "http-80" ||
		h.CommonHttpProtocolOptions.GetIdleTimeout().AsDuration() != time.Hour {
		t.Errorf("hcm defaults not set: %v", h)
	}
}

func TestHTTPSListener(t *testing.T) {
	res := mustTranslate(t, fullGateway())
	l := find[*listenerv3.Listener](t, res.Listeners, "default/gw/https-443")
	if len(l.ListenerFilters) != 1 || l.ListenerFilters[0].Name != wellknown.TLSInspector || l.ListenerFilters[0].GetTypedConfig() == nil {
		t.Errorf("listener filters = %v", l.ListenerFilters)
	}
	type want struct {
		name    string
		sni     []string
		secrets []string
		rds     string
	}
	wants := []want{
		{"https-443/a", []string{"a.example.com"}, []string{secretA}, "default/gw/https-443/a"},
		{"https-443/b", []string{"*.b.example.com"}, []string{secretB, secretA}, "default/gw/https-443/b"},
		{"https-443/any", nil, []string{secretA}, "default/gw/https-443/any"}, // catch-all last
	}
	if len(l.FilterChains) != len(wants) {
		t.Fatalf("%d filter chains", len(l.FilterChains))
	}
	for i, w := range wants {
		fc := l.FilterChains[i]
		if fc.Name != w.name || strings.Join(fc.FilterChainMatch.GetServerNames(), ",") != strings.Join(w.sni, ",") ||
			fc.FilterChainMatch.GetTransportProtocol() != "tls" {
			t.Errorf("chain %d = %q match %v, want %q %v", i, fc.Name, fc.FilterChainMatch, w.name, w.sni)
		}
		if fc.TransportSocket.GetName() != wellknown.TransportSocketTLS {
			t.Errorf("chain %q transport socket = %v", fc.Name, fc.TransportSocket)
		}
		tc := &tlsv3.DownstreamTlsContext{}
		if err := fc.TransportSocket.GetTypedConfig().UnmarshalTo(tc); err != nil {
			t.Fatal(err)
		}
		ctx := tc.CommonTlsContext
		if len(ctx.TlsCertificates) != 0 {
			t.Errorf("chain %q inlines certificates", fc.Name)
		}
		var got []string
		for _, s := range ctx.TlsCertificateSdsSecretConfigs {
			if s.SdsConfig.GetAds() == nil {
				t.Errorf("secret %q not fetched over ADS", s.Name)
			}
			got = append(got, s.Name)
		}
		if strings.Join(got, ",") != strings.Join(w.secrets, ",") {
			t.Errorf("chain %q SDS secrets = %v, want %v", fc.Name, got, w.secrets)
		}
		if strings.Join(ctx.AlpnProtocols, ",") != "h2,http/1.1" {
			t.Errorf("alpn = %v", ctx.AlpnProtocols)
		}
		if rds := hcmOf(t, fc).GetRds().GetRouteConfigName(); rds != w.rds {
			t.Errorf("chain %q RDS = %q, want %q", fc.Name, rds, w.rds)
		}
	}
	// No key or certificate bytes anywhere in any listener.
	for _, r := range res.Listeners {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{"SECRET-KEY-BYTES", "CERT-BYTES", "PRIVATE KEY"} {
			if bytes.Contains(b, []byte(secret)) {
				t.Errorf("listener %s contains %q", cachev3.GetResourceName(r), secret)
			}
		}
	}
}

func TestRouteConfiguration(t *testing.T) {
	res := mustTranslate(t, fullGateway())
	rc := find[*routev3.RouteConfiguration](t, res.Routes(), "default/gw/http-80")
	if !rc.IgnorePortInHostMatching || rc.ValidateClusters == nil || rc.ValidateClusters.Value {
		t.Errorf("route config options: %v", rc)
	}
	if got := []string{rc.VirtualHosts[0].Name, rc.VirtualHosts[1].Name}; got[0] != "any" || got[1] != "foo" {
		t.Errorf("virtual hosts = %v", got)
	}
	if d := vhost(t, rc, "any").Domains; len(d) != 1 || d[0] != "*" {
		t.Errorf("any domains = %v", d)
	}
	if d := vhost(t, rc, "foo").Domains; len(d) != 1 || d[0] != "foo.example.com" {
		t.Errorf("foo domains = %v", d)
	}
	var order []string
	for _, r := range vhost(t, rc, "any").Routes {
		order = append(order, r.Name)
	}
	if want := "exact,weighted,regex-direct,redirect-prefix,redirect-full,rewrite-strip,rewrite-full,mirror,headers,all-invalid,root"; strings.Join(order, ",") != want {
		t.Errorf("route order = %v", order)
	}
}

func TestMatches(t *testing.T) {
	vh := httpRoutes(t, mustTranslate(t, fullGateway()))
	if p := routeNamed(t, vh, "exact").Match.GetPath(); p != "/exact" {
		t.Errorf("exact path = %q", p)
	}
	if p := routeNamed(t, vh, "weighted").Match.GetPathSeparatedPrefix(); p != "/foo" {
		t.Errorf("prefix = %q, want path_separated_prefix /foo", p)
	}
	if m := routeNamed(t, vh, "root").Match; m.GetPrefix() != "/" {
		t.Errorf("nil path match = %v", m)
	}
	if m := vhost(t, find[*routev3.RouteConfiguration](t, mustTranslate(t, fullGateway()).Routes(), "default/gw/http-80"), "foo").Routes[0].Match; m.GetPrefix() != "/" {
		t.Errorf("PathPrefix / = %v", m)
	}
	m := routeNamed(t, vh, "regex-direct").Match
	if m.GetSafeRegex().GetRegex() != "^/re/[0-9]+$" {
		t.Errorf("regex = %v", m.GetSafeRegex())
	}
	if len(m.Headers) != 3 {
		t.Fatalf("headers = %v", m.Headers)
	}
	if h := m.Headers[0]; h.Name != "x-exact" || h.GetStringMatch().GetExact() != "yes" {
		t.Errorf("exact header = %v", h)
	}
	if h := m.Headers[1]; h.Name != "x-regex" || h.GetStringMatch().GetSafeRegex().GetRegex() != "v[0-9]" {
		t.Errorf("regex header = %v", h)
	}
	if h := m.Headers[2]; h.Name != ":method" || h.GetStringMatch().GetExact() != "GET" {
		t.Errorf("method = %v", h)
	}
	if q := m.QueryParameters; len(q) != 2 || q[0].Name != "q" || q[0].GetStringMatch().GetExact() != "1" ||
		q[1].Name != "r" || q[1].GetStringMatch().GetSafeRegex().GetRegex() != "a.*" {
		t.Errorf("query = %v", q)
	}
}

func TestForward(t *testing.T) {
	vh := httpRoutes(t, mustTranslate(t, fullGateway()))

	exact := routeNamed(t, vh, "exact").GetRoute()
	if exact.GetCluster() != clusterA || exact.ClusterNotFoundResponseCode != routev3.RouteAction_INTERNAL_SERVER_ERROR {
		t.Errorf("exact action = %v", exact)
	}
	if exact.Timeout.AsDuration() != 10*time.Second || exact.RetryPolicy.GetPerTryTimeout().AsDuration() != 2*time.Second ||
		exact.RetryPolicy.GetNumRetries().GetValue() != 0 {
		t.Errorf("timeouts = %v / %v", exact.Timeout, exact.RetryPolicy)
	}
	if root := routeNamed(t, vh, "root").GetRoute(); root.Timeout == nil || root.Timeout.AsDuration() != 0 || root.RetryPolicy != nil {
		t.Errorf("default timeout = %v, retry %v; want 0 (disabled), none", root.Timeout, root.RetryPolicy)
	}

	w := routeNamed(t, vh, "weighted").GetRoute()
	if w.ClusterNotFoundResponseCode != routev3.RouteAction_INTERNAL_SERVER_ERROR {
		t.Errorf("cluster_not_found_response_code = %v", w.ClusterNotFoundResponseCode)
	}
	cs := w.GetWeightedClusters().GetClusters()
	if len(cs) != 2 || cs[0].Name != clusterA || cs[0].Weight.GetValue() != 5 || cs[1].Name != InvalidBackendCluster || cs[1].Weight.GetValue() != 1 {
		t.Errorf("weighted clusters = %v", cs)
	}

	broken := routeNamed(t, vh, "all-invalid")
	if d := broken.GetDirectResponse(); d == nil || d.Status != 500 {
		t.Errorf("all-invalid action = %v", broken.Action)
	}
}

func TestURLRewrite(t *testing.T) {
	vh := httpRoutes(t, mustTranslate(t, fullGateway()))
	strip := routeNamed(t, vh, "rewrite-strip").GetRoute()
	if strip.GetHostRewriteLiteral() != "internal.example" {
		t.Errorf("host rewrite = %v", strip.HostRewriteSpecifier)
	}
	if strip.PrefixRewrite != "" || strip.RegexRewrite.GetPattern().GetRegex() != "^/strip/*" || strip.RegexRewrite.Substitution != "/" {
		t.Errorf("strip rewrite = %q %v", strip.PrefixRewrite, strip.RegexRewrite)
	}
	full := routeNamed(t, vh, "rewrite-full").GetRoute()
	if full.RegexRewrite.GetPattern().GetRegex() != "^.*$" || full.RegexRewrite.Substitution != "/replaced" {
		t.Errorf("full rewrite = %v", full.RegexRewrite)
	}
}

func TestRedirect(t *testing.T) {
	vh := httpRoutes(t, mustTranslate(t, fullGateway()))
	rd := routeNamed(t, vh, "redirect-prefix").GetRedirect()
	if rd.GetSchemeRedirect() != "https" || rd.HostRedirect != "new.example.com" || rd.PortRedirect != 8443 ||
		rd.GetPrefixRewrite() != "/new" || rd.ResponseCode != routev3.RedirectAction_MOVED_PERMANENTLY {
		t.Errorf("prefix redirect = %v", rd)
	}
	rd = routeNamed(t, vh, "redirect-full").GetRedirect()
	if rd.GetPathRedirect() != "/elsewhere" || rd.ResponseCode != routev3.RedirectAction_PERMANENT_REDIRECT || rd.SchemeRewriteSpecifier != nil || rd.HostRedirect != "" || rd.PortRedirect != 0 {
		t.Errorf("full redirect = %v", rd)
	}
	for code, want := range map[int]routev3.RedirectAction_RedirectResponseCode{
		0: routev3.RedirectAction_FOUND, 302: routev3.RedirectAction_FOUND, 303: routev3.RedirectAction_SEE_OTHER,
		307: routev3.RedirectAction_TEMPORARY_REDIRECT, 308: routev3.RedirectAction_PERMANENT_REDIRECT, 301: routev3.RedirectAction_MOVED_PERMANENTLY,
	} {
		got, err := redirect(&ir.Redirect{StatusCode: code}, nil)
		if err != nil || got.ResponseCode != want {
			t.Errorf("code %d: %v, %v; want %v", code, got.GetResponseCode(), err, want)
		}
	}
	if _, err := redirect(&ir.Redirect{StatusCode: 305}, nil); err == nil {
		t.Error("status 305 accepted")
	}
}

func TestDirectResponse(t *testing.T) {
	d := routeNamed(t, httpRoutes(t, mustTranslate(t, fullGateway())), "regex-direct").GetDirectResponse()
	if d.Status != 200 || d.Body.GetInlineString() != "hello" {
		t.Errorf("direct response = %v", d)
	}
}

func TestMirrors(t *testing.T) {
	ms := routeNamed(t, httpRoutes(t, mustTranslate(t, fullGateway())), "mirror").GetRoute().RequestMirrorPolicies
	if len(ms) != 2 {
		t.Fatalf("mirrors = %v", ms)
	}
	if f := ms[0].RuntimeFraction.GetDefaultValue(); ms[0].Cluster != clusterB || f.GetNumerator() != 500000 || f.GetDenominator() != typev3.FractionalPercent_MILLION {
		t.Errorf("50%% mirror = %v", ms[0])
	}
	if ms[1].Cluster != clusterC || ms[1].RuntimeFraction != nil {
		t.Errorf("100%% mirror = %v", ms[1])
	}
}

func TestHeaderModifiers(t *testing.T) {
	r := routeNamed(t, httpRoutes(t, mustTranslate(t, fullGateway())), "headers")
	check := func(what string, add []*corev3.HeaderValueOption, remove []string, set, appended, removed string) {
		t.Helper()
		if len(add) != 2 ||
			add[0].Header.Key != set || add[0].AppendAction != corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD ||
			add[1].Header.Key != appended || add[1].AppendAction != corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD {
			t.Errorf("%s headers to add = %v", what, add)
		}
		if len(remove) != 1 || remove[0] != removed {
			t.Errorf("%s headers to remove = %v", what, remove)
		}
	}
	check("request", r.RequestHeadersToAdd, r.RequestHeadersToRemove, "x-set", "x-add", "x-remove")
	check("response", r.ResponseHeadersToAdd, r.ResponseHeadersToRemove, "x-resp-set", "x-resp-add", "x-resp-remove")
}

func TestClustersAndEndpoints(t *testing.T) {
	res := mustTranslate(t, fullGateway())
	a := find[*clusterv3.Cluster](t, res.Clusters, clusterA)
	if a.GetType() != clusterv3.Cluster_EDS || a.EdsClusterConfig.GetServiceName() != clusterA || a.EdsClusterConfig.GetEdsConfig().GetAds() == nil ||
		a.LbPolicy != clusterv3.Cluster_ROUND_ROBIN || a.ConnectTimeout.AsDuration() <= 0 {
		t.Errorf("cluster a = %v", a)
	}
	if len(a.TypedExtensionProtocolOptions) != 0 {
		t.Errorf("HTTP/1 cluster has protocol options %v", a.TypedExtensionProtocolOptions)
	}
	b := find[*clusterv3.Cluster](t, res.Clusters, clusterB)
	opts := &httpv3.HttpProtocolOptions{}
	if err := b.TypedExtensionProtocolOptions["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].UnmarshalTo(opts); err != nil {
		t.Fatal(err)
	}
	if opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions() == nil {
		t.Errorf("HTTP/2 cluster options = %v", opts)
	}

	la := find[*endpointv3.ClusterLoadAssignment](t, res.Endpoints, clusterA)
	var addrs []string
	for _, e := range la.Endpoints[0].LbEndpoints {
		sa := e.GetEndpoint().Address.GetSocketAddress()
		addrs = append(addrs, fmt.Sprintf("%s:%d", sa.Address, sa.GetPortValue()))
	}
	if len(la.Endpoints) != 1 || strings.Join(addrs, ",") != "10.0.0.1:8080,10.0.0.2:8080,fd00::1:8080" {
		t.Errorf("endpoints of a = %v", la)
	}
	if lb := find[*endpointv3.ClusterLoadAssignment](t, res.Endpoints, clusterB); lb.ClusterName != clusterB || len(lb.Endpoints) != 0 {
		t.Errorf("empty assignment = %v", lb)
	}
	if lc := find[*endpointv3.ClusterLoadAssignment](t, res.Endpoints, clusterC); len(lc.Endpoints[0].LbEndpoints) != 1 {
		t.Errorf("non-IP endpoint kept: %v", lc)
	}
}

func TestSecrets(t *testing.T) {
	res := mustTranslate(t, fullGateway())
	s := find[*tlsv3.Secret](t, res.Secrets, secretA)
	c := s.GetTlsCertificate()
	if string(c.CertificateChain.GetInlineBytes()) != certA || string(c.PrivateKey.GetInlineBytes()) != keyA {
		t.Errorf("secret = %v", s)
	}
}

func marshalAll(t testing.TB, res *Resources) [][]byte {
	t.Helper()
	var out [][]byte
	for _, r := range slices.Concat(res.All(), res.VHDSRoutes, res.VirtualHosts) {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// identical fails t unless got and want have the same version, the
// same resources byte for byte and the same resource versions. what names
// want in the messages.
func identical(t *testing.T, got, want *Resources, what string) {
	t.Helper()
	if got.Version != want.Version {
		t.Fatalf("version %s, %s %s", got.Version, what, want.Version)
	}
	a, b := marshalAll(t, got), marshalAll(t, want)
	if len(a) != len(b) {
		t.Fatalf("%d resources, %s %d", len(a), what, len(b))
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("resource %d differs from the %s", i, what)
		}
	}
	gv, wv := got.VersionMap(), want.VersionMap()
	for _, typ := range []string{VHDSRouteType, resourcev3.VirtualHostType} {
		gv[typ], wv[typ] = got.ResourceVersions(typ), want.ResourceVersions(typ)
	}
	for typ, m := range wv {
		for name, v := range m {
			if gv[typ][name] != v {
				t.Fatalf("%s %s: version %q, %s %q", typ, name, gv[typ][name], what, v)
			}
		}
		if len(gv[typ]) != len(m) {
			t.Fatalf("%s: %d versions, %s %d", typ, len(gv[typ]), what, len(m))
		}
	}
}

func TestDeterministic(t *testing.T) {
	a := mustTranslate(t, fullGateway())
	identical(t, mustTranslate(t, fullGateway()), a, "first translation")

	// Filter chains and virtual hosts in another order give the same output.
	gw := fullGateway()
	fcs := gw.Listeners[1].FilterChains
	fcs[0], fcs[2] = fcs[2], fcs[0]
	vhs := gw.Listeners[0].FilterChains[0].RouteConfig.VirtualHosts
	vhs[0], vhs[1] = vhs[1], vhs[0]
	if v := mustTranslate(t, gw).Version; v != a.Version {
		t.Errorf("reordered IR version %s, want %s", v, a.Version)
	}

	changes := map[string]func(*ir.Gateway){
		"endpoint": func(g *ir.Gateway) { g.Clusters[0].Endpoints[0].Address = "10.0.0.9" },
		"weight": func(g *ir.Gateway) {
			g.Listeners[0].FilterChains[0].RouteConfig.VirtualHosts[0].Routes[1].Forward.Backends[0].Weight = 4
		},
		"secret": func(g *ir.Gateway) { g.Secrets[1].Key = []byte("other") },
	}
	for what, change := range changes {
		gw := fullGateway()
		change(gw)
		if v := mustTranslate(t, gw).Version; v == a.Version {
			t.Errorf("changed %s: same version %s", what, v)
		}
	}
}

func TestPrefixRewriteSemantics(t *testing.T) {
	// Emulates Envoy: prefix_rewrite swaps the matched prefix, a regex
	// rewrite substitutes every match of the pattern in the path.
	cases := []struct {
		match, path, repl, want string
	}{
		// The Gateway API's table for ReplacePrefixMatch.
		{"/foo", "/foo/bar", "/xyz", "/xyz/bar"},
		{"/foo", "/foo/bar", "/xyz/", "/xyz/bar"},
		{"/foo/", "/foo/bar", "/xyz", "/xyz/bar"},
		{"/foo/", "/foo/bar", "/xyz/", "/xyz/bar"},
		{"/foo", "/foo", "/xyz", "/xyz"},
		{"/foo/", "/foo", "/xyz", "/xyz"},
		{"/foo", "/foo/", "/xyz", "/xyz/"},
		{"/foo/", "/foo/", "/xyz", "/xyz/"},
		{"/foo", "/foo", "/", "/"},
		{"/foo/", "/foo", "/", "/"},
		{"/foo", "/foo/", "/", "/"},
		{"/foo/", "/foo/", "/", "/"},
		{"/foo", "/foo/bar", "/", "/bar"},
		{"/foo", "/foo/bar/", "/", "/bar/"},
		{"/", "/bar", "/xyz", "/xyz/bar"},
		{"/", "/bar", "/", "/bar"},
		{"/a.b", "/a.b/c", "/", "/c"},
	}
	for _, c := range cases {
		match := prefix(c.match)
		rm, err := routeMatch(ir.Match{Path: match})
		if err != nil {
			t.Fatal(err)
		}
		matched := rm.GetPathSeparatedPrefix() // "" for the "/" prefix
		if !strings.HasPrefix(c.path, matched) {
			t.Fatalf("%s does not match %s", c.path, matched)
		}
		p, rx, err := prefixRewrite(match, c.repl)
		if err != nil {
			t.Fatal(err)
		}
		got := c.path
		switch {
		case rx != nil:
			got = regexpReplace(t, rx.Pattern.Regex, rx.Substitution, c.path)
		case p != "":
			got = p + strings.TrimPrefix(c.path, matched)
		}
		if got != c.want {
			t.Errorf("prefix %q, path %q, replace %q: got %q, want %q", c.match, c.path, c.repl, got, c.want)
		}
	}
	if _, _, err := prefixRewrite(&ir.PathMatch{Type: ir.PathRegex, Value: "/x"}, "/y"); err == nil {
		t.Error("ReplacePrefixMatch accepted with a regex match")
	}
}

func TestErrors(t *testing.T) {
	cases := map[string]struct {
		change func(*ir.Gateway)
		want   string
	}{
		"duplicate SNI": {func(g *ir.Gateway) {
			g.Listeners[1].FilterChains[2].ServerNames = []string{"A.example.com"}
		}, "both match server name"},
		"two catch-alls": {func(g *ir.Gateway) { g.Listeners[1].FilterChains[1].ServerNames = nil }, "both match any server name"},
		"unknown secret": {func(g *ir.Gateway) {
			g.Listeners[1].FilterChains[0].CertificateSecrets = []string{"default/nope"}
		}, `"default/nope" is not among`},
		"no certificate":   {func(g *ir.Gateway) { g.Listeners[1].FilterChains[0].CertificateSecrets = nil }, "no certificate"},
		"bad regex":        {func(g *ir.Gateway) { routes(g)[2].Match.Path.Value = "(" }, "invalid regular expression"},
		"bad header regex": {func(g *ir.Gateway) { routes(g)[2].Match.Headers[1].Value = "[" }, "invalid regular expression"},
		"pseudo header":    {func(g *ir.Gateway) { routes(g)[8].RequestHeaders.Set[0].Name = ":path" }, "cannot be modified"},
		"host header":      {func(g *ir.Gateway) { routes(g)[8].ResponseHeaders.Remove = []string{"Host"} }, "cannot be modified"},
		"bad status":       {func(g *ir.Gateway) { routes(g)[2].DirectResponse.Status = 99 }, "Status"},
		"no action":        {func(g *ir.Gateway) { routes(g)[2].DirectResponse = nil }, "0 actions"},
		"two actions":      {func(g *ir.Gateway) { routes(g)[0].DirectResponse = &ir.DirectResponse{Status: 200} }, "2 actions"},
		"redirect code":    {func(g *ir.Gateway) { routes(g)[3].Redirect.StatusCode = 304 }, "unsupported status code"},
		"negative timeout": {func(g *ir.Gateway) { routes(g)[0].Forward.Timeout = ptr(-time.Second) }, "negative timeout"},
		"http two chains": {func(g *ir.Gateway) {
			g.Listeners[0].FilterChains = append(g.Listeners[0].FilterChains, g.Listeners[0].FilterChains[0])
		}, "exactly one filter chain"},
		"same port":         {func(g *ir.Gateway) { g.Listeners[1].Port = 80 }, "both use port 80"},
		"port out of range": {func(g *ir.Gateway) { g.Listeners[1].Port = 70000 }, "PortValue"},
		"bad prefix":        {func(g *ir.Gateway) { routes(g)[1].Match.Path.Value = "/a?b" }, "PathSeparatedPrefix"},
		"duplicate domain": {func(g *ir.Gateway) {
			g.Listeners[0].FilterChains[0].RouteConfig.VirtualHosts[1].Hostname = "*"
		}, `both serve "*"`},
		"duplicate cluster": {func(g *ir.Gateway) { g.Clusters[1].Name = clusterA }, "listed twice"},
		"empty key":         {func(g *ir.Gateway) { g.Secrets[0].Key = nil }, "empty certificate or key"},
		"header value":      {func(g *ir.Gateway) { routes(g)[8].RequestHeaders.Add[0].Value = "a\nb" }, "Value"},
		"unknown protocol":  {func(g *ir.Gateway) { g.Listeners[0].Protocol = "SCTP" }, "unknown protocol"},
		"prefix rewrite on regex": {func(g *ir.Gateway) {
			routes(g)[5].Match.Path = &ir.PathMatch{Type: ir.PathRegex, Value: "/s.*"}
		}, "needs a PathPrefix match"},
		"backend path rewrite": {func(g *ir.Gateway) {
			routes(g)[1].Forward.Backends[0].Filters = &ir.BackendFilters{URLRewrite: &ir.URLRewrite{Path: &ir.PathModifier{Type: ir.FullPathReplace, Value: "/x"}}}
		}, "must be its route's"},
		"fraction above a million": {func(g *ir.Gateway) { routes(g)[1].Match.Fraction = ptrTo(uint32(fractionScale + 1)) }, "fraction"},
		"different route configs with one name": {func(g *ir.Gateway) {
			g.Listeners[1].FilterChains[1].RouteConfig.Name = "http-80"
		}, "two different route configs"},
	}
	// The IR's structure (names, ports, domains, clusters and secrets
	// listed once) is the translator's own contract: breaking it fails the
	// Gateway. Anything else Envoy would refuse is one route or one
	// listener, left out as a Problem while the rest is served.
	gatewayErrors := map[string]bool{"same port": true, "duplicate cluster": true, "empty key": true}
	whole := mustTranslate(t, fullGateway())
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			gw := fullGateway()
			c.change(gw)
			res, err := Translate(gw)
			if gatewayErrors[name] {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("err = %v, want it to contain %q", err, c.want)
				}
				if !strings.HasPrefix(err.Error(), "translate gateway default/gw: ") {
					t.Errorf("error does not name the gateway: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("the Gateway failed for one piece: %v", err)
			}
			if len(res.Problems) != 1 || !strings.Contains(res.Problems[0].Err, c.want) {
				t.Fatalf("problems = %+v, want one containing %q", res.Problems, c.want)
			}
			// Only that piece is gone: fewer routes or listeners, never
			// more, and the Gateway still serves.
			if len(res.Listeners) == 0 || len(res.Listeners) > len(whole.Listeners) {
				t.Errorf("%d listeners served, want 1..%d", len(res.Listeners), len(whole.Listeners))
			}
		})
	}
	if _, err := Translate(nil); err == nil {
		t.Error("nil gateway accepted")
	}
}

func routes(g *ir.Gateway) []*ir.Route {
	return g.Listeners[0].FilterChains[0].RouteConfig.VirtualHosts[0].Routes
}

func TestSharedRouteConfig(t *testing.T) {
	gw := fullGateway()
	// Chains a and b refer to the same route config: it is emitted once.
	gw.Listeners[1].FilterChains[1].RouteConfig = gw.Listeners[1].FilterChains[2].RouteConfig
	res := mustTranslate(t, gw)
	if got := strings.Join(names(res.Routes()), ","); got != "default/gw/http-80,default/gw/https-443/any,default/gw/https-443/b" {
		t.Errorf("routes = %s", got)
	}
	if _, err := res.Snapshot(); err != nil {
		t.Fatal(err)
	}
}

func TestWeightOverflow(t *testing.T) {
	gw := fullGateway()
	routes(gw)[1].Forward.Backends = []*ir.WeightedBackend{
		{Cluster: clusterA, Weight: 1<<32 - 1}, {Cluster: clusterC, Weight: 1<<32 - 1}, {Cluster: clusterB, Weight: 1},
	}
	cs := routeNamed(t, httpRoutes(t, mustTranslate(t, gw)), "weighted").GetRoute().GetWeightedClusters().GetClusters()
	var sum uint64
	for _, c := range cs {
		sum += uint64(c.Weight.GetValue())
		if c.Weight.GetValue() == 0 {
			t.Errorf("share of %s dropped", c.Name)
		}
	}
	if len(cs) != 3 || sum > 1<<32-1 || cs[0].Weight.GetValue() != cs[1].Weight.GetValue() {
		t.Errorf("weights = %v (sum %d)", cs, sum)
	}
}

func TestLargeDirectResponseBody(t *testing.T) {
	gw := fullGateway()
	routes(gw)[2].DirectResponse.Body = strings.Repeat("x", 5000)
	rc := find[*routev3.RouteConfiguration](t, mustTranslate(t, gw).Routes(), "default/gw/http-80")
	if rc.MaxDirectResponseBodySizeBytes.GetValue() != 5000 {
		t.Errorf("max_direct_response_body_size_bytes = %v", rc.MaxDirectResponseBodySizeBytes)
	}
	rc = find[*routev3.RouteConfiguration](t, mustTranslate(t, fullGateway()).Routes(), "default/gw/http-80")
	if rc.MaxDirectResponseBodySizeBytes != nil {
		t.Errorf("limit set for a small body: %v", rc.MaxDirectResponseBodySizeBytes)
	}
}

func TestWildcardServerNameIsCatchAll(t *testing.T) {
	gw := fullGateway()
	fcs := gw.Listeners[1].FilterChains
	fcs[0].ServerNames = []string{"*"}
	l := find[*listenerv3.Listener](t, mustTranslate(t, gw).Listeners, "default/gw/https-443")
	last := l.FilterChains[len(l.FilterChains)-1]
	if last.Name != "https-443/any" || len(last.FilterChainMatch.ServerNames) != 0 {
		t.Errorf("last chain = %v", last)
	}
	fcs[1].ServerNames = []string{""}
	if res, err := Translate(gw); err != nil || len(res.Problems) != 1 || !strings.Contains(res.Problems[0].Err, "both match any server name") {
		t.Errorf("two catch-alls: %v %+v", err, res)
	}
}

func TestRewriteOnExactMatch(t *testing.T) {
	gw := fullGateway()
	r := routes(gw)[5]
	r.Match.Path = &ir.PathMatch{Type: ir.PathExact, Value: "/strip/me"}
	r.Forward.URLRewrite.Path.Value = `/new\path`
	ra := routeNamed(t, httpRoutes(t, mustTranslate(t, gw)), "rewrite-strip").GetRoute()
	if ra.RegexRewrite.GetPattern().GetRegex() != "^.*$" || ra.RegexRewrite.Substitution != `/new\\path` {
		t.Errorf("rewrite = %v", ra.RegexRewrite)
	}
}

func TestNamesAlreadyScoped(t *testing.T) {
	gw := fullGateway()
	gw.Listeners[0].FilterChains[0].RouteConfig.Name = "default/gw/http-80"
	res := mustTranslate(t, gw)
	if got := names(res.Routes())[0]; got != "default/gw/http-80" {
		t.Errorf("route config name = %q", got)
	}
	if got := hcmOf(t, find[*listenerv3.Listener](t, res.Listeners, "default/gw/http-80").FilterChains[0]).GetRds().GetRouteConfigName(); got != "default/gw/http-80" {
		t.Errorf("RDS name = %q", got)
	}
}

func ptrTo[T any](v T) *T { return &v }

// A route's fraction is Envoy's runtime_fraction in millionths, without a
// runtime key; a backend's URLRewrite hostname is its weighted cluster's
// host_rewrite_literal.
func TestFractionAndBackendHostname(t *testing.T) {
	gw := fullGateway()
	r := routes(gw)[1]
	r.Match.Fraction = ptrTo(uint32(250_000))
	host := "b.internal"
	r.Forward.Backends[0].Filters = &ir.BackendFilters{URLRewrite: &ir.URLRewrite{Hostname: &host}}
	out := routeNamed(t, httpRoutes(t, mustTranslate(t, gw)), r.Name)
	rf := out.GetMatch().GetRuntimeFraction()
	if rf.GetRuntimeKey() != "" || rf.GetDefaultValue().GetNumerator() != 250_000 || rf.GetDefaultValue().GetDenominator() != typev3.FractionalPercent_MILLION {
		t.Errorf("runtime_fraction = %v", rf)
	}
	cs := out.GetRoute().GetWeightedClusters().GetClusters()
	if len(cs) == 0 || cs[0].GetHostRewriteLiteral() != host {
		t.Errorf("weighted clusters %v, want the first with host_rewrite_literal %s", cs, host)
	}
}
