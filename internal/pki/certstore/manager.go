package certstore

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/portico-dev/portico/internal/pki"
	"github.com/portico-dev/portico/internal/proxyspec"
)

// Names of the Secrets in the controller namespace.
const (
	CASecretName      = "portico-ca"      // ca.crt (active CA first, then older ones), ca.key
	ServingSecretName = "portico-xds-tls" // tls.crt, tls.key, ca.crt
)

// Secret keys.
const (
	CACertKey = "ca.crt"
	CAKeyKey  = "ca.key"
	CertKey   = corev1.TLSCertKey       // tls.crt
	KeyKey    = corev1.TLSPrivateKeyKey // tls.key
)

// Defaults of Config.
const (
	DefaultCAValidity     = 5 * 365 * 24 * time.Hour
	DefaultServerValidity = 365 * 24 * time.Hour
	// DefaultClientValidity is the lifetime of a proxy's client
	// certificate. It is renewed two thirds into it (after 16 hours), so a
	// leader may be absent for up to 8 hours before certificates expire.
	DefaultClientValidity = 24 * time.Hour
	// MinClientValidity is the shortest client certificate validity: a
	// certificate's lifetime includes Backdate, and one much shorter would
	// be due for renewal as soon as it is issued.
	MinClientValidity    = 10 * time.Minute
	DefaultCheckInterval = time.Hour
)

// Config configures a Manager.
type Config struct {
	// Client reads and writes Secrets and reads Gateways. Its reads must
	// go to the API server (not an informer cache): the Manager must see
	// its own writes, or it would mint a second CA. Its scheme must know
	// core/v1 and gateway.networking.k8s.io/v1.
	Client client.Client
	// Namespace is the controller namespace (CA and serving Secrets).
	Namespace string
	// DNSNames and IPs are added to the serving certificate's SANs, after
	// pki.ServerDNSNames(Namespace).
	DNSNames []string
	IPs      []net.IP
	// Validities of new certificates; zero means the default. A
	// certificate is renewed two thirds into its lifetime, the CA too; a
	// replaced CA stays in the ca.crt bundles until it expires, so the
	// certificates it issued keep verifying. A client certificate names
	// the UID of its Gateway and is re-issued when that UID changes.
	CAValidity, ServerValidity, ClientValidity time.Duration
	// CheckInterval bounds the time between two checks of Run.
	CheckInterval time.Duration
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	Log *slog.Logger
}

// Manager keeps the CA, the xDS serving certificate and the Gateways'
// client certificates in their Secrets. Only the leader runs it: it writes
// (server-side apply, field manager "portico").
type Manager struct {
	cfg Config
	mu  sync.Mutex // serialises checks and writes
}

// NewManager validates cfg and returns a Manager.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Client == nil || cfg.Namespace == "" {
		return nil, errors.New("pki: client and namespace are required")
	}
	if cfg.CAValidity <= 0 {
		cfg.CAValidity = DefaultCAValidity
	}
	if cfg.ServerValidity <= 0 {
		cfg.ServerValidity = DefaultServerValidity
	}
	if cfg.ClientValidity <= 0 {
		cfg.ClientValidity = DefaultClientValidity
	}
	if cfg.ClientValidity < MinClientValidity {
		return nil, fmt.Errorf("pki: client certificate validity %v is shorter than %v", cfg.ClientValidity, MinClientValidity)
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = DefaultCheckInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cfg.DNSNames = dedupe(append(pki.ServerDNSNames(cfg.Namespace), cfg.DNSNames...))
	return &Manager{cfg: cfg}, nil
}

