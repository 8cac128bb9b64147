package translate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	luav3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/lua/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/portico-dev/portico/internal/ir"
)

// Large route tables in scoped form: a table per hostname, chosen with the
// single table's semantics.
//
// In VHDS form (vhds.go) a change of a route sends one virtual host, but
// Envoy rebuilds its whole in-memory table from all the virtual hosts it
// holds on every update: 23 ms at 5,000 routes on the bench machine, the
// floor of "route create → first 200" at that size. A table of at least
// Options.ScopeAtRoutes routes (DefaultScopeAtRoutes) over two virtual
// hosts or more is therefore served in scoped form, where Envoy rebuilds
// only the table of the hostname that changed:
//
//   - each virtual host becomes a RouteConfiguration of its own,
//     "<route config>/<domain>", holding exactly the virtual host of the
//     single table (same domain, same routes, same
//     ignore_port_in_host_matching) and removing the scope header before
//     the request goes upstream; served by RDS;
//   - a ScopedRouteConfiguration of the same name whose key is that name,
//     naming that RouteConfiguration; served by SRDS over ADS;
//   - the connection manager routes by scoped RDS, the scope key being the
//     value of scopeHeader; its first HTTP filter is a Lua filter,
//     "<route config>#host-scope", served by ECDS, that sets scopeHeader
//     to the key of the virtual host the single table would have chosen
//     for the request's host, or removes it when none would be (404, as
//     with the single table), and clears the route cache so that Envoy
//     selects the scope again.
//
// The Lua filter does what Envoy's RouteMatcher::findVirtualHost does for
// the single table: the port is dropped as ignore_port_in_host_matching
// drops it (the text from the last ':' on, whatever follows it, unless
// that ':' is inside an IPv6 literal's brackets), the host is lowered
// (ASCII), then
// an exact domain wins, then the longest wildcard suffix ("*.example.com"
// needs at least one character before ".example.com"), then the catch-all
// "*". It sees the host after the connection manager's own normalization,
// as the route matcher does, so a trailing dot is treated as the single
// table treats it. A key a client sends is overwritten or removed, and
// every scope's table removes the header before the upstream request, so
// backends see the request as with the single table. Each listener's keys
// start with its route config's name: Envoy subscribes to scopes with one
// wildcard subscription per proxy, so every scoped connection manager
// holds every scope of its Gateway, but only its own filter makes its
// keys, and several listeners of a Gateway can each be scoped.
//
// What changes when: a change of a route sends the RouteConfiguration of
// its hostname only (one virtual host, as in VHDS form, but Envoy then
// rebuilds that hostname's table alone); a hostname that comes or goes
// adds or removes a scope and a RouteConfiguration, and sends the Lua
// filter again (its domain map is O(hostnames), not O(routes)); the
// Listener changes only when its own fields do, since the filter comes
// by ECDS. A table that crosses the threshold changes form, and its
// Listener with it (Envoy drains the listener's connections once).
//
// Trade-offs, and why not always: the Lua filter runs on every request of
// a scoped listener, about 15 µs per request on the bench machine
// (test/envoy BenchmarkEnvoyRequest: 300 against 285 µs per round trip),
// so small tables, where Envoy's rebuild costs little, keep the VHDS form;
// at DefaultScopeAtRoutes routes a VHDS update costs Envoy about 5 ms, in
// scoped form about 1.7 ms whatever the table (BenchmarkEnvoyRouteUpdate:
// 19 ms against 1.7 ms at 5,000 routes). A Gateway whose routes all share
// one hostname gets nothing from scoping (one virtual host: the table
// stays in VHDS form). Options.ScopeAtRoutes negative turns the scoped
// form off. Prefix wildcards ("foo.*"), which Gateway API hostnames cannot
// express, keep a table in VHDS form. Envoy sends state-of-the-world
// scopes in full (a scope missing from a response is removed); the xDS
// server does so.
//
// The differential traffic test (test/envoy TestVHDSMatchesSingleTable)
// sends the same generated requests (letter cases, ports and malformed
// ports, IPv6 literals, trailing dots, wildcards, precedence, two
// listeners) to a Gateway served whole, in VHDS form and in scoped form
// over delta and state-of-the-world xDS, and requires the same backend
// and status from all, before and after changes.

// DefaultScopeAtRoutes is the number of Envoy routes from which a table
// with several virtual hosts is served in scoped form by default: at
// 1,000 routes Envoy rebuilds a whole table in about 5 ms.
const DefaultScopeAtRoutes = 1000

