package gatewayapi

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
	"github.com/portico-dev/portico/internal/re2"
)

// ruleError is why a rule is invalid: a route condition reason and message.
type ruleError struct {
	reason string
	msg    string
}

func unsupported(format string, args ...any) *ruleError {
	return &ruleError{string(gwv1.RouteReasonUnsupportedValue), fmt.Sprintf(format, args...)}
}

// validRegex reports whether s is a valid RE2 expression (Go's
// regexp/syntax with Perl flags is a close proxy for the RE2 dialect Envoy
// uses) whose program stays within the size Envoy is given (re2).
func validRegex(s string) error {
	if s == "" {
		return fmt.Errorf("empty regular expression")
	}
	return re2.Check(s)
}

// validHeaderName reports whether s is an RFC 7230 token, the syntax of
// HTTP header names (pseudo-headers such as ":path" are not).
func validHeaderName(s string) bool {
	if s == "" || len(s) > ir.MaxHeaderNameBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue rejects control characters other than tab, bytes that
// are not UTF-8 (Envoy's configuration holds text), and values longer than
// Envoy takes.
func validHeaderValue(s string) bool {
	if len(s) > ir.MaxHeaderValueBytes || !utf8.ValidString(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// headerModifier validates a RequestHeaderModifier or ResponseHeaderModifier.
//
// Repeated names: header names are case-insensitive, and the API's rule
// for HTTPHeader entries is that "the first entry with an equivalent name
// MUST be considered ... subsequent entries with an equivalent header name
// MUST be ignored". Portico applies it across the whole modifier, in the
// order set, add, remove: the first entry naming a header decides what
// happens to it, later ones (in the same list or another) are ignored,
// and the route stays Accepted. (Applying two actions to one header would
// leave the result to the data plane's order of operations, which the API
// does not define.)
//
// Host (in any case) is not a header Envoy lets a modifier touch. Setting
// or adding it on a request is what users mean by a host rewrite, so that
// is what it becomes: hostRewrite is its value (":authority" for HTTP/2
// and gRPC). Removing it, or any Host on a response, has no meaning and is
// refused with UnsupportedValue, like other invalid values.
func headerModifier(f *gwv1.HTTPHeaderFilter, what string, request bool) (m *ir.HeaderModifier, hostRewrite *string, rerr *ruleError) {
	if f == nil {
		return nil, nil, unsupported("%s filter without its %s field", what, lowerFirst(what))
	}
	seen := map[string]bool{}
	// check validates a name and reports whether an earlier entry named
	// the same header (this one is then ignored).
	check := func(name string) (repeated bool, err *ruleError) {
		if !validHeaderName(name) {
			return false, unsupported("%s: %q is not a valid header name", what, name)
		}
		k := strings.ToLower(name)
		if seen[k] {
			return true, nil
		}
		seen[k] = true
		return false, nil
	}
	m = &ir.HeaderModifier{}
	value := func(h gwv1.HTTPHeader) *ruleError {
		if !validHeaderValue(h.Value) {
			return unsupported("%s: invalid value for header %q (control characters, or longer than %d bytes)", what, h.Name, ir.MaxHeaderValueBytes)
		}
		return nil
	}
	host := func(h gwv1.HTTPHeader) (bool, *ruleError) {
		if !strings.EqualFold(string(h.Name), "host") {
			return false, nil
		}
		if !request {
			return true, unsupported("%s: a response has no Host header to modify", what)
		}
		if h.Value == "" {
			return true, unsupported("%s: Host cannot be set to an empty value", what)
		}
		v := h.Value
		hostRewrite = &v
		return true, nil
	}
	for _, list := range []struct {
		headers []gwv1.HTTPHeader
		out     *[]ir.Header
	}{{f.Set, &m.Set}, {f.Add, &m.Add}} {
		for _, h := range list.headers {
			if repeated, err := check(string(h.Name)); err != nil {
				return nil, nil, err
			} else if repeated {
				continue
			}
			if err := value(h); err != nil {
				return nil, nil, err
			}
			if isHost, err := host(h); err != nil {
				return nil, nil, err
			} else if isHost {
				continue
			}
			*list.out = append(*list.out, ir.Header{Name: string(h.Name), Value: h.Value})
		}
	}
	for _, name := range f.Remove {
		if repeated, err := check(name); err != nil {
			return nil, nil, err
		} else if repeated {
			continue
		}
		if strings.EqualFold(name, "host") {
			return nil, nil, unsupported("%s: the Host header cannot be removed", what)
		}
		m.Remove = append(m.Remove, name)
	}
	return m, hostRewrite, nil
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// pathModifier validates the path of a RequestRedirect or URLRewrite.
// prefixOnly reports whether every match of the rule is a PathPrefix match,
// which ReplacePrefixMatch requires.
func pathModifier(p *gwv1.HTTPPathModifier, what string, prefixOnly bool) (*ir.PathModifier, *ruleError) {
	if p == nil {
		return nil, nil
	}
	switch p.Type {
	case gwv1.FullPathHTTPPathModifier:
		if p.ReplaceFullPath == nil {
			return nil, unsupported("%s: path type ReplaceFullPath without replaceFullPath", what)
		}
		if err := checkPath(*p.ReplaceFullPath); err != nil {
			return nil, unsupported("%s: replaceFullPath %q: %v", what, *p.ReplaceFullPath, err)
		}
		return &ir.PathModifier{Type: ir.FullPathReplace, Value: *p.ReplaceFullPath}, nil
	case gwv1.PrefixMatchHTTPPathModifier:
		if p.ReplacePrefixMatch == nil {
			return nil, unsupported("%s: path type ReplacePrefixMatch without replacePrefixMatch", what)
		}
		if !prefixOnly {
			return nil, unsupported("%s: ReplacePrefixMatch needs every match of the rule to be a PathPrefix match", what)
		}
		v := *p.ReplacePrefixMatch
		if v != "" {
			if err := checkPath(v); err != nil {
				return nil, unsupported("%s: replacePrefixMatch %q: %v", what, v, err)
			}
		}
		return &ir.PathModifier{Type: ir.PrefixMatchReplace, Value: v}, nil
	default:
		return nil, unsupported("%s: path modifier type %q is not supported", what, p.Type)
	}
}

// checkPath validates an absolute request path of a match or modifier.
func checkPath(p string) error {
	switch {
	case !strings.HasPrefix(p, "/"):
		return fmt.Errorf("must start with /")
	case strings.Contains(p, "//"):
		return fmt.Errorf("must not contain //")
	case strings.ContainsAny(p, "?#"):
		return fmt.Errorf("must not contain ? or #")
	case len(p) > 1024:
		return fmt.Errorf("longer than 1024 characters")
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= 0x20 || c >= 0x7f {
			return fmt.Errorf("contains a space, control or non-ASCII character")
		}
	}
	return nil
}

func preciseHostname(h *gwv1.PreciseHostname, what string) (*string, *ruleError) {
	if h == nil {
		return nil, nil
	}
	n, ok := normalizeHostname(string(*h))
	if !ok || strings.HasPrefix(n, "*") {
		return nil, unsupported("%s: hostname %q is not a valid DNS name", what, *h)
	}
	return &n, nil
}

// redirect validates a RequestRedirect filter.
func redirect(f *gwv1.HTTPRequestRedirectFilter, prefixOnly bool) (*ir.Redirect, *ruleError) {
	if f == nil {
		return nil, unsupported("RequestRedirect filter without its requestRedirect field")
	}
	r := &ir.Redirect{StatusCode: 302}
	if f.Scheme != nil {
		switch *f.Scheme {
		case "http", "https":
			s := *f.Scheme
			r.Scheme = &s
		default:
			return nil, unsupported("RequestRedirect: scheme %q is not supported; use http or https", *f.Scheme)
		}
	}
	var err *ruleError
	if r.Hostname, err = preciseHostname(f.Hostname, "RequestRedirect"); err != nil {
		return nil, err
	}
	if r.Path, err = pathModifier(f.Path, "RequestRedirect", prefixOnly); err != nil {
		return nil, err
	}
	if f.Port != nil {
		if *f.Port < 1 || *f.Port > 65535 {
			return nil, unsupported("RequestRedirect: port %d is out of range 1-65535", *f.Port)
		}
		p := uint32(*f.Port)
		r.Port = &p
	} else if r.Scheme != nil {
		// Without a port, a redirect to a scheme uses the scheme's
		// well-known port. With neither, the listener's port is used: it
		// is set when the route is placed on a listener.
		p := uint32(80)
		if *r.Scheme == "https" {
			p = 443
		}
		r.Port = &p
	}
	if f.StatusCode != nil {
		switch *f.StatusCode {
		case 301, 302, 303, 307, 308:
			r.StatusCode = *f.StatusCode
		default:
			return nil, unsupported("RequestRedirect: status code %d is not supported; use 301, 302, 303, 307 or 308", *f.StatusCode)
		}
	}
	return r, nil
}

// urlRewrite validates a URLRewrite filter.
func urlRewrite(f *gwv1.HTTPURLRewriteFilter, prefixOnly bool) (*ir.URLRewrite, *ruleError) {
	if f == nil {
		return nil, unsupported("URLRewrite filter without its urlRewrite field")
	}
	rw := &ir.URLRewrite{}
	var err *ruleError
	if rw.Hostname, err = preciseHostname(f.Hostname, "URLRewrite"); err != nil {
		return nil, err
	}
	if rw.Path, err = pathModifier(f.Path, "URLRewrite", prefixOnly); err != nil {
		return nil, err
	}
	return rw, nil
}

// mirrorPercent is the share of requests a RequestMirror filter mirrors.
func mirrorPercent(f *gwv1.HTTPRequestMirrorFilter) (float64, *ruleError) {
	switch {
	case f.Percent != nil && f.Fraction != nil:
		return 0, unsupported("RequestMirror: only one of percent and fraction may be set")
	case f.Percent != nil:
		if *f.Percent < 0 || *f.Percent > 100 {
			return 0, unsupported("RequestMirror: percent %d is out of range 0-100", *f.Percent)
		}
		return float64(*f.Percent), nil
	case f.Fraction != nil:
		den := int32(100)
		if f.Fraction.Denominator != nil {
			den = *f.Fraction.Denominator
		}
		num := f.Fraction.Numerator
		if den < 1 || num < 0 || num > den {
			return 0, unsupported("RequestMirror: fraction %d/%d is invalid; want 0 <= numerator <= denominator, denominator >= 1", num, den)
		}
		return 100 * float64(num) / float64(den), nil
	}
	return 100, nil
}

// mirror resolves a RequestMirror filter. An unresolved backend is recorded
// on the route and the mirror dropped, as the specification requires.
func (t *translator) mirror(rs *routeState, f *gwv1.HTTPRequestMirrorFilter) (*ir.Mirror, *clusterDef, *ruleError) {
	if f == nil {
		return nil, nil, unsupported("RequestMirror filter without its requestMirror field")
	}
	pct, err := mirrorPercent(f)
	if err != nil {
		return nil, nil, err
	}
	def, p := t.resolveBackend(rs, f.BackendRef)
	if p != nil {
		rs.rules.unresolvedRef(p.reason, "RequestMirror: "+p.message)
		return nil, nil, nil
	}
	if pct == 0 {
		return nil, nil, nil
	}
	return &ir.Mirror{Cluster: def.name, Percent: pct}, def, nil
}

// parseDuration parses a GEP-2257 Duration: up to four number+unit groups
// ("1h30m", "500ms"), units h, m, s and ms, at most 5 digits each.
func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	var total time.Duration
	groups := 0
	for i := 0; i < len(s); {
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i || j-i > 5 {
			return 0, fmt.Errorf("invalid duration %q: want up to 5 digits before each unit", s)
		}
		n := 0
		for _, c := range s[i:j] {
			n = n*10 + int(c-'0')
		}
		var unit time.Duration
		switch {
		case strings.HasPrefix(s[j:], "ms"):
			unit, j = time.Millisecond, j+2
		case strings.HasPrefix(s[j:], "h"):
			unit, j = time.Hour, j+1
		case strings.HasPrefix(s[j:], "m"):
			unit, j = time.Minute, j+1
		case strings.HasPrefix(s[j:], "s"):
			unit, j = time.Second, j+1
		default:
			return 0, fmt.Errorf("invalid duration %q: units are h, m, s and ms", s)
		}
		total += time.Duration(n) * unit
		groups++
		i = j
	}
	if groups > 4 {
		return 0, fmt.Errorf("invalid duration %q: at most 4 groups", s)
	}
	return total, nil
}

// timeouts validates HTTPRoute rule timeouts.
func timeouts(tm *gwv1.HTTPRouteTimeouts) (req, backend *time.Duration, err *ruleError) {
	if tm == nil {
		return nil, nil, nil
	}
	if tm.Request != nil {
		d, e := parseDuration(string(*tm.Request))
		if e != nil {
			return nil, nil, unsupported("timeouts.request: %v", e)
		}
		req = &d
	}
	if tm.BackendRequest != nil {
		d, e := parseDuration(string(*tm.BackendRequest))
		if e != nil {
			return nil, nil, unsupported("timeouts.backendRequest: %v", e)
		}
		backend = &d
	}
	if req != nil && backend != nil && *req != 0 && (*backend == 0 || *backend > *req) {
		return nil, nil, unsupported("timeouts.backendRequest (%s) must not exceed timeouts.request (%s)", *tm.BackendRequest, *tm.Request)
	}
	return req, backend, nil
}
