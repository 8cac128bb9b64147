// Package ir is Portico's data-plane-neutral model of one Gateway: the
// listeners, routes, clusters and secrets a proxy needs. The gatewayapi
// package builds it from Gateway API objects; xds/translate turns it into
// Envoy resources. It holds plain values only: no clients, no clocks.
//
// Every slice is sorted by its builder so that equal inputs give equal IR.
package ir

import "time"

// Gateway is the configuration of the proxies of one Gateway.
type Gateway struct {
	Namespace string
	Name      string
	// Listeners are the proxy's listening ports, one per port, sorted by Port.
	Listeners []*Listener
	// Clusters are the upstream Service ports referenced by routes (as
	// backends or mirrors), sorted by Name, each listed once.
	Clusters []*Cluster
	// Secrets are the TLS certificates referenced by filter chains, sorted by
	// Name.
	Secrets []*Secret
	// Proxy are the settings of all listeners and clusters (access logs,
	// timeouts, circuit breakers); nil means the defaults.
	Proxy *ProxySettings
	// Addresses are the IP addresses every listener binds to (the
	// Gateway's spec.addresses in standalone mode), in order; none means
	// all addresses (0.0.0.0).
	Addresses []string
}

// Key is "<namespace>/<name>", the identity proxies present as node.cluster.
func (g *Gateway) Key() string { return g.Namespace + "/" + g.Name }

// Protocol of a Listener.
type Protocol string

const (
	// ProtocolHTTP: plaintext HTTP, one filter chain with a RouteConfig.
	ProtocolHTTP Protocol = "HTTP"
	// ProtocolHTTPS: filter chains selected by SNI (TLS inspection). A
	// chain with CertificateSecrets terminates TLS, one without passes the
	// TLS stream through untouched; each then routes HTTP (RouteConfig,
	// terminating chains only) or forwards the connection (TCP). HTTPS
	// listeners and TLS listeners of either mode share a port this way.
	ProtocolHTTPS Protocol = "HTTPS"
	// ProtocolTCP: one filter chain without TLS that forwards connections
	// (TCP).
	ProtocolTCP Protocol = "TCP"
	// ProtocolUDP: datagrams forwarded by Listener.UDP; no filter chains.
	ProtocolUDP Protocol = "UDP"
)

// Listener is one port of the proxy. Gateway API listeners (and ListenerSet
// entries) that share a port and protocol are merged into one Listener.
type Listener struct {
	// Name is unique within the Gateway and stable, e.g. "http-80".
	Name     string
	Port     uint32
	Protocol Protocol
	// FilterChains: for HTTP and TCP exactly one with no ServerNames; for
	// HTTPS one per distinct SNI hostname, sorted by Name. A chain with no
	// ServerNames on HTTPS is the catch-all for a listener without a
	// hostname. None for UDP.
	FilterChains []*FilterChain
	// UDP forwards the datagrams of a UDP listener; nil otherwise.
	UDP *UDPForward
}

// FilterChain selects traffic by SNI (HTTPS) and routes it with
// RouteConfig, or forwards whole connections with TCP: exactly one of the
// two is set.
type FilterChain struct {
	Name        string
	ServerNames []string
	// CertificateSecrets name entries of Gateway.Secrets, delivered by SDS;
	// none on an HTTPS listener's chain means TLS passthrough.
	CertificateSecrets []string
	RouteConfig        *RouteConfig
	TCP                *TCPForward
	// ListenerTag, when set, is put in the ListenerTagHeader of each
	// request of the chain, before routing: the route table is shared by
	// the chains of a port, and its virtual hosts with a ListenerTag answer
	// 421 to the requests of another chain's listener.
	ListenerTag string
	// ExtAuth authorize each request of a chain with a RouteConfig, in
	// order, before it is routed (the listeners' filters of type
	// ExternalAuth); none for most chains.
	ExtAuth []*ExtAuth
	// ClientValidation, on a terminating chain, asks TLS clients for a
	// certificate and checks it against CA certificates (the Gateway's
	// spec.tls.frontend for the listener's port); nil asks for none.
	ClientValidation *ClientValidation
}