// scopeHeader carries a request's scope key from the Lua filter to scoped
// route selection; removed before the request goes upstream.
const scopeHeader = "x-portico-route-scope"

// luaTypeURL is the type of the host-scope filter's config (ECDS).
const luaTypeURL = "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua"

// scopeAt is the route count from which tables are scoped; 0: never.
func (o Options) scopeAt() int {
	switch {
	case o.ScopeAtRoutes < 0:
		return 0
	case o.ScopeAtRoutes == 0:
		return DefaultScopeAtRoutes
	}
	return o.ScopeAtRoutes
}

// scopeForm is a route table in scoped form.
type scopeForm struct {
	hosts map[string]*hostScope // by virtual host name
	// domains are the table's domains with their keys, sorted: the input
	// of filter.
	domains []string
	// routes and scopes are the hosts' route configs and scopes, sorted
	// by name; filter is the host-scope filter's ECDS resource.
	routes, scopes []*entry
	filter         *entry
}

// hostScope is the route config and scope of one virtual host.
type hostScope struct {
	v         *vhostEntry
	rc, scope *entry
}

// scopes reports whether rc is served in scoped form: at least
// Options.ScopeAtRoutes routes over two virtual hosts or more, whose
// domains the host-scope filter can express. Memoized per translation.
func (t *translator) scopes(rc *ir.RouteConfig) bool {
	at := t.opts.scopeAt()
	if at == 0 || rc == nil || len(rc.VirtualHosts) < 2 {
		return false
	}
	if v, ok := t.scopedTables[rc]; ok {
		return v
	}
	n, ok := 0, true
	for _, vh := range rc.VirtualHosts {
		if vh == nil || !scopableDomain(vhostDomain(vh)) {
			ok = false
			break
		}
		n += len(vh.Routes)
	}
	ok = ok && n >= at
	if t.scopedTables == nil {
		t.scopedTables = map[*ir.RouteConfig]bool{}
	}
	t.scopedTables[rc] = ok
	return ok
}

// vhostDomain is the domain of vh's virtual host (see routeTable).
func vhostDomain(vh *ir.VirtualHost) string {
	if d := strings.ToLower(vh.Hostname); d != "" {
		return d
	}
	return "*"
}

