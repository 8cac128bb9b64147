package translate

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/re2"
)

// defaultMaxDirectResponseBody is Envoy's default limit on the size of a
// direct response body.
const defaultMaxDirectResponseBody = 4096

// routeConfiguration translates rc. Virtual hosts are matched on the host
// with any port ignored (ignore_port_in_host_matching), so "foo.com:8080"
// reaches the "foo.com" virtual host, wildcard hosts included; adding
// "host:*" domains instead would not work for "*.example.com".
//
// What the previous translation built is reused: the whole route config
// when rc is the same object and names no cluster that appeared or
// disappeared, else each virtual host that has the same routes, else each
// route.
func (t *translator) routeConfiguration(name string, rc *ir.RouteConfig) (*rcEntry, error) {
	return t.routeTable(name, rc, t.memo.routeConfigs[name], true)
}

// routeTable translates the virtual hosts of rc, reusing those of old (the
// previous translation of the same table) as routeConfiguration says.
// With shell it also makes the RouteConfiguration holding them all
// (rcEntry.entry) and its VHDS forms; without, only the virtual hosts are
// translated, and checked as they would be for one RouteConfiguration.
func (t *translator) routeTable(name string, rc *ir.RouteConfig, old *rcEntry, shell bool) (*rcEntry, error) {
	if old != nil && !t.clustersChangedFor(old) {
		if out, ok, err := t.routeConfigurationInPlace(name, rc, old, shell); ok || err != nil {
			return out, err
		}
	}
	vhNames := make(map[string]bool, len(rc.VirtualHosts))
	domains := make(map[string]string, len(rc.VirtualHosts))
	out := &rcEntry{src: rc, vhosts: make(map[string]*vhostEntry, len(rc.VirtualHosts))}
	reused := old != nil && len(old.vhosts) == len(rc.VirtualHosts)
	for _, vh := range rc.VirtualHosts {
		if vh == nil {
			return nil, fmt.Errorf("nil virtual host")
		}
		domain := strings.ToLower(vh.Hostname)
		if domain == "" {
			domain = "*"
		}
		vhName := vh.Name
		if vhName == "" {
			vhName = domain
		}
		if vhNames[vhName] {
			return nil, fmt.Errorf("virtual host name %q is not unique", vhName)
		}
		vhNames[vhName] = true
		if other, ok := domains[domain]; ok {
			return nil, fmt.Errorf("virtual hosts %q and %q both serve %q", other, vhName, domain)
		}
		domains[domain] = vhName
		var prev *vhostEntry
		if old != nil {
			prev = old.vhosts[vhName]
		}
		v, err := t.virtualHost(vhName, domain, vh, prev)
		if err != nil {
			return nil, err
		}
		reused = reused && v == prev
		out.vhosts[vhName] = v
	}
	if reused {
		return old, nil
	}
	if shell {
		if err := t.routeConfigShell(name, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// routeConfigShell makes the RouteConfiguration of out from its virtual
// hosts, and its hash.
func (t *translator) routeConfigShell(name string, out *rcEntry) error {
	vhosts := make([]*vhostEntry, 0, len(out.vhosts))
	for _, v := range out.vhosts {
		vhosts = append(vhosts, v)
	}
	// Envoy picks a virtual host by domain, not by position: sort by name so
	// that the output does not depend on the order of the IR.
	slices.SortFunc(vhosts, func(a, b *vhostEntry) int { return strings.Compare(a.name, b.name) })
	shell, h, err := t.tableShell(name, vhosts, nil, true)
	if err != nil {
		return err
	}
	if err := t.vhdsForms(shell, out, vhosts); err != nil {
		return err
	}
	// The whole table is assembled only when a state-of-the-world client
	// or a reader asks for it (Resources.Routes); shell and vhosts are not
	// changed after this.
	out.entry = newLazyEntry(name, func() types.Resource { return routeConfigWire(shell, vhosts) }, h)
	return nil
}

// tableShell is the RouteConfiguration named name without its virtual
// hosts (sorted vhosts), with edit applied if not nil, validated if
// validate, and the hash of the table holding them.
func (t *translator) tableShell(name string, vhosts []*vhostEntry, edit func(*routev3.RouteConfiguration), validate bool) (*routev3.RouteConfiguration, hash, error) {
	shell := &routev3.RouteConfiguration{
		Name: name,
		// Routes may name clusters that do not exist (InvalidBackendCluster):
		// they must not make Envoy reject the whole configuration.
		ValidateClusters:         wrapperspb.Bool(false),
		IgnorePortInHostMatching: true,
	}
	if edit != nil {
		edit(shell)
	}
	// Envoy rejects direct response bodies above 4 KiB unless told otherwise.
	var maxBody int
	hashes := make([]hash, len(vhosts))
	for i, v := range vhosts {
		maxBody = max(maxBody, v.maxBody)
		hashes[i] = v.hash
	}
	if maxBody > defaultMaxDirectResponseBody {
		if maxBody > math.MaxUint32 {
			return nil, hash{}, fmt.Errorf("direct response body of %d bytes is too large", maxBody)
		}
		shell.MaxDirectResponseBodySizeBytes = wrapperspb.UInt32(uint32(maxBody))
	}
	// The virtual hosts were validated with their routes.
	if validate {
		if err := validated(shell, name); err != nil {
			return nil, hash{}, err
		}
	}
	h, err := t.hs.tree(shell, hashes)
	if err != nil {
		return nil, hash{}, err
	}
	return shell, h, nil
}

// clustersChangedFor reports whether a cluster named by a virtual host of
// rc appeared or disappeared.
func (t *translator) clustersChangedFor(rc *rcEntry) bool {
	if len(t.clustersChanged) == 0 {
		return false
	}
	for _, v := range rc.vhosts {
		if t.touchesChanged(v.clusters) {
			return true
		}
	}
	return false
}

// routeConfigurationInPlace translates rc when its virtual hosts are those
// of old's IR, object for object, except some with the same names and
// hostnames: only those are translated again, and the checks of names and
// domains old passed still hold. ok is false when that is not the case.
func (t *translator) routeConfigurationInPlace(name string, rc *ir.RouteConfig, old *rcEntry, shell bool) (*rcEntry, bool, error) {
	prev := old.src.VirtualHosts
	if len(prev) != len(rc.VirtualHosts) {
		return nil, false, nil
	}
	var changed []int
	for i, vh := range rc.VirtualHosts {
		p := prev[i]
		if vh == p {
			continue
		}
		if vh == nil || p == nil || vh.Name != p.Name || vh.Hostname != p.Hostname {
			return nil, false, nil
		}
		changed = append(changed, i)
	}
	if len(changed) == 0 {
		return old, true, nil
	}
	out := &rcEntry{src: rc, vhosts: maps.Clone(old.vhosts)}
	for _, i := range changed {
		vh := rc.VirtualHosts[i]
		domain := strings.ToLower(vh.Hostname)
		if domain == "" {
			domain = "*"
		}
		vhName := vh.Name
		if vhName == "" {
			vhName = domain
		}
		v, err := t.virtualHost(vhName, domain, vh, old.vhosts[vhName])
		if err != nil {
			return nil, false, err
		}
		out.vhosts[vhName] = v
	}
	if shell {
		if err := t.routeConfigShell(name, out); err != nil {
			return nil, false, err
		}
	}
	return out, true, nil
}

// virtualHost translates one virtual host, reusing prev (its translation
// of last time) or the routes of prev when they are the same.
func (t *translator) virtualHost(name, domain string, vh *ir.VirtualHost, prev *vhostEntry) (*vhostEntry, error) {
	if prev != nil && prev.domain == domain && (prev.src == vh || sameRoutes(vh.Routes, prev.routes)) && !t.touchesChanged(prev.clusters) {
		return prev, nil
	}
	var old map[*ir.Route]*routeEntry
	if prev != nil {
		old = make(map[*ir.Route]*routeEntry, len(prev.routes))
		for _, re := range prev.routes {
			old[re.src] = re
		}
	}
	out := &vhostEntry{src: vh, name: name, domain: domain, routes: make([]*routeEntry, 0, len(vh.Routes))}
	v := &routev3.VirtualHost{Name: name, Domains: []string{domain}}
	if vh.ListenerTag != "" {
		// Shared by the chains of a port (misdirected requests): the tag
		// their connection managers set stays in Envoy.
		v.RequestHeadersToRemove = []string{ir.ListenerTagHeader}
	}
	if err := validated(v, name); err != nil {
		return nil, err
	}
	hashes := make([]hash, 0, len(vh.Routes))
	for i, r := range vh.Routes {
		if r == nil {
			return nil, fmt.Errorf("virtual host %q: nil route %d", name, i)
		}
		re, err := t.routeEntry(r, old[r])
		if err != nil {
			// One route Envoy would refuse is left out, not its virtual
			// host, route table or Gateway.
			out.dropped = append(out.dropped, Problem{Route: r.Name, Err: err.Error()})
			continue
		}
		out.routes = append(out.routes, re)
		hashes = append(hashes, re.hash)
		out.maxBody = max(out.maxBody, re.body)
		forClusters(r, func(c string) {
			if !slices.Contains(out.clusters, c) {
				out.clusters = append(out.clusters, c)
			}
		})
	}
	h, err := t.hs.tree(v, hashes)
	if err != nil {
		return nil, err
	}
	out.wire, out.framed = vhostWire(t.hs.buf, out.routes) // hs.buf: v's encoding without routes
	out.hash = h
	return out, nil
}

// shareRoute records that r was translated to re, for other virtual hosts
// holding r.
func (t *translator) shareRoute(r *ir.Route, re *routeEntry) {
	if t.shared == nil {
		t.shared = map[*ir.Route]*routeEntry{}
	}
	t.shared[r] = re
}

// routeEntry translates, validates and hashes a route, or reuses prev, or
// the translation of the same route in another virtual host.
func (t *translator) routeEntry(r *ir.Route, prev *routeEntry) (*routeEntry, error) {
	if re := t.shared[r]; re != nil {
		return re, nil
	}
	if prev != nil && !t.routeTouchesChanged(r) {
		t.shareRoute(r, prev)
		return prev, nil
	}
	rr, err := t.route(r)
	if err != nil {
		return nil, err
	}
	if err := validated(rr, r.Name); err != nil {
		return nil, err
	}
	h, err := t.hs.message(rr)
	if err != nil {
		return nil, err
	}
	// rr is the translator's scratch message: only its encoding is kept.
	re := &routeEntry{src: r, hash: h, body: len(rr.GetDirectResponse().GetBody().GetInlineString()),
		wire: slices.Clone(t.hs.buf)}
	t.shareRoute(r, re)
	return re, nil
}

// forClusters calls f with each cluster name r names (backends and
// mirrors): their presence in the Gateway decides r's translation.
func forClusters(r *ir.Route, f func(string)) {
	if r.Forward == nil {
		return
	}
	for _, b := range r.Forward.Backends {
		if b != nil && b.Cluster != "" {
			f(b.Cluster)
		}
	}
	for _, m := range r.Forward.Mirrors {
		if m != nil {
			f(m.Cluster)
		}
	}
}

// routeTouchesChanged reports whether r names a cluster that appeared or
// disappeared.
func (t *translator) routeTouchesChanged(r *ir.Route) bool {
	if len(t.clustersChanged) == 0 {
		return false
	}
	touched := false
	forClusters(r, func(c string) { touched = touched || t.clustersChanged[c] })
	return touched
}

// routeParts are the messages of a typical route, allocated together. The
// translator keeps one and reuses it for every route (route).
type routeParts struct {
	route     routev3.Route
	match     routev3.RouteMatch
	action    routev3.Route_Route
	ra        routev3.RouteAction
	cluster   routev3.RouteAction_Cluster
	prefix    routev3.RouteMatch_Prefix
	sepPrefix routev3.RouteMatch_PathSeparatedPrefix
	path      routev3.RouteMatch_Path
	// headers and queries are the messages of header and query
	// parameter matches, with the lists of pointers to them: kept, with
	// their capacity, by scratch.
	headers    []headerParts
	headerPtrs []*routev3.HeaderMatcher
	queries    []queryParts
	queryPtrs  []*routev3.QueryParameterMatcher
}

// scratch returns the translator's route messages, cleared.
func (t *translator) scratch() *routeParts {
	if t.parts == nil {
		t.parts = &routeParts{}
		return t.parts
	}
	p := t.parts
	hs, hp, qs, qp := p.headers[:0], p.headerPtrs[:0], p.queries[:0], p.queryPtrs[:0]
	*p = routeParts{headers: hs, headerPtrs: hp, queries: qs, queryPtrs: qp}
	return p
}

// headerBuf returns k cleared header match messages of parts and an
// empty list of capacity k for them.
func (parts *routeParts) headerBuf(k int) ([]headerParts, []*routev3.HeaderMatcher) {
	return scratchBuf(&parts.headers, &parts.headerPtrs, k)
}

// queryBuf is headerBuf for query parameter matches.
func (parts *routeParts) queryBuf(k int) ([]queryParts, []*routev3.QueryParameterMatcher) {
	return scratchBuf(&parts.queries, &parts.queryPtrs, k)
}

// scratchBuf returns k cleared elements of *buf and an empty list of
// capacity k from *ptrs, both grown when short.
func scratchBuf[T, P any](buf *[]T, ptrs *[]P, k int) ([]T, []P) {
	if cap(*buf) < k {
		*buf = make([]T, k)
		*ptrs = make([]P, 0, k)
	}
	elems := (*buf)[:k]
	clear(elems)
	return elems, (*ptrs)[:0:k]
}

// headerParts and queryParts are the messages of an exact header or query
// parameter match, allocated together.
type headerParts struct {
	header routev3.HeaderMatcher
	hsm    routev3.HeaderMatcher_StringMatch
	exactParts
}

type queryParts struct {
	query routev3.QueryParameterMatcher
	qsm   routev3.QueryParameterMatcher_StringMatch
	exactParts
}

type exactParts struct {
	sm    matcherv3.StringMatcher
	exact matcherv3.StringMatcher_Exact
}

// route translates r into the translator's scratch messages: the result
// is valid until the next call.
func (t *translator) route(r *ir.Route) (*routev3.Route, error) {
	parts := t.scratch()
	if err := routeMatchIn(&parts.match, parts, r.Match); err != nil {
		return nil, err
	}
	out := &parts.route
	out.Name, out.Match = r.Name, &parts.match
	var err error
	if out.RequestHeadersToAdd, out.RequestHeadersToRemove, err = headerMutations(r.RequestHeaders); err != nil {
		return nil, fmt.Errorf("request headers: %w", err)
	}
	if out.ResponseHeadersToAdd, out.ResponseHeadersToRemove, err = headerMutations(r.ResponseHeaders); err != nil {
		return nil, fmt.Errorf("response headers: %w", err)
	}
	if r.CORS != nil {
		a, err := corsPolicy(r.CORS)
		if err != nil {
			return nil, err
		}
		out.TypedPerFilterConfig = map[string]*anypb.Any{wellknown.CORS: a}
	}
	actions := 0
	for _, set := range []bool{r.Redirect != nil, r.DirectResponse != nil, r.Forward != nil} {
		if set {
			actions++
		}
	}
	if actions != 1 {
		return nil, fmt.Errorf("has %d actions, want exactly one", actions)
	}
	switch {
	case r.Redirect != nil:
		rd, err := redirect(r.Redirect, r.Match.Path)
		if err != nil {
			return nil, fmt.Errorf("redirect: %w", err)
		}
		out.Action = &routev3.Route_Redirect{Redirect: rd}
	case r.DirectResponse != nil:
		out.Action = &routev3.Route_DirectResponse{DirectResponse: directResponse(r.DirectResponse.Status, r.DirectResponse.Body)}
	default:
		if err := t.forward(out, parts, r.Forward, r.Match.Path); err != nil {
			return nil, fmt.Errorf("forward: %w", err)
		}
	}
	return out, nil
}

// routeMatch translates a match. A PathPrefix is matched by whole segments
// with path_separated_prefix (so "/foo" matches "/foo" and "/foo/bar" but
// not "/foobar"); its trailing slashes are dropped as Envoy requires, and
// the prefix "/" becomes a plain prefix match on everything.
func routeMatch(m ir.Match) (*routev3.RouteMatch, error) {
	parts := &routeParts{}
	if err := routeMatchIn(&parts.match, parts, m); err != nil {
		return nil, err
	}
	return &parts.match, nil
}

// routeMatchIn translates m into out, using the messages of parts.
func routeMatchIn(out *routev3.RouteMatch, parts *routeParts, m ir.Match) error {
	switch p := m.Path; {
	case p == nil:
		parts.prefix.Prefix = "/"
		out.PathSpecifier = &parts.prefix
	case p.Type == ir.PathExact:
		parts.path.Path = p.Value
		out.PathSpecifier = &parts.path
	case p.Type == ir.PathPrefix:
		if prefix := strings.TrimRight(p.Value, "/"); prefix == "" {
			parts.prefix.Prefix = "/"
			out.PathSpecifier = &parts.prefix
		} else {
			parts.sepPrefix.PathSeparatedPrefix = prefix
			out.PathSpecifier = &parts.sepPrefix
		}
	case p.Type == ir.PathRegex:
		rx, err := regexMatcher(p.Value)
		if err != nil {
			return fmt.Errorf("path: %w", err)
		}
		out.PathSpecifier = &routev3.RouteMatch_SafeRegex{SafeRegex: rx}
	default:
		return fmt.Errorf("unknown path match type %q", p.Type)
	}
	if f := m.Fraction; f != nil {
		if *f > fractionScale {
			return fmt.Errorf("fraction %d is above %d", *f, fractionScale)
		}
		// No runtime key: the default value is the fraction. Envoy draws
		// one random number per request for the whole table, so the
		// cumulative fractions of a split rule divide its requests.
		out.RuntimeFraction = &corev3.RuntimeFractionalPercent{
			DefaultValue: &typev3.FractionalPercent{Numerator: *f, Denominator: typev3.FractionalPercent_MILLION},
		}
	}
	var hs []headerParts
	if k := len(m.Headers); k > 0 || m.Method != "" {
		if m.Method != "" {
			k++
		}
		hs, out.Headers = parts.headerBuf(k)
	}
	for _, h := range m.Headers {
		x := &hs[0]
		hs = hs[1:]
		sm, err := stringMatcherIn(&x.exactParts, h)
		if err != nil {
			return fmt.Errorf("header %q: %w", h.Name, err)
		}
		x.header.Name = strings.ToLower(h.Name)
		x.header.InvertMatch = h.Invert
		x.hsm.StringMatch = sm
		x.header.HeaderMatchSpecifier = &x.hsm
		out.Headers = append(out.Headers, &x.header)
	}
	if m.Method != "" {
		x := &hs[0]
		x.exact.Exact = m.Method
		x.sm.MatchPattern = &x.exact
		x.hsm.StringMatch = &x.sm
		x.header.Name, x.header.HeaderMatchSpecifier = ":method", &x.hsm
		out.Headers = append(out.Headers, &x.header)
	}
	var qs []queryParts
	if len(m.QueryParams) > 0 {
		qs, out.QueryParameters = parts.queryBuf(len(m.QueryParams))
	}
	for _, q := range m.QueryParams {
		x := &qs[0]
		qs = qs[1:]
		sm, err := stringMatcherIn(&x.exactParts, q)
		if err != nil {
			return fmt.Errorf("query parameter %q: %w", q.Name, err)
		}
		x.qsm.StringMatch = sm
		x.query.Name, x.query.QueryParameterMatchSpecifier = q.Name, &x.qsm
		out.QueryParameters = append(out.QueryParameters, &x.query)
	}
	return nil
}

// stringMatcherIn is stringMatcher, using the messages of x for an exact
// match.
func stringMatcherIn(x *exactParts, m ir.StringMatch) (*matcherv3.StringMatcher, error) {
	if m.Type == ir.StringExact || m.Type == "" {
		x.exact.Exact = m.Value
		x.sm.MatchPattern = &x.exact
		return &x.sm, nil
	}
	return stringMatcher(m)
}

func stringMatcher(m ir.StringMatch) (*matcherv3.StringMatcher, error) {
	switch m.Type {
	case ir.StringExact, "":
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: m.Value}}, nil
	case ir.StringRegex:
		rx, err := regexMatcher(m.Value)
		if err != nil {
			return nil, err
		}
		return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: rx}}, nil
	}
	return nil, fmt.Errorf("unknown match type %q", m.Type)
}