// ExtAuth asks an authorization server whether a request may proceed (a
// listener filter of type ExternalAuth). A request it denies gets the
// server's answer (HTTP) or 403; one it allows goes on with the headers the
// server added, except Host and :authority, and is routed after them. A
// server that cannot be reached denies (403).
type ExtAuth struct {
	// Name is stable and unique in the Gateway:
	// "<kind>/<ns>/<name>/<listener>/filter/<i>".
	Name string
	// GRPC: Envoy's ext_authz gRPC protocol; else HTTP (200 allows).
	GRPC bool
	// Cluster names an entry of Gateway.Clusters (HTTP/2 when GRPC).
	Cluster string
	// PathPrefix is put before the request's path in an HTTP check.
	PathPrefix string
	// AllowedRequestHeaders are sent to the server (besides those the
	// protocol always sends); none: the protocol's default (gRPC: all, HTTP:
	// Host, Method, Path, Content-Length and Authorization).
	AllowedRequestHeaders []string
	// AllowedResponseHeaders of an HTTP server's answer are copied into the
	// request; none: all of them.
	AllowedResponseHeaders []string
	// MaxRequestBytes of the body are sent to the server (truncated); 0:
	// no body.
	MaxRequestBytes uint32
}

// ClientValidation is the client-certificate check of a terminating chain.
type ClientValidation struct {
	// CACertificates is the PEM bundle of trusted CA certificates (never
	// empty: a port whose CA references all fail serves no chain).
	CACertificates string
	// Mode is AllowValidOnly (the default, "") or AllowInsecureFallback.
	Mode ClientValidationMode
}

// ClientValidationMode says what a chain does with a client that presents
// no certificate or an untrusted one.
type ClientValidationMode string

const (
	// ClientValidationAllowValidOnly fails the handshake of such a client.
	ClientValidationAllowValidOnly ClientValidationMode = "AllowValidOnly"
	// ClientValidationAllowInsecureFallback lets it through.
	ClientValidationAllowInsecureFallback ClientValidationMode = "AllowInsecureFallback"
)

// TCPForward forwards each connection of a filter chain to one of weighted
// clusters (the route of a TLS or TCP listener).
type TCPForward struct {
	// Name is the route's stable name, "<kind>/<ns>/<name>/rule/<i>", used
	// as the stat prefix.
	Name string
	// Backends share the connections by weight. A connection given to an
	// Invalid backend, or on a route without backends, is closed at once.
	Backends []WeightedBackend
}

// UDPForward forwards the datagrams of a UDP listener: each session
// (client address and port) to one of weighted clusters, like TCPForward's
// connections.
type UDPForward struct {
	Name     string
	Backends []WeightedBackend
}

// RouteConfig is a set of virtual hosts served on a filter chain.
type RouteConfig struct {
	Name         string
	VirtualHosts []*VirtualHost // sorted by Name
}

// ListenerTagHeader carries FilterChain.ListenerTag from the connection
// manager to route matching; it is removed before forwarding.
const ListenerTagHeader = "x-portico-listener"

// VirtualHost serves one hostname ("*" for any, "*.example.com" wildcard).
type VirtualHost struct {
	Name     string
	Hostname string
	// ListenerTag, when set, is the tag of the listener owning the virtual
	// host in a table shared by filter chains (FilterChain.ListenerTag);
	// ListenerTagHeader is removed from its requests before they are
	// forwarded. Its first route then answers the others with 421.
	ListenerTag string
	// Routes are in match-precedence order: the first match wins.
	Routes []*Route
}

// Route is one match of one rule of an HTTP or gRPC route with its action.
type Route struct {
	// Name identifies the source: "<kind>/<ns>/<name>/rule/<i>/match/<j>".
	Name            string
	Match           Match
	RequestHeaders  *HeaderModifier
	ResponseHeaders *HeaderModifier
	// CORS answers CORS preflight requests and adds the CORS headers to
	// the responses of cross-origin requests; nil for none.
	CORS *CORS
	// Exactly one of the actions is set.
	Redirect       *Redirect
	DirectResponse *DirectResponse
	Forward        *Forward
}