// Run checks the certificates at once and then periodically, every
// CheckInterval or sooner when one is due for renewal, until ctx is done
// (the end of the leader's term). Failed checks are retried with backoff.
// It returns nil when ctx is done.
func (m *Manager) Run(ctx context.Context) error {
	backoff := time.Second
	for {
		next, err := m.check(ctx)
		delay := m.cfg.CheckInterval
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			m.cfg.Log.Error("pki check failed, will retry", "error", err, "retry_in", backoff)
			delay, backoff = backoff, min(2*backoff, m.cfg.CheckInterval)
		} else {
			backoff = time.Second
			if d := next.Sub(m.cfg.Now()); d < delay {
				delay = max(d, time.Second)
			}
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Ensure creates or renews, as needed, the CA, the serving certificate, and
// the existing client certificate Secrets (whose ca.crt follows a CA
// rotation). It writes nothing when everything is current.
func (m *Manager) Ensure(ctx context.Context) error {
	_, err := m.check(ctx)
	return err
}

// check is Ensure; it also returns when the next renewal is due.
func (m *Manager) check(ctx context.Context) (time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Now()
	st, err := m.ensureCA(ctx, now)
	if err != nil {
		return time.Time{}, err
	}
	next := pki.RenewalTime(st.ca.Certificate())
	for _, old := range st.certs[1:] {
		next = earliest(next, old.NotAfter) // leaves the bundle then
	}
	leaf, err := m.ensureServing(ctx, now, st)
	if err != nil {
		return time.Time{}, err
	}
	next = earliest(next, pki.RenewalTime(leaf))

	var list corev1.SecretList
	if err := m.cfg.Client.List(ctx, &list,
		client.MatchingLabels{proxyspec.LabelManagedBy: proxyspec.ManagedByValue},
		client.HasLabels{proxyspec.LabelGatewayName, proxyspec.LabelGatewayNamespace}); err != nil {
		return time.Time{}, fmt.Errorf("pki: list client certificate secrets: %w", err)
	}
	var errs []error
	for i := range list.Items {
		sec := &list.Items[i]
		ns, gw := sec.Labels[proxyspec.LabelGatewayNamespace], sec.Labels[proxyspec.LabelGatewayName]
		if ns != sec.Namespace || sec.Name != proxyspec.ClientCertSecretName(gw) || !sec.DeletionTimestamp.IsZero() {
			continue
		}
		owners := ownerRefs(sec.OwnerReferences)
		uid, err := m.ownerUID(ctx, ns, gw, sec)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if uid == "" {
			// Its Gateway is gone: garbage collection or the infra
			// reconciler deletes the Secret.
			continue
		}
		leaf, err := m.ensureClient(ctx, now, st, pki.Identity{Namespace: ns, Name: gw, UID: uid}, sec, owners)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		next = earliest(next, pki.RenewalTime(leaf))
	}
	return next, errors.Join(errs...)
}

// EnsureClientCert creates or renews the client certificate Secret of
// Gateway ns/gw (proxyspec.ClientCertSecretName(gw) in ns: tls.crt, tls.key,
// ca.crt), owned by the Gateway. It fails if the Gateway does not exist.
func (m *Manager) EnsureClientCert(ctx context.Context, ns, gw string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var g gwv1.Gateway
	if err := m.cfg.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: gw}, &g); err != nil {
		return fmt.Errorf("pki: gateway %s/%s: %w", ns, gw, err)
	}
	owner := []*metav1ac.OwnerReferenceApplyConfiguration{metav1ac.OwnerReference().
		WithAPIVersion(gwv1.GroupVersion.String()).WithKind("Gateway").
		WithName(g.Name).WithUID(g.UID).WithController(true)}
	now := m.cfg.Now()
	st, err := m.ensureCA(ctx, now)
	if err != nil {
		return err
	}
	sec, err := m.get(ctx, ns, proxyspec.ClientCertSecretName(gw))
	if err != nil {
		return err
	}
	_, err = m.ensureClient(ctx, now, st, pki.Identity{Namespace: ns, Name: gw, UID: string(g.UID)}, sec, owner)
	return err
}