// regexMatcher is an RE2 matcher of expr. The syntax and an upper bound of
// the program size (re2.Check, within the limit Portico's bootstraps give
// Envoy) are checked here because Envoy would reject the whole route
// configuration for one bad expression.
func regexMatcher(expr string) (*matcherv3.RegexMatcher, error) {
	if err := re2.Check(expr); err != nil {
		return nil, fmt.Errorf("invalid regular expression %q: %w", expr, err)
	}
	return &matcherv3.RegexMatcher{Regex: expr}, nil
}

// headerMutations translates a header modifier: Set overwrites, Add appends.
// Envoy refuses to modify pseudo-headers and Host with these fields.
func headerMutations(h *ir.HeaderModifier) ([]*corev3.HeaderValueOption, []string, error) {
	if h == nil {
		return nil, nil, nil
	}
	var add []*corev3.HeaderValueOption
	var remove []string
	for _, op := range []struct {
		headers []ir.Header
		action  corev3.HeaderValueOption_HeaderAppendAction
	}{
		{h.Set, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD},
		{h.Add, corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD},
	} {
		for _, hv := range op.headers {
			name := strings.ToLower(hv.Name)
			if err := modifiable(name); err != nil {
				return nil, nil, err
			}
			add = append(add, &corev3.HeaderValueOption{
				Header:       &corev3.HeaderValue{Key: name, Value: hv.Value},
				AppendAction: op.action,
			})
		}
	}
	for _, n := range h.Remove {
		name := strings.ToLower(n)
		if err := modifiable(name); err != nil {
			return nil, nil, err
		}
		remove = append(remove, name)
	}
	return add, remove, nil
}

