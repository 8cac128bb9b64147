package server

import (
	"context"
	"crypto/x509"
	"net"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/portico-dev/portico/internal/pki"
)

// With client authentication (Server.TLS requiring client certificates), a
// proxy's identity is the Gateway named by the Portico URI SAN of its
// verified client certificate (pki.IdentityFromCert). A stream is bound to
// that identity when it opens, and every request must name the same
// gateway in node.cluster: since snapshots are keyed by node.cluster, a
// proxy can only ever receive its own Gateway's resources.
//
// With Server.GatewayUID set (the controller), the identity must also name
// the UID of the current Gateway object: the certificate of a Gateway that
// was deleted, or deleted and re-created under the same name, is refused
// when a stream opens, and the connections of streams already open with it
// are closed when the server learns of the change (see revalidate).

// peerCert returns the verified client certificate of ctx's peer and the
// peer's connection (nil when the credentials do not track it).
func peerCert(ctx context.Context) (*x509.Certificate, net.Conn, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil, nil, status.Error(codes.Unauthenticated, "no peer information")
	}
	var info credentials.TLSInfo
	var conn net.Conn
	switch a := p.AuthInfo.(type) {
	case connInfo:
		info, conn = a.TLSInfo, a.conn
	case credentials.TLSInfo:
		info = a
	default:
		return nil, nil, status.Error(codes.Unauthenticated, "connection is not TLS")
	}
	chains := info.State.VerifiedChains
	if len(chains) == 0 || len(chains[0]) == 0 {
		return nil, nil, status.Error(codes.Unauthenticated, "no verified client certificate")
	}
	return chains[0][0], conn, nil
}

// peerIdentity returns the Gateway identity of the verified client
// certificate of ctx's peer, the certificate, and the peer's connection (if
// tracked), or an Unauthenticated error.
func peerIdentity(ctx context.Context) (pki.Identity, *x509.Certificate, net.Conn, error) {
	cert, conn, err := peerCert(ctx)
	if err != nil {
		return pki.Identity{}, nil, nil, err
	}
	id, ok := pki.IdentityFromCert(cert)
	if !ok {
		return pki.Identity{}, nil, nil, status.Errorf(codes.Unauthenticated,
			"client certificate %q names no Gateway (want one URI SAN %s)",
			cert.Subject.CommonName, pki.GatewayURI("<namespace>", "<name>", "<uid>"))
	}
	return id, cert, conn, nil
}

// authorize checks that node, when it names a cluster, names identity. A
// node without cluster is left to bind (which refuses it on a stream's
// first request).
func authorize(identity string, node *corev3.Node) error {
	if c := node.GetCluster(); c != "" && c != identity {
		return status.Errorf(codes.PermissionDenied,
			"node.cluster %q does not match the gateway %q of the client certificate", c, identity)
	}
	return nil
}

// UIDLookup returns the UID of the current Gateway namespace/name, with
// found false when there is none. It is called when streams open and when
// the server re-checks open streams (after each Update), so it should read
// a cache, not the API server.
type UIDLookup func(ctx context.Context, namespace, name string) (uid string, found bool, err error)

// checkUID checks id against the current Gateway of its name: nil when
// lookup is nil (standalone: no UIDs), else the UID must be in the
// certificate and be the current one.
func checkUID(ctx context.Context, lookup UIDLookup, id pki.Identity) error {
	if lookup == nil {
		return nil
	}
	if id.UID == "" {
		return status.Errorf(codes.Unauthenticated,
			"client certificate of gateway %s names no Gateway UID", id.Gateway())
	}
	uid, found, err := lookup(ctx, id.Namespace, id.Name)
	switch {
	case err != nil:
		return status.Errorf(codes.Unavailable, "looking up gateway %s: %v", id.Gateway(), err)
	case !found:
		return status.Errorf(codes.Unauthenticated,
			"client certificate of gateway %s (uid %s): the gateway does not exist", id.Gateway(), id.UID)
	case uid != id.UID:
		return status.Errorf(codes.Unauthenticated,
			"client certificate of gateway %s names uid %s, a deleted gateway of that name (current uid %s)",
			id.Gateway(), id.UID, uid)
	}
	return nil
}
