package gatewayapi

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/gatewayapi/inputs"
	"github.com/portico-dev/portico/internal/resource"
)

// A kind of route is registered here, once: its entry says which listener
// protocols it attaches to by default and how to read one object of it;
// its semantics (compiling its rules) are one file of their own
// (httproute.go, grpcroute.go, tlsroute.go, tcproute.go, udproute.go;
// the last three share l4.go). Everything else (attachment, status,
// budgets, virtual hosts, the incremental engine, the status writer) is
// kind-agnostic. resource.RouteKinds registers it for the layers below
// (snapshot, provider, writer) and gives the order in which translations
// take the kinds.
var routeKinds = map[resource.Kind]routeKind{
	resource.KindHTTPRoute: {
		protocols: []gwv1.ProtocolType{gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType},
		read: func(in *inputs.Reader, k resource.Key) (routeSource, bool) {
			r := in.HTTPRoute(k)
			if r == nil {
				return routeSource{}, false
			}
			return routeSource{&r.ObjectMeta, r.Spec.CommonRouteSpec, r.Spec.Hostnames, r}, true
		},
		compile: func(t *translator, rs *routeState, obj any) { t.compileHTTPRoute(rs, obj.(*gwv1.HTTPRoute).Spec.Rules) },
	},
	resource.KindGRPCRoute: {
		protocols: []gwv1.ProtocolType{gwv1.HTTPProtocolType, gwv1.HTTPSProtocolType},
		read: func(in *inputs.Reader, k resource.Key) (routeSource, bool) {
			r := in.GRPCRoute(k)
			if r == nil {
				return routeSource{}, false
			}
			return routeSource{&r.ObjectMeta, r.Spec.CommonRouteSpec, r.Spec.Hostnames, r}, true
		},
		compile: func(t *translator, rs *routeState, obj any) { t.compileGRPCRoute(rs, obj.(*gwv1.GRPCRoute).Spec.Rules) },
	},
	resource.KindTLSRoute: {
		protocols: []gwv1.ProtocolType{gwv1.TLSProtocolType},
		read: func(in *inputs.Reader, k resource.Key) (routeSource, bool) {
			r := in.TLSRoute(k)
			if r == nil {
				return routeSource{}, false
			}
			return routeSource{&r.ObjectMeta, r.Spec.CommonRouteSpec, r.Spec.Hostnames, r}, true
		},
		compile: func(t *translator, rs *routeState, obj any) { t.compileTLSRoute(rs, obj.(*gwv1.TLSRoute).Spec.Rules) },
	},
	resource.KindTCPRoute: {
		protocols: []gwv1.ProtocolType{gwv1.TCPProtocolType},
		read: func(in *inputs.Reader, k resource.Key) (routeSource, bool) {
			r := in.TCPRoute(k)
			if r == nil {
				return routeSource{}, false
			}
			return routeSource{&r.ObjectMeta, r.Spec.CommonRouteSpec, nil, r}, true
		},
		compile: func(t *translator, rs *routeState, obj any) { t.compileTCPRoute(rs, obj.(*gwv1.TCPRoute).Spec.Rules) },
	},
	resource.KindUDPRoute: {
		protocols: []gwv1.ProtocolType{gwv1.UDPProtocolType},
		read: func(in *inputs.Reader, k resource.Key) (routeSource, bool) {
			r := in.UDPRoute(k)
			if r == nil {
				return routeSource{}, false
			}
			return routeSource{&r.ObjectMeta, r.Spec.CommonRouteSpec, nil, r}, true
		},
		compile: func(t *translator, rs *routeState, obj any) { t.compileUDPRoute(rs, obj.(*gwv1.UDPRoute).Spec.Rules) },
	},
}

// routeKind is what the kind-agnostic semantics need of a kind of route.
type routeKind struct {
	// protocols are the listener protocols whose allowedRoutes.kinds
	// default to this kind.
	protocols []gwv1.ProtocolType
	// read returns the route of key k through in (false when none).
	read func(in *inputs.Reader, k resource.Key) (routeSource, bool)
	// compile compiles the rules of obj, the object read, into rs.rules.
	compile func(t *translator, rs *routeState, obj any)
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