func modifiable(name string) error {
	if strings.HasPrefix(name, ":") || name == "host" {
		return fmt.Errorf("header %q cannot be modified", name)
	}
	return nil
}

var redirectCodes = map[int]routev3.RedirectAction_RedirectResponseCode{
	0:   routev3.RedirectAction_FOUND, // the Gateway API default
	301: routev3.RedirectAction_MOVED_PERMANENTLY,
	302: routev3.RedirectAction_FOUND,
	303: routev3.RedirectAction_SEE_OTHER,
	307: routev3.RedirectAction_TEMPORARY_REDIRECT,
	308: routev3.RedirectAction_PERMANENT_REDIRECT,
}

func redirect(rd *ir.Redirect, match *ir.PathMatch) (*routev3.RedirectAction, error) {
	code, ok := redirectCodes[rd.StatusCode]
	if !ok {
		return nil, fmt.Errorf("unsupported status code %d", rd.StatusCode)
	}
	out := &routev3.RedirectAction{ResponseCode: code}
	if rd.Scheme != nil {
		out.SchemeRewriteSpecifier = &routev3.RedirectAction_SchemeRedirect{SchemeRedirect: strings.ToLower(*rd.Scheme)}
	}
	if rd.Hostname != nil {
		out.HostRedirect = *rd.Hostname
	}
	if rd.Port != nil {
		out.PortRedirect = *rd.Port
	}
	if rd.Path != nil {
		switch rd.Path.Type {
		case ir.FullPathReplace:
			out.PathRewriteSpecifier = &routev3.RedirectAction_PathRedirect{PathRedirect: rd.Path.Value}
		case ir.PrefixMatchReplace:
			prefix, rx, err := prefixRewrite(match, rd.Path.Value)
			if err != nil {
				return nil, err
			}
			switch {
			case rx != nil:
				out.PathRewriteSpecifier = &routev3.RedirectAction_RegexRewrite{RegexRewrite: rx}
			case prefix != "":
				out.PathRewriteSpecifier = &routev3.RedirectAction_PrefixRewrite{PrefixRewrite: prefix}
			}
		default:
			return nil, fmt.Errorf("unknown path modifier %q", rd.Path.Type)
		}
	}
	return out, nil
}

