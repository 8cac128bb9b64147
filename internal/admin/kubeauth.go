package admin

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
)

// Delegated authentication and authorization, as kube-rbac-proxy and
// controller-runtime's metrics filter do it, with their settings: results
// are cached (a token's authentication 1 minute, an allowed request 5
// minutes, a denied one 30 seconds), so a revoked permission may be
// honoured for up to 5 minutes; each review times out after 10 seconds and
// is retried with backoff on transient errors.
//
// Why not controller-runtime's filter itself
// (sigs.k8s.io/controller-runtime/pkg/metrics/filters, v0.25.2): it is
// built from the same k8s.io/apiserver delegating authenticator and
// authorizer used here, and checks any path, but it answers a token the
// API server rejects with 500 "Authentication failed" and logs an error
// for each — a client error turned into a server error, and a log any
// client can flood. Here, as in kube-apiserver and kube-rbac-proxy, no
// token and a rejected token are 401 (logged at debug level), a user
// without the permission 403, and only a review that cannot be made 500.
var (
	authCacheTTL      = time.Minute
	allowCacheTTL     = 5 * time.Minute
	denyCacheTTL      = 30 * time.Second
	reviewTimeout     = 10 * time.Second
	reviewRetryPolicy = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
)

// KubernetesAuth returns the Middleware of a debug server reachable from
// the network: every request must carry a bearer token that the API
// server of cfg accepts (a TokenReview, authentication.k8s.io/v1) for a
// user allowed the request's verb (its method in lower case: get) on its
// path as a non-resource URL (a SubjectAccessReview,
// authorization.k8s.io/v1; e.g. get on /debug/xds, which a ClusterRole
// with nonResourceURLs ["/debug/*"] grants). The process's identity needs
// create on tokenreviews and subjectaccessreviews. A nil log discards.
func KubernetesAuth(cfg *rest.Config, log *slog.Logger) (Middleware, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg = rest.CopyConfig(cfg)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("debug authentication: %w", err)
	}
	authn, err := authenticationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("debug authentication: %w", err)
	}
	authz, err := authorizationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("debug authorization: %w", err)
	}
	backoff := reviewRetryPolicy
	a, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		CacheTTL:                 authCacheTTL,
		TokenAccessReviewClient:  authn,
		TokenAccessReviewTimeout: reviewTimeout,
		WebhookRetryBackoff:      &backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("debug authentication: %w", err)
	}
	z, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authz,
		AllowCacheTTL:             allowCacheTTL,
		DenyCacheTTL:              denyCacheTTL,
		WebhookRetryBackoff:       &backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("debug authorization: %w", err)
	}
	log = log.With("component", "debug-auth")
	return func(next http.Handler) http.Handler {
		return &kubeAuth{log: log, authn: a, authz: z, next: next}
	}, nil
}

type kubeAuth struct {
	log   *slog.Logger
	authn authenticator.Request
	authz authorizer.Authorizer
	next  http.Handler
}

func (k *kubeAuth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	res, ok, err := k.authn.AuthenticateRequest(r)
	if err != nil || !ok {
		k.log.Debug("debug request not authenticated", "path", r.URL.Path, "remote", r.RemoteAddr, "error", err)
		w.Header().Set("WWW-Authenticate", `Bearer realm="portico debug"`)
		text(w, http.StatusUnauthorized, "Unauthorized: send a bearer token the Kubernetes API server accepts")
		return
	}
	attrs := authorizer.AttributesRecord{User: res.User, Verb: strings.ToLower(r.Method), Path: r.URL.Path}
	decision, reason, err := k.authz.Authorize(r.Context(), attrs)
	if err != nil && decision != authorizer.DecisionAllow {
		k.log.Error("debug request: authorization check failed", "user", res.User.GetName(), "path", r.URL.Path, "error", err)
		text(w, http.StatusInternalServerError, "authorization check failed")
		return
	}
	if decision != authorizer.DecisionAllow {
		k.log.Info("debug request forbidden", "user", res.User.GetName(), "verb", attrs.Verb, "path", r.URL.Path, "reason", reason)
		text(w, http.StatusForbidden, fmt.Sprintf("Forbidden: user %q may not %s the non-resource URL %s", res.User.GetName(), attrs.Verb, r.URL.Path))
		return
	}
	k.next.ServeHTTP(w, r)
}

// SelfSignedTLS returns a TLS configuration serving a certificate
// generated now (valid for a year) by a CA generated with it, for the
// host name, localhost, 127.0.0.1, ::1 and ips, and that CA's PEM, which
// clients can pin. Bearer tokens must not cross the network in clear text:
// a debug server that is not on loopback serves TLS.
func SelfSignedTLS(ips ...net.IP) (*tls.Config, []byte, error) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "portico"
	}
	ips = append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, ips...)
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, ips, []string{"localhost"})
	if err != nil {
		return nil, nil, fmt.Errorf("debug server certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("debug server certificate: %w", err)
	}
	// certPEM is the serving certificate followed by its CA.
	var caPEM []byte
	for rest := certPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil && c.IsCA {
			caPEM = pem.EncodeToMemory(b)
		}
	}
	if caPEM == nil {
		caPEM = certPEM // a self-signed leaf is its own CA
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, caPEM, nil
}