// scopableDomain: "*", an exact domain or a "*" suffix wildcard, of the
// characters of hostnames.
func scopableDomain(d string) bool {
	rest := d
	if d == "*" {
		return true
	}
	if strings.HasPrefix(d, "*") {
		rest = d[1:]
	}
	if rest == "" {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// withScopeForm returns e with its scoped form when scoped, without it
// otherwise. e itself is not changed (it may be the previous translation's).
func (t *translator) withScopeForm(e *rcEntry, scoped bool) (*rcEntry, error) {
	if !scoped {
		if e.scope == nil {
			return e, nil
		}
		cp := *e
		cp.scope = nil
		return &cp, nil
	}
	var old *scopeForm
	if prev := t.memo.routeConfigs[e.name]; prev != nil {
		old = prev.scope
	}
	if e.scope != nil {
		old = e.scope
	}
	f, err := t.scopeForm(e, old)
	if err != nil {
		return nil, err
	}
	if f == e.scope {
		return e, nil
	}
	cp := *e
	cp.scope = f
	return &cp, nil
}

// scopeForm makes the scoped form of e, reusing what old (the previous
// form of the same table) holds: a host's route config when its virtual
// host is the same, its scope while its domain stays, the filter while
// the domains do.
func (t *translator) scopeForm(e *rcEntry, old *scopeForm) (*scopeForm, error) {
	next := &scopeForm{hosts: make(map[string]*hostScope, len(e.vhosts))}
	same := old != nil && len(old.hosts) == len(e.vhosts)
	for vhName, v := range e.vhosts {
		var prev *hostScope
		if old != nil {
			prev = old.hosts[vhName]
		}
		switch {
		case prev != nil && prev.v == v:
			next.hosts[vhName] = prev
			continue
		case prev != nil && prev.v.domain == v.domain:
			same = false
			rc, err := t.hostRouteConfig(prev.rc.name, v)
			if err != nil {
				return nil, err
			}
			next.hosts[vhName] = &hostScope{v: v, rc: rc, scope: prev.scope}
			continue
		}
		same = false
		name := e.name + "/" + v.domain
		rc, err := t.hostRouteConfig(name, v)
		if err != nil {
			return nil, err
		}
		sc, err := t.scope(name)
		if err != nil {
			return nil, err
		}
		next.hosts[vhName] = &hostScope{v: v, rc: rc, scope: sc}
	}
	if same {
		return old, nil
	}
	hosts := make([]*hostScope, 0, len(next.hosts))
	for _, h := range next.hosts {
		hosts = append(hosts, h)
	}
	slices.SortFunc(hosts, func(a, b *hostScope) int { return strings.Compare(a.rc.name, b.rc.name) })
	next.routes = make([]*entry, len(hosts))
	next.scopes = make([]*entry, len(hosts))
	next.domains = make([]string, len(hosts))
	for i, h := range hosts {
		next.routes[i], next.scopes[i], next.domains[i] = h.rc, h.scope, h.v.domain
	}
	if old != nil && slices.Equal(old.domains, next.domains) {
		next.filter = old.filter
	} else {
		f, err := t.hostScopeFilter(e.name, next.domains)
		if err != nil {
			return nil, err
		}
		next.filter = f
	}
	return next, nil
}

// hostRouteConfig is the route config named name holding v alone, as the
// single table holds it, removing the scope header upstream. Its shell is
// the table's (validated with it) but for the name and that header, so it
// is not validated again.
func (t *translator) hostRouteConfig(name string, v *vhostEntry) (*entry, error) {
	shell, h, err := t.tableShell(name, []*vhostEntry{v}, func(rc *routev3.RouteConfiguration) {
		rc.RequestHeadersToRemove = []string{scopeHeader}
	}, false)
	if err != nil {
		return nil, fmt.Errorf("route config %q: %w", name, err)
	}
	// shell is this host's own: it carries the virtual host itself, whose
	// framed encoding is shared (never written: proto copies unknown
	// fields when it encodes them).
	shell.ProtoReflect().SetUnknown(v.framed)
	return newEntry(name, shell, h), nil
}

// scope is the scope named name whose key is name, selecting the route
// config of the same name.
func (t *translator) scope(name string) (*entry, error) {
	sc := &routev3.ScopedRouteConfiguration{
		Name:                   name,
		RouteConfigurationName: name,
		Key: &routev3.ScopedRouteConfiguration_Key{
			Fragments: []*routev3.ScopedRouteConfiguration_Key_Fragment{{
				Type: &routev3.ScopedRouteConfiguration_Key_Fragment_StringKey{StringKey: name},
			}},
		},
	}
	return t.resourceEntry(name, sc)
}

// hostScopeFilterName is the ECDS name of the host-scope filter of the
// table named table.
func hostScopeFilterName(table string) string { return table + "#host-scope" }

// hostScopeFilter is the ECDS resource of the host-scope filter of the
// table named table, whose virtual hosts serve domains.
func (t *translator) hostScopeFilter(table string, domains []string) (*entry, error) {
	lua, err := anypb.New(&luav3.Lua{DefaultSourceCode: &corev3.DataSource{
		Specifier: &corev3.DataSource_InlineString{InlineString: hostScopeLua(table, domains)},
	}})
	if err != nil {
		return nil, fmt.Errorf("host-scope filter of %q: %w", table, err)
	}
	name := hostScopeFilterName(table)
	return t.resourceEntry(name, &corev3.TypedExtensionConfig{Name: name, TypedConfig: lua})
}

// scopedRoutes makes hcm route by the scoped form of the table named
// table: its host-scope filter first, scopes by SRDS and their tables by
// RDS, all over ADS.
func scopedRoutes(hcm *hcmv3.HttpConnectionManager, table string) {
	hcm.HttpFilters = append([]*hcmv3.HttpFilter{{
		Name: hostScopeFilterName(table),
		ConfigType: &hcmv3.HttpFilter_ConfigDiscovery{ConfigDiscovery: &corev3.ExtensionConfigSource{
			ConfigSource: adsConfigSource(),
			TypeUrls:     []string{luaTypeURL},
		}},
	}}, hcm.HttpFilters...)
	hcm.RouteSpecifier = &hcmv3.HttpConnectionManager_ScopedRoutes{ScopedRoutes: &hcmv3.ScopedRoutes{
		Name: table,
		ScopeKeyBuilder: &hcmv3.ScopedRoutes_ScopeKeyBuilder{
			Fragments: []*hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder{{
				Type: &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_{
					HeaderValueExtractor: &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor{
						Name:        scopeHeader,
						ExtractType: &hcmv3.ScopedRoutes_ScopeKeyBuilder_FragmentBuilder_HeaderValueExtractor_Index{Index: 0},
					},
				},
			}},
		},
		RdsConfigSource: adsConfigSource(),
		ConfigSpecifier: &hcmv3.ScopedRoutes_ScopedRds{ScopedRds: &hcmv3.ScopedRds{
			ScopedRdsConfigSource: adsConfigSource(),
		}},
	}}
}

// hostScopeLua is the source of the host-scope filter of the table named
// table with the sorted domains (scopableDomain each): the key of domain d
// is table + "/" + d.
func hostScopeLua(table string, domains []string) string {
	n := len(hostScopeLuaBody) + 512
	for _, d := range domains {
		n += 2*len(d) + len(table) + 16
	}
	b := make([]byte, 0, n)
	b = append(b, "-- Portico host-scope filter (internal/xds/translate/scoped.go): the\n"+
		"-- virtual host Envoy's single table would choose, as a scope key.\nlocal exact = {\n"...)
	catchAll := false
	var wild []string
	for _, d := range domains {
		switch {
		case d == "*":
			catchAll = true
		case strings.HasPrefix(d, "*"):
			wild = append(wild, d)
		default:
			b = append(b, "  ["...)
			b = appendLuaString(b, "", d)
			b = append(b, "] = "...)
			b = appendLuaString(b, table+"/", d)
			b = append(b, ",\n"...)
		}
	}
	b = append(b, "}\n-- wildcard suffixes by length, longest first\nlocal suffixes = {\n"...)
	// Longest suffix first, then by name (domains are sorted).
	slices.SortStableFunc(wild, func(x, y string) int { return len(y) - len(x) })
	for i := 0; i < len(wild); {
		j := i
		for j < len(wild) && len(wild[j]) == len(wild[i]) {
			j++
		}
		b = append(b, "  {"...)
		b = strconv.AppendInt(b, int64(len(wild[i])-1), 10)
		b = append(b, ", {"...)
		for _, d := range wild[i:j] {
			b = append(b, '[')
			b = appendLuaString(b, "", d[1:])
			b = append(b, "] = "...)
			b = appendLuaString(b, table+"/", d)
			b = append(b, ", "...)
		}
		b = append(b, "}},\n"...)
		i = j
	}
	b = append(b, "}\nlocal catch_all = "...)
	if catchAll {
		b = appendLuaString(b, table+"/", "*")
	} else {
		b = append(b, "nil"...)
	}
	b = append(b, "\nlocal header = "...)
	b = appendLuaString(b, "", scopeHeader)
	b = append(b, '\n')
	b = append(b, hostScopeLuaBody...)
	return string(b)
}

// hostScopeLuaBody is the host-scope filter's code after its tables.
const hostScopeLuaBody = `
local function key_of(host)
  -- ignore_port_in_host_matching: drop the text from the last ':' on,
  -- unless that ':' is inside an IPv6 literal's brackets.
  local colon = host:match("^.*():")
  if colon then
    local bracket = host:match("^.*()%]")
    if bracket == nil or bracket < colon then
      host = host:sub(1, colon - 1)
    end
  end
  host = host:lower()
  local k = exact[host]
  if k then
    return k
  end
  local n = #host
  for i = 1, #suffixes do
    local s = suffixes[i]
    if s[1] < n then
      k = s[2][host:sub(n - s[1] + 1)]
      if k then
        return k
      end
    end
  end
  return catch_all
end

function envoy_on_request(handle)
  local headers = handle:headers()
  local k = key_of(headers:get(":authority") or "")
  if k then
    headers:replace(header, k)
  else
    headers:remove(header)
  end
  handle:clearRouteCache()
end
`

// luaString is s as a Lua string literal (appendLuaString).
func luaString(s string) string { return string(appendLuaString(nil, "", s)) }

// appendLuaString appends prefix+s as a Lua string literal: bytes other
// than letters, digits and a few punctuation marks as decimal escapes.
func appendLuaString(b []byte, prefix, s string) []byte {
	b = append(b, '"')
	for _, part := range [2]string{prefix, s} {
		for i := 0; i < len(part); i++ {
			c := part[i]
			if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("./*-_:#", c) >= 0 {
				b = append(b, c)
				continue
			}
			b = append(b, '\\', '0'+c/100, '0'+c/10%10, '0'+c%10)
		}
	}
	return append(b, '"')
}
