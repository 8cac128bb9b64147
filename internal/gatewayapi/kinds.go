package gatewayapi

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/gateway-api/pkg/features"

	"github.com/portico-dev/portico/internal/gatewayapi/inputs"
	"github.com/portico-dev/portico/internal/resource"
)

// A kind of route is registered here, once: routeKinds lists the entry
// that its semantic file declares (httproute.go, grpcroute.go,
// tlsroute.go, tcproute.go, udproute.go; the last three share l4.go): the
// listener protocols it attaches to by default, how its backends are
// used, the features it brings and its compile function. Everything else
// (attachment, status, budgets, virtual hosts, the incremental engine, the
// status writer) is kind-agnostic; reading one route is too, through the
// kind's resource.Descriptor (the layers below: snapshot, loader,
// provider, writer), whose order (resource.RouteKinds) is the order in
// which translations take the kinds.
var routeKinds [256]*routeKind

// init registers the kinds of route, and then the features they bring:
// in init, not in routeKinds's initializer, because compile functions
// reach routeKinds (an initialization cycle).
func init() {
	routeKinds = registerRouteKinds(&httpRouteKind, &grpcRouteKind, &tlsRouteKind, &tcpRouteKind, &udpRouteKind)
	supportedFeatures = sortedFeatures(routeKindFeatures(), gatewayFeatures...)
}

// routeKind is what the kind-agnostic semantics need of a kind of route.
type routeKind struct {
	kind resource.Kind
	// protocols are the listener protocols whose allowedRoutes.kinds
	// default to this kind.
	protocols []gwv1.ProtocolType
	// vhosts: the kind's routes are placed in virtual hosts by hostname
	// (HTTP listeners). Routes of two such kinds whose hostnames intersect
	// may not share a listener (resolveKindCollisions).
	vhosts bool
	// grpc: the kind's matches take gRPC precedence and its backends
	// speak HTTP/2.
	grpc bool
	// upstream is how the kind's routes use their backends.
	upstream backendClass
	// features are the conformance features the kind brings (features.go).
	features []features.FeatureName
	// compile compiles the rules of obj, the object read, into rs.rules.
	compile func(t *translator, rs *routeState, obj any)
}

// read returns the route of key k through in (false when none).
func (rk *routeKind) read(in *inputs.Reader, k resource.Key) (routeSource, bool) {
	obj, v, ok := in.Route(resource.Ref{Kind: rk.kind, Key: k})
	if !ok {
		return routeSource{}, false
	}
	return routeSource{v.Meta, *v.Spec, v.Hostnames, obj}, true
}

// registerRouteKinds indexes the entries by kind. Every kind of
// resource.RouteKinds has one (TestEveryRouteKindHasSemantics).
func registerRouteKinds(list ...*routeKind) (out [256]*routeKind) {
	for _, rk := range list {
		out[rk.kind] = rk
	}
	return out
}

// routeSource is one route as the kind-agnostic semantics see it.
type routeSource struct {
	meta      *metav1.ObjectMeta
	spec      gwv1.CommonRouteSpec
	hostnames []gwv1.Hostname
	obj       any // the object, for its kind's compile
}

// maxRouteKinds bounds the number of route kinds (kindCount arrays).
const maxRouteKinds = 8

// kindIndex is the index of a route kind in resource.RouteKinds.
func kindIndex(kind resource.Kind) int {
	for i, k := range resource.RouteKinds {
		if k == kind {
			return i
		}
	}
	return maxRouteKinds - 1
}

// routeKindNamed returns the route kind of the Gateway API group named
// kind, if Portico knows it.
func routeKindNamed(kind gwv1.Kind) (resource.Kind, bool) {
	for _, k := range resource.RouteKinds {
		if k.String() == string(kind) {
			return k, true
		}
	}
	return 0, false
}

// defaultRouteKinds lists the route kinds a listener of protocol p allows
// when its allowedRoutes.kinds is empty, in registration order.
func defaultRouteKinds(p gwv1.ProtocolType) []resource.Kind {
	var out []resource.Kind
	for _, k := range resource.RouteKinds {
		for _, q := range routeKinds[k].protocols {
			if q == p {
				out = append(out, k)
				break
			}
		}
	}
	return out
}

// mixedVhostKinds reports whether counts (attachments by kindIndex) hold
// routes of two kinds placed in virtual hosts.
func mixedVhostKinds(counts [maxRouteKinds]int) bool {
	n := 0
	for i, k := range resource.RouteKinds {
		if counts[i] > 0 && routeKinds[k].vhosts {
			n++
		}
	}
	return n > 1
}

// kindNames joins the names of kinds with ", ".
func kindNames(kinds []resource.Kind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.String()
	}
	return strings.Join(names, ", ")
}

// irRoutePrefix is the prefix of the ir.Route names of a route kind:
// "httproute/".
func irRoutePrefix(kind resource.Kind) string { return irRoutePrefixes[kindIndex(kind)] }

var irRoutePrefixes = func() (out [maxRouteKinds]string) {
	for i, k := range resource.RouteKinds {
		out[i] = strings.ToLower(k.String()) + "/"
	}
	return out
}()
