package gatewayapi

import (
	"regexp"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/ir"
)

// The CORS filter of HTTPRoute rules (feature HTTPRouteCORS), served by
// Envoy's CORS filter with the rule's policy on each of its routes.
//
// Choices where the specification leaves room:
//   - Origins match in any letter case (scheme and host are
//     case-insensitive), and an origin without a port also matches the
//     same origin with its scheme's default port (80 for http, 443 for
//     https), and the other way round, as the API says ports are assumed.
//   - A "*" in the host is greedy to the left and matches one or more
//     characters of a host (DNS labels and their dots, no port or path):
//     "https://*.bar.com" matches "https://a.b.bar.com", not
//     "https://bar.com". "*" alone allows every origin.
//   - A preflight request from an origin that is not allowed is answered
//     by the proxy (200) without CORS headers and never reaches the
//     backend: the browser then refuses the cross-origin request, as the
//     API allows ("returns 204/200 ... but doesn't set the relevant
//     cross-origin response headers").
//   - The CSRF-safelisted methods need no listing; Access-Control-Max-Age
//     is 5 seconds when maxAge is unset or not positive (the CRD's default,
//     which input that no API server has seen may lack).
//   - A rule has at most one CORS filter (a second is UnsupportedValue and
//     drops the rule, as two URLRewrite filters do).

// defaultCORSMaxAge is the API's default maxAge, in seconds.
const defaultCORSMaxAge = 5

// corsPolicy compiles a CORS filter.
func corsPolicy(f *gwv1.HTTPCORSFilter) (*ir.CORS, *ruleError) {
	if f == nil {
		return nil, unsupported("CORS filter without its cors field")
	}
	out := &ir.CORS{MaxAgeSeconds: f.MaxAge}
	if out.MaxAgeSeconds <= 0 {
		out.MaxAgeSeconds = defaultCORSMaxAge
	}
	if f.AllowCredentials != nil {
		out.AllowCredentials = *f.AllowCredentials
	}
	for _, o := range f.AllowOrigins {
		m, err := originMatch(string(o))
		if err != nil {
			return nil, err
		}
		out.AllowOrigins = append(out.AllowOrigins, m)
	}
	for _, m := range f.AllowMethods {
		out.AllowMethods = appendUnique(out.AllowMethods, string(m), false)
	}
	for _, h := range f.AllowHeaders {
		out.AllowHeaders = appendUnique(out.AllowHeaders, string(h), true)
	}
	for _, h := range f.ExposeHeaders {
		out.ExposeHeaders = appendUnique(out.ExposeHeaders, string(h), true)
	}
	// Methods and header names are RFC 7230 tokens (or "*"): they are
	// joined into header values.
	for _, vs := range [][]string{out.AllowMethods, out.AllowHeaders, out.ExposeHeaders} {
		for _, v := range vs {
			if v != "*" && !validHeaderName(v) {
				return nil, unsupported("CORS: %q is not a method or header name", v)
			}
		}
	}
	return out, nil
}

// appendUnique appends v unless list has it (in any letter case when fold).
func appendUnique(list []string, v string, fold bool) []string {
	for _, x := range list {
		if x == v || (fold && strings.EqualFold(x, v)) {
			return list
		}
	}
	return append(list, v)
}

// originMatch compiles one allowOrigins entry (see the file's doc).
func originMatch(origin string) (ir.OriginMatch, *ruleError) {
	if origin == "*" {
		return ir.OriginMatch{Regex: ".*"}, nil
	}
	scheme, rest, ok := strings.Cut(origin, "://")
	scheme = strings.ToLower(scheme)
	if !ok || (scheme != "http" && scheme != "https") || rest == "" || strings.ContainsAny(rest, "/?#@ ") {
		return ir.OriginMatch{}, unsupported("CORS: allowOrigins %q is not <http|https>://<host>[:<port>]", origin)
	}
	host, port := rest, ""
	if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		host, port = rest[:i], rest[i+1:]
		if port == "" || strings.Trim(port, "0123456789") != "" || len(port) > 5 {
			return ir.OriginMatch{}, unsupported("CORS: allowOrigins %q has an invalid port", origin)
		}
	}
	if host == "" || strings.Count(host, "*") > 1 || (strings.Contains(host, "*") && !strings.HasPrefix(host, "*")) {
		return ir.OriginMatch{}, unsupported("CORS: allowOrigins %q: the host may have one \"*\", leftmost", origin)
	}
	defaultPort := map[string]string{"http": "80", "https": "443"}[scheme]
	var b strings.Builder
	b.WriteString("(?i)")
	b.WriteString(scheme)
	b.WriteString("://")
	if h, wild := strings.CutPrefix(host, "*"); wild {
		b.WriteString("[^/:]+")
		b.WriteString(regexp.QuoteMeta(h))
	} else {
		b.WriteString(regexp.QuoteMeta(host))
	}
	switch port {
	case "", defaultPort:
		b.WriteString("(:" + defaultPort + ")?")
	default:
		b.WriteString(":" + port)
	}
	if err := validRegex(b.String()); err != nil {
		return ir.OriginMatch{}, unsupported("CORS: allowOrigins %q: %v", origin, err)
	}
	return ir.OriginMatch{Regex: b.String()}, nil
}