// CORS is the cross-origin resource sharing policy of a route (an
// HTTPRoute CORS filter).
type CORS struct {
	// AllowOrigins are the origins allowed: each matches the Origin
	// header in any letter case, Exact, or Regex (an RE2 expression of
	// the whole value).
	AllowOrigins []OriginMatch
	// AllowMethods, AllowHeaders and ExposeHeaders are the values of
	// their Access-Control-* headers; "*" may be one of them.
	AllowMethods  []string
	AllowHeaders  []string
	ExposeHeaders []string
	// MaxAgeSeconds is Access-Control-Max-Age.
	MaxAgeSeconds    int32
	AllowCredentials bool
}

// OriginMatch matches an Origin header value.
type OriginMatch struct {
	Exact string
	Regex string
}

// PathMatchType is how a path is matched.
type PathMatchType string

const (
	PathExact  PathMatchType = "Exact"
	PathPrefix PathMatchType = "PathPrefix"
	PathRegex  PathMatchType = "RegularExpression"
)

// StringMatchType is how a header or query parameter value is matched.
type StringMatchType string

const (
	StringExact StringMatchType = "Exact"
	StringRegex StringMatchType = "RegularExpression"
)

// Match is a conjunction: every set field must match.
type Match struct {
	// Path nil matches every path.
	Path        *PathMatch
	Headers     []StringMatch
	QueryParams []StringMatch
	// Method is an HTTP method; empty matches any.
	Method string
	// Fraction, when set, matches only the requests whose random draw (one
	// per request, in millionths, the same for every route of a table) is
	// below *Fraction. The routes made from one rule whose backends rewrite
	// paths differently have increasing fractions, the last none, so that
	// they divide that rule's requests in the backends' weights.
	Fraction *uint32
}

// PathMatch matches the request path. For PathPrefix the value matches whole
// path segments ("/foo" matches "/foo" and "/foo/bar", not "/foobar").
type PathMatch struct {
	Type  PathMatchType
	Value string
}

// StringMatch matches a named header or query parameter.
type StringMatch struct {
	Name  string
	Type  StringMatchType
	Value string
	// Invert matches what the rest does not match (headers only), a
	// missing header included.
	Invert bool
}

// Header is a name and value.
type Header struct {
	Name  string
	Value string
}

// HeaderModifier edits headers of a request or response.
type HeaderModifier struct {
	Set    []Header
	Add    []Header
	Remove []string
}

// PathModifierType says how a path is rewritten.
type PathModifierType string

const (
	FullPathReplace    PathModifierType = "ReplaceFullPath"
	PrefixMatchReplace PathModifierType = "ReplacePrefixMatch"
)

// PathModifier rewrites the path: the whole of it, or the matched prefix.
type PathModifier struct {
	Type  PathModifierType
	Value string
}

// Redirect answers with an HTTP redirect. Unset fields keep the request's.
type Redirect struct {
	Scheme     *string
	Hostname   *string
	Port       *uint32
	Path       *PathModifier
	StatusCode int
}

// DirectResponse answers with a fixed status and body.
type DirectResponse struct {
	Status uint32
	Body   string
}

// Forward proxies the request to weighted backends.
type Forward struct {
	// Backends with their weights. A backend with Invalid set stands for a
	// backendRef that could not be resolved: its share of traffic is
	// answered with HTTP 500.
	Backends   []*WeightedBackend
	URLRewrite *URLRewrite
	Mirrors    []*Mirror
	// Timeout bounds the whole request, retries included; BackendTimeout
	// each try upstream.
	Timeout        *time.Duration
	BackendTimeout *time.Duration
	// Retry is the rule's retry stanza; nil means no retries.
	Retry *Retry
}

// Retry retries a request upstream. Connection failures, refused streams
// and resets before the request was sent are always retried; responses
// only when their status is in Codes.
type Retry struct {
	// Attempts is the number of retries after the first try; 0 disables
	// retrying.
	Attempts uint32
	// Codes are the response statuses retried, sorted and unique.
	Codes []uint32
	// Backoff is the base interval between tries; nil means the data
	// plane's default.
	Backoff *time.Duration
}

