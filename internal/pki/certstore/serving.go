package certstore

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/portico-dev/portico/internal/pki"
)

// ErrNotReady is returned by ServingSource.Current before a usable serving
// certificate was loaded.
var ErrNotReady = errors.New("pki: xDS serving certificate not loaded yet")

// ServingSource keeps the xDS serving certificate of a replica: it watches
// the Secret portico-xds-tls of the controller namespace and holds the last
// usable certificate and client CA pool found in it. Every replica runs
// one; the Manager (leader) writes the Secret.
//
// A Secret that becomes unusable (or is deleted) does not replace the last
// good certificate; the leader rewrites it.
type ServingSource struct {
	cs        kubernetes.Interface
	namespace string
	name      string
	log       *slog.Logger

	cur     atomic.Pointer[servingCert]
	running atomic.Bool
}

type servingCert struct {
	cert    *tls.Certificate
	pool    *x509.CertPool
	version string // resourceVersion of the Secret
}

// NewServingSource returns a source for the Secret ServingSecretName in
// namespace; Run starts watching it.
func NewServingSource(cs kubernetes.Interface, namespace string, log *slog.Logger) *ServingSource {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ServingSource{cs: cs, namespace: namespace, name: ServingSecretName,
		log: log.With("secret", namespace+"/"+ServingSecretName)}
}

// Run watches the Secret until ctx is done; it returns once its watch has
// stopped. It may be called once.
func (s *ServingSource) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("pki: ServingSource.Run called twice")
	}
	sel := fields.OneTermEqualSelector("metadata.name", s.name).String()
	secrets := s.cs.CoreV1().Secrets(s.namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return secrets.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return secrets.Watch(ctx, o)
		},
	}
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: cache.ToListWatcherWithWatchListSemantics(lw, s.cs),
		ObjectType:    &corev1.Secret{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { s.observe(obj) },
			UpdateFunc: func(_, obj any) { s.observe(obj) },
			DeleteFunc: func(any) {
				s.log.Warn("xDS serving certificate secret deleted, keeping the loaded certificate")
			},
		},
	})
	informer.RunWithContext(ctx)
	return nil
}

func (s *ServingSource) observe(obj any) {
	sec, ok := obj.(*corev1.Secret)
	if !ok || sec.Name != s.name || sec.Namespace != s.namespace {
		return
	}
	if cur := s.cur.Load(); cur != nil && cur.version == sec.ResourceVersion {
		return
	}
	if err := s.Load(sec.Data, sec.ResourceVersion); err != nil {
		s.log.Error("xDS serving certificate secret unusable, keeping the loaded certificate", "error", err)
	}
}

// Load installs the certificate, key and client CAs of a serving Secret's
// data (tls.crt, tls.key, ca.crt), tagged with version. It is how Run
// applies the Secret; tests may call it directly.
func (s *ServingSource) Load(data map[string][]byte, version string) error {
	cert, err := tls.X509KeyPair(data[CertKey], data[KeyKey])
	if err != nil {
		return fmt.Errorf("pki: serving certificate: %w", err)
	}
	pool, err := pki.Pool(data[CACertKey])
	if err != nil {
		return fmt.Errorf("pki: serving secret %s: %w", CACertKey, err)
	}
	s.cur.Store(&servingCert{cert: &cert, pool: pool, version: version})
	s.log.Info("xDS serving certificate loaded", "version", version,
		"not_after", cert.Leaf.NotAfter, "serial", cert.Leaf.SerialNumber.Text(16))
	return nil
}

// Current returns the serving certificate and the pool of CAs that client
// certificates must chain to, or ErrNotReady.
func (s *ServingSource) Current() (*tls.Certificate, *x509.CertPool, error) {
	cur := s.cur.Load()
	if cur == nil {
		return nil, nil, ErrNotReady
	}
	return cur.cert, cur.pool, nil
}

// Ready reports whether a serving certificate is loaded (the xDS server
// accepts no handshake before).
func (s *ServingSource) Ready() bool { return s.cur.Load() != nil }

// Version is the resourceVersion of the Secret the current certificate
// came from ("" before any).
func (s *ServingSource) Version() string {
	if cur := s.cur.Load(); cur != nil {
		return cur.version
	}
	return ""
}
