package gatewayapi

import (
	"net/netip"
	"sort"
	"strings"
)

// normalizeHostname lowercases h and reports whether it is a valid Gateway
// API Hostname: an RFC 1123 DNS name, optionally prefixed by the wildcard
// label "*.", and not an IP address.
func normalizeHostname(h string) (string, bool) {
	h = strings.ToLower(h)
	if h == "" || len(h) > 253 {
		return h, false
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return h, false
	}
	name := strings.TrimPrefix(h, "*.")
	for _, label := range strings.Split(name, ".") {
		if !validLabel(label) {
			return h, false
		}
	}
	return h, true
}

// validLabel reports whether s is an RFC 1123 label.
func validLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// hostnameMatches reports whether host (exact or wildcard) is covered by
// pattern: "" covers everything; an exact pattern covers only itself; a
// wildcard pattern "*.example.com" covers every name with at least one more
// label ("foo.example.com", "foo.bar.example.com", "*.foo.example.com" and
// "*.example.com" itself) but not "example.com".
func hostnameMatches(host, pattern string) bool {
	if pattern == "" || host == pattern {
		return true
	}
	if !strings.HasPrefix(pattern, "*.") {
		return false
	}
	suffix := pattern[1:] // ".example.com"
	return len(host) > len(suffix) && strings.HasSuffix(host, suffix)
}

// intersectHostnames returns the more specific of two hostnames when one
// covers the other ("" means any hostname).
func intersectHostnames(a, b string) (string, bool) {
	switch {
	case hostnameMatches(a, b):
		return a, true
	case hostnameMatches(b, a):
		return b, true
	}
	return "", false
}

// effectiveHostnames returns the hostnames a route serves on a listener: the
// intersections of the listener hostname with each route hostname, sorted
// and deduplicated. "" stands for any hostname. An empty result means the
// route does not match the listener.
func effectiveHostnames(listener string, route []string) []string {
	if len(route) == 0 {
		return []string{listener}
	}
	var out []string
	for _, r := range route {
		if h, ok := intersectHostnames(r, listener); ok {
			out = append(out, h)
		}
	}
	sort.Strings(out)
	return dedupSorted(out)
}

// hostnameSetsIntersect reports whether some hostname of a intersects some
// hostname of b.
func hostnameSetsIntersect(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if _, ok := intersectHostnames(x, y); ok {
				return true
			}
		}
	}
	return false
}

// hostnamesOverlap reports whether two distinct non-empty listener
// hostnames overlap, for the OverlappingTLSConfig condition.
func hostnamesOverlap(a, b string) bool {
	if a == "" || b == "" || a == b {
		return false
	}
	return hostnameMatches(a, b) || hostnameMatches(b, a)
}

func dedupSorted(s []string) []string {
	if len(s) < 2 {
		return s
	}
	out := s[:1]
	for _, v := range s[1:] {
		if v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}