func directResponse(status uint32, body string) *routev3.DirectResponseAction {
	out := &routev3.DirectResponseAction{Status: status}
	if body != "" {
		out.Body = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: body}}
	}
	return out
}

// prefixRewrite replaces the prefix matched by match with repl, following
// the Gateway API's ReplacePrefixMatch: segment-wise, with no doubled or
// lost slash ("/foo" → "/" turns "/foo/bar" into "/bar", "/foo" → "/xyz"
// turns "/foo/bar" into "/xyz/bar" and "/foo" into "/xyz"). It returns
// either a prefix_rewrite value, a regex rewrite, or neither (no change).
func prefixRewrite(match *ir.PathMatch, repl string) (string, *matcherv3.RegexMatchAndSubstitute, error) {
	var matched string
	switch {
	case match == nil:
		matched = ""
	case match.Type == ir.PathPrefix:
		matched = strings.TrimRight(match.Value, "/")
	case match.Type == ir.PathExact:
		// The whole path is the matched prefix.
		return "", fullPathRewrite(repl), nil
	default:
		return "", nil, fmt.Errorf("ReplacePrefixMatch needs a PathPrefix match, not %q", match.Type)
	}
	r := strings.TrimRight(repl, "/")
	switch {
	case matched == "" && r == "":
		return "", nil, nil
	case r == "":
		// prefix_rewrite "/" would turn "/foo/bar" into "//bar": drop the
		// prefix and any slashes after it, and put back one.
		return "", regexRewrite("^"+regexp.QuoteMeta(matched)+"/*", "/"), nil
	case matched == "":
		// Everything matches the prefix "/"; keep the path after it.
		return "", regexRewrite("^/", r+"/"), nil
	default:
		// path_separated_prefix guarantees the path continues with "/" or
		// ends right after the prefix, so a literal swap is segment-wise.
		return r, nil, nil
	}
}

// fullPathRewrite replaces the whole path (not the query string).
func fullPathRewrite(repl string) *matcherv3.RegexMatchAndSubstitute {
	if repl == "" {
		repl = "/"
	}
	return regexRewrite("^.*$", repl)
}

// regexRewrite substitutes literal repl for pattern; backslashes in repl are
// escaped since RE2 reads "\1" as a capture group.
func regexRewrite(pattern, repl string) *matcherv3.RegexMatchAndSubstitute {
	return &matcherv3.RegexMatchAndSubstitute{
		Pattern:      &matcherv3.RegexMatcher{Regex: pattern},
		Substitution: strings.ReplaceAll(repl, `\`, `\\`),
	}
}
