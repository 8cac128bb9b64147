// Package certstore keeps the certificates of internal/pki in Kubernetes
// Secrets of the controller namespace and reads them back: the leader's
// Manager creates, renews and rotates the CA (Secret portico-ca), the xDS
// serving certificate (portico-xds-tls) and each Gateway's client
// certificate (portico-<gateway>-xds, owned by the Gateway), with
// server-side apply (field manager proxyspec.FieldManager); every
// replica's ServingSource watches the serving certificate's Secret and
// hands the xDS server the last usable certificate and CA bundle.
//
// Why a package apart from internal/pki: this is the part that talks to
// the API server, with client-go and controller-runtime. The
// certificates themselves (making a CA, issuing, verifying an identity)
// are pure, and the xDS server, which every replica and `portico
// standalone` run, uses them without pulling the Kubernetes client
// libraries; a test in internal/layers keeps internal/pki and
// internal/xds free of them. The xDS server takes a ServingSource as its
// CertSource interface, so it does not import this package either.
package certstore
