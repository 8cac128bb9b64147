package gatewayapi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Path match ranks: lower ranks first.
const (
	rankExact = iota
	// RegularExpression precedence is implementation-specific: Portico puts
	// it after Exact and before PathPrefix, longer expressions first, so a
	// catch-all prefix "/" never shadows a regular expression.
	rankRegex
	rankPrefix
)

// precedence orders the matches of the routes of one virtual host.
//
// HTTPRoute matches follow the HTTPRoute specification: Exact path, then
// (regular expression, then) PathPrefix with the most characters, then a
// method match, then the most header matches, then the most query parameter
// matches. GRPCRoute matches follow the GRPCRoute specification: the most
// characters in the service, then in the method, then the most header
// matches. In the rare virtual host holding both kinds, GRPCRoute matches
// come first: their paths are specific to gRPC methods.
//
// Remaining ties go to the oldest route, then the first by namespace/name,
// then the first rule and match (and the routes of one match split by
// its backends' paths in their order, as their fractions need).
type precedence struct {
	grpc bool

	pathRank int
	pathLen  int
	method   bool
	headers  int
	queries  int

	serviceLen int
	methodLen  int

	created   metav1.Time
	namespace string
	name      string
	rule      int
	match     int
	part      int // of a match split by its backends' paths (splitByPath)
}

func (p *precedence) setRoute(rs *routeState, rule, match int) {
	p.created = rs.meta.CreationTimestamp
	p.namespace, p.name = rs.meta.Namespace, rs.meta.Name
	p.rule, p.match = rule, match
}

// before reports whether a takes precedence over q.
func (p *precedence) before(q *precedence) bool {
	if p.grpc != q.grpc {
		return p.grpc
	}
	if p.grpc {
		if p.serviceLen != q.serviceLen {
			return p.serviceLen > q.serviceLen
		}
		if p.methodLen != q.methodLen {
			return p.methodLen > q.methodLen
		}
		if p.headers != q.headers {
			return p.headers > q.headers
		}
		if p.pathRank != q.pathRank {
			return p.pathRank < q.pathRank
		}
	} else {
		if p.pathRank != q.pathRank {
			return p.pathRank < q.pathRank
		}
		if p.pathLen != q.pathLen {
			return p.pathLen > q.pathLen
		}
		if p.method != q.method {
			return p.method
		}
		if p.headers != q.headers {
			return p.headers > q.headers
		}
		if p.queries != q.queries {
			return p.queries > q.queries
		}
	}
	if !p.created.Equal(&q.created) {
		return p.created.Before(&q.created)
	}
	if p.namespace != q.namespace {
		return p.namespace < q.namespace
	}
	if p.name != q.name {
		return p.name < q.name
	}
	if p.rule != q.rule {
		return p.rule < q.rule
	}
	if p.match != q.match {
		return p.match < q.match
	}
	return p.part < q.part
}