// ownerUID is the UID of the Gateway a client certificate Secret belongs
// to: that of its controlling Gateway owner reference, else of the live
// Gateway ns/gw; "" when there is no such Gateway.
func (m *Manager) ownerUID(ctx context.Context, ns, gw string, sec *corev1.Secret) (string, error) {
	for _, r := range sec.OwnerReferences {
		if r.Kind == "Gateway" && r.Name == gw && r.Controller != nil && *r.Controller &&
			strings.HasPrefix(r.APIVersion, gwv1.GroupName+"/") {
			return string(r.UID), nil
		}
	}
	var g gwv1.Gateway
	err := m.cfg.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: gw}, &g)
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("pki: gateway %s/%s: %w", ns, gw, err)
	}
	return string(g.UID), nil
}

// DeleteClientCert deletes the client certificate Secret of Gateway ns/gw;
// a missing Secret is not an error.
func (m *Manager) DeleteClientCert(ctx context.Context, ns, gw string) error {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: proxyspec.ClientCertSecretName(gw)}}
	if err := m.cfg.Client.Delete(ctx, sec); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("pki: delete client certificate of %s/%s: %w", ns, gw, err)
	}
	return nil
}

// caState is the CA that signs, and the bundle of CAs to trust.
type caState struct {
	ca     *pki.CA
	certs  []*x509.Certificate // trusted CAs, active first
	bundle []byte              // certs, PEM-encoded
	pool   *x509.CertPool
}

// ensureCA loads the CA Secret and creates or rotates the CA if needed. A
// rotated CA, and any older CA still valid, stay in the bundle.
func (m *Manager) ensureCA(ctx context.Context, now time.Time) (*caState, error) {
	sec, err := m.get(ctx, m.cfg.Namespace, CASecretName)
	if err != nil {
		return nil, err
	}
	var ca *pki.CA
	var trusted []*x509.Certificate
	if sec != nil {
		ca, err = pki.ParseCA(sec.Data[CACertKey], sec.Data[CAKeyKey])
		if err != nil {
			m.cfg.Log.Error("CA secret unusable, creating a new CA", "secret", CASecretName, "error", err)
		}
		if certs, err := pki.ParseCertificates(sec.Data[CACertKey]); err == nil {
			trusted = certs
		}
	}
	rotated := false
	if ca == nil || pki.NeedsRenewal(ca.CertPEM(), now) {
		next, err := pki.NewCA(now, m.cfg.CAValidity)
		if err != nil {
			return nil, err
		}
		if ca != nil {
			m.cfg.Log.Info("rotating the CA", "old", ca.Certificate().Subject.CommonName,
				"old_not_after", ca.Certificate().NotAfter, "new", next.Certificate().Subject.CommonName)
		} else {
			m.cfg.Log.Info("created the CA", "ca", next.Certificate().Subject.CommonName)
		}
		ca, rotated = next, true
	}
	bundle := []*x509.Certificate{ca.Certificate()}
	for _, c := range trusted {
		if c.IsCA && now.Before(c.NotAfter) && !slices.ContainsFunc(bundle, func(b *x509.Certificate) bool { return b.Equal(c) }) {
			bundle = append(bundle, c)
		}
	}
	st := &caState{ca: ca, certs: bundle, bundle: pki.EncodeCertificates(bundle), pool: x509.NewCertPool()}
	for _, c := range bundle {
		st.pool.AddCert(c)
	}
	if sec != nil && !rotated && bytes.Equal(sec.Data[CACertKey], st.bundle) && bytes.Equal(sec.Data[CAKeyKey], ca.KeyPEM()) {
		return st, nil
	}
	ac := corev1ac.Secret(CASecretName, m.cfg.Namespace).
		WithLabels(map[string]string{proxyspec.LabelManagedBy: proxyspec.ManagedByValue}).
		WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{CACertKey: st.bundle, CAKeyKey: ca.KeyPEM()})
	if sec != nil {
		// Lose a race with another writer rather than overwrite its CA.
		ac.WithResourceVersion(sec.ResourceVersion)
	}
	if err := m.apply(ctx, ac); err != nil {
		return nil, err
	}
	return st, nil
}

