package server

import (
	"context"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/portico-dev/portico/internal/pki"
)

// With TLS (Server.TLS set), a proxy's identity is the Gateway named by the
// URI SAN of its verified client certificate (pki.GatewayFromCert). A
// stream is bound to that identity when it opens, and every request must
// name the same gateway in node.cluster: since snapshots are keyed by
// node.cluster, a proxy can only ever receive its own Gateway's resources.

// peerGateway returns "<namespace>/<name>" of the Gateway identified by the
// verified client certificate of ctx's peer, or an Unauthenticated error.
func peerGateway(ctx context.Context) (string, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", status.Error(codes.Unauthenticated, "no peer information")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return "", status.Error(codes.Unauthenticated, "connection is not TLS")
	}
	chains := info.State.VerifiedChains
	if len(chains) == 0 || len(chains[0]) == 0 {
		return "", status.Error(codes.Unauthenticated, "no verified client certificate")
	}
	ns, name, ok := pki.GatewayFromCert(chains[0][0])
	if !ok {
		return "", status.Errorf(codes.Unauthenticated,
			"client certificate %q names no Gateway", chains[0][0].Subject.CommonName)
	}
	return ns + "/" + name, nil
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