// WeightedBackend is one backendRef of a rule.
type WeightedBackend struct {
	// Cluster names an entry of Gateway.Clusters; empty when Invalid.
	Cluster string
	Weight  uint32
	Invalid bool
	// Filters are the backendRef's own filters (HTTP and gRPC routes):
	// applied only to the requests sent to this backend and to its
	// responses, together with the rule's; nil for none.
	Filters *BackendFilters
}

// BackendFilters are the filters of one backendRef.
type BackendFilters struct {
	Request  *HeaderModifier
	Response *HeaderModifier
	// URLRewrite is the backendRef's URLRewrite: only its Hostname is set
	// here (the Host of the requests sent to this backend, instead of the
	// route's). A path rewrite of a backend is its route's
	// Forward.URLRewrite: the translation gives backends that rewrite paths
	// differently routes of their own (Match.Fraction), so the path of a
	// route is one.
	URLRewrite *URLRewrite
}

// URLRewrite rewrites the host and/or path before forwarding.
type URLRewrite struct {
	Hostname *string
	Path     *PathModifier
}

// Mirror sends a copy of a share of requests to a cluster.
type Mirror struct {
	Cluster string
	// Percent of requests mirrored, 0 < Percent <= 100.
	Percent float64
}

// UpstreamProtocol is the protocol spoken to a cluster's endpoints.
type UpstreamProtocol string

const (
	UpstreamHTTP1 UpstreamProtocol = "HTTP/1.1"
	UpstreamHTTP2 UpstreamProtocol = "HTTP/2"
	// UpstreamTCP: connections forwarded as they are (TLS and TCP routes):
	// no HTTP protocol options.
	UpstreamTCP UpstreamProtocol = "TCP"
	// UpstreamUDP: datagrams to the UDP port of the Service (UDP routes).
	UpstreamUDP UpstreamProtocol = "UDP"
)

// Cluster is one port of one Service.
type Cluster struct {
	// Name is "<namespace>/<service>/<port>", "<namespace>/<service>/<port>/udp"
	// for the UDP port of a Service (a Service may have TCP and UDP on one
	// port number).
	Name             string
	ServiceNamespace string
	ServiceName      string
	ServicePort      int32
	Protocol         UpstreamProtocol
	// Endpoints are the ready endpoints, sorted by address and port.
	Endpoints []Endpoint
	// TLS, when set, is the TLS the proxy speaks to the endpoints (a
	// BackendTLSPolicy applies to the Service port); nil: plaintext.
	TLS *UpstreamTLS
}

// UpstreamTLS is how the proxy connects to a cluster's endpoints with
// TLS, validating their certificates.
type UpstreamTLS struct {
	// Blocked, when not empty, says why the TLS asked for cannot be
	// configured (an unusable CA, for one): the cluster then has no
	// endpoints, so that its requests fail (503) and nothing is ever sent
	// in plaintext. The other fields are unset.
	Blocked string
	// SNI is the server name the proxy sends.
	SNI string
	// CACertificates are the trusted CA certificates, PEM; when empty,
	// SystemCAFile is the proxy's file of the system's CAs instead.
	CACertificates []byte
	SystemCAFile   string
	// SubjectAltNames: the endpoint's certificate must have one of them.
	// Never empty (the hostname checked is one).
	SubjectAltNames []SubjectAltName
	// ClientCertificate names the entry of Gateway.Secrets the proxy
	// presents to the endpoints; empty for none.
	ClientCertificate string
}

// SubjectAltName is a subject alternative name a certificate must have.
type SubjectAltName struct {
	Type  SANType
	Value string
}

// SANType is the type of a SubjectAltName.
type SANType string

const (
	SANDNS SANType = "DNS"
	SANURI SANType = "URI"
)

// Endpoint is an address and the target port taken from the EndpointSlice.
type Endpoint struct {
	Address string
	Port    uint32
}

// Secret is a TLS certificate and key.
type Secret struct {
	// Name is "<namespace>/<secret>".
	Name string
	Cert []byte
	Key  []byte
}