// ensureServing keeps the serving certificate Secret current and returns
// its certificate.
func (m *Manager) ensureServing(ctx context.Context, now time.Time, st *caState) (*x509.Certificate, error) {
	sec, err := m.get(ctx, m.cfg.Namespace, ServingSecretName)
	if err != nil {
		return nil, err
	}
	leaf := validLeaf(sec, st.pool, x509.ExtKeyUsageServerAuth, now)
	if leaf != nil && !m.serverSANsMatch(leaf) {
		leaf = nil
	}
	labels := map[string]string{proxyspec.LabelManagedBy: proxyspec.ManagedByValue}
	if leaf != nil && current(sec, st.bundle, labels, nil) {
		return leaf, nil
	}
	certPEM, keyPEM := []byte(nil), []byte(nil)
	if leaf != nil {
		certPEM, keyPEM = sec.Data[CertKey], sec.Data[KeyKey] // only ca.crt or metadata changed
	} else {
		certPEM, keyPEM, err = st.ca.IssueServer(m.cfg.DNSNames, m.cfg.IPs, now, m.cfg.ServerValidity)
		if err != nil {
			return nil, err
		}
		if leaf, err = firstCert(certPEM); err != nil {
			return nil, err
		}
		m.cfg.Log.Info("issued the xDS serving certificate", "dns_names", m.cfg.DNSNames,
			"not_after", leaf.NotAfter)
	}
	ac := corev1ac.Secret(ServingSecretName, m.cfg.Namespace).
		WithLabels(labels).
		WithType(corev1.SecretTypeTLS).
		WithData(map[string][]byte{CertKey: certPEM, KeyKey: keyPEM, CACertKey: st.bundle})
	if err := m.apply(ctx, ac); err != nil {
		return nil, err
	}
	return leaf, nil
}

// ensureClient keeps the client certificate Secret of Gateway id (sec, nil
// if absent) current, with the given owner references, and returns its
// certificate. A certificate that names another identity (another UID: the
// Gateway was re-created) is replaced at once.
func (m *Manager) ensureClient(ctx context.Context, now time.Time, st *caState, id pki.Identity,
	sec *corev1.Secret, owners []*metav1ac.OwnerReferenceApplyConfiguration) (*x509.Certificate, error) {
	ns, gw := id.Namespace, id.Name
	leaf := validLeaf(sec, st.pool, x509.ExtKeyUsageClientAuth, now)
	if leaf != nil {
		if have, ok := pki.IdentityFromCert(leaf); !ok || have != id {
			leaf = nil
		}
	}
	labels := proxyspec.Labels(ns, gw)
	if leaf != nil && current(sec, st.bundle, labels, owners) {
		return leaf, nil
	}
	var certPEM, keyPEM []byte
	var err error
	if leaf != nil {
		certPEM, keyPEM = sec.Data[CertKey], sec.Data[KeyKey]
	} else {
		certPEM, keyPEM, err = st.ca.IssueClient(id, now, m.cfg.ClientValidity)
		if err != nil {
			return nil, err
		}
		if leaf, err = firstCert(certPEM); err != nil {
			return nil, err
		}
		m.cfg.Log.Info("issued an xDS client certificate", "gateway", id.Gateway(), "uid", id.UID,
			"not_after", leaf.NotAfter)
	}
	ac := corev1ac.Secret(proxyspec.ClientCertSecretName(gw), ns).
		WithLabels(labels).
		WithOwnerReferences(owners...).
		WithType(corev1.SecretTypeTLS).
		WithData(map[string][]byte{CertKey: certPEM, KeyKey: keyPEM, CACertKey: st.bundle})
	if err := m.apply(ctx, ac); err != nil {
		return nil, err
	}
	return leaf, nil
}

// validLeaf returns the certificate of a tls.crt/tls.key Secret if it
// matches its key, verifies against pool for usage at now, and is not due
// for renewal; nil otherwise.
func validLeaf(sec *corev1.Secret, pool *x509.CertPool, usage x509.ExtKeyUsage, now time.Time) *x509.Certificate {
	if sec == nil {
		return nil
	}
	certPEM, keyPEM := sec.Data[CertKey], sec.Data[KeyKey]
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil
	}
	leaf, err := firstCert(certPEM)
	if err != nil || pki.NeedsRenewal(certPEM, now) {
		return nil
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return nil
	}
	return leaf
}

// current reports whether sec already has the bundle, type, labels and
// Gateway owners (nil: any) a write would give it.
func current(sec *corev1.Secret, bundle []byte, labels map[string]string,
	owners []*metav1ac.OwnerReferenceApplyConfiguration) bool {
	if !bytes.Equal(sec.Data[CACertKey], bundle) || sec.Type != corev1.SecretTypeTLS {
		return false
	}
	for k, v := range labels {
		if sec.Labels[k] != v {
			return false
		}
	}
	if owners == nil {
		return true
	}
	have := ownerRefs(sec.OwnerReferences)
	if len(have) != len(owners) {
		return false
	}
	for i, h := range have {
		w := owners[i]
		if *h.UID != *w.UID || *h.Name != *w.Name || *h.Kind != *w.Kind || *h.APIVersion != *w.APIVersion ||
			!equalPtr(h.Controller, w.Controller) {
			return false
		}
	}
	return true
}

func (m *Manager) serverSANsMatch(c *x509.Certificate) bool {
	if !sameSet(c.DNSNames, m.cfg.DNSNames) {
		return false
	}
	var have, want []string
	for _, ip := range c.IPAddresses {
		have = append(have, ip.String())
	}
	for _, ip := range m.cfg.IPs {
		want = append(want, ip.String())
	}
	return sameSet(have, want)
}

// get returns the Secret ns/name, or nil if it does not exist.
func (m *Manager) get(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	var sec corev1.Secret
	err := m.cfg.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &sec)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("pki: get secret %s/%s: %w", ns, name, err)
	}
	return &sec, nil
}

func (m *Manager) apply(ctx context.Context, ac *corev1ac.SecretApplyConfiguration) error {
	if err := m.cfg.Client.Apply(ctx, ac, client.FieldOwner(proxyspec.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("pki: apply secret %s/%s: %w", *ac.Namespace, *ac.Name, err)
	}
	m.cfg.Log.Debug("secret applied", "secret", *ac.Namespace+"/"+*ac.Name)
	return nil
}

// ownerRefs converts owner references to apply configurations, keeping only
// those of Gateways (the ones this package sets).
func ownerRefs(refs []metav1.OwnerReference) []*metav1ac.OwnerReferenceApplyConfiguration {
	out := []*metav1ac.OwnerReferenceApplyConfiguration{}
	for _, r := range refs {
		if r.Kind != "Gateway" || !strings.HasPrefix(r.APIVersion, gwv1.GroupName+"/") {
			continue
		}
		o := metav1ac.OwnerReference().WithAPIVersion(r.APIVersion).WithKind(r.Kind).WithName(r.Name).WithUID(r.UID)
		if r.Controller != nil {
			o.WithController(*r.Controller)
		}
		if r.BlockOwnerDeletion != nil {
			o.WithBlockOwnerDeletion(*r.BlockOwnerDeletion)
		}
		out = append(out, o)
	}
	return out
}

func firstCert(certPEM []byte) (*x509.Certificate, error) {
	certs, err := pki.ParseCertificates(certPEM)
	if err != nil {
		return nil, err
	}
	return certs[0], nil
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

func dedupe(s []string) []string {
	var out []string
	for _, v := range s {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
