// Package pki is Portico's small certificate authority for xDS mTLS.
//
// It is the certificates alone: making a CA, issuing the xDS serving
// certificate and the proxies' client certificates, parsing and encoding
// them, when they are due for renewal, and the identity a client
// certificate names, which the xDS server (internal/xds/server) verifies.
// It reads and writes nothing: where the certificates are kept — the CA
// in the Secret portico-ca of the controller namespace, the serving
// certificate in portico-xds-tls, one client certificate Secret per
// Gateway, applied by the leader and watched by every replica — is
// internal/pki/certstore, which talks to the API server. So the xDS
// server, which `portico standalone` runs too, verifies identities
// without depending on the Kubernetes client libraries; a test in
// internal/layers keeps this package free of them.
//
// A client certificate's identity is its only Portico URI SAN,
//
//	spiffe://portico.dev/ns/<namespace>/gateway/<name>/uid/<uid>
//
// naming the Gateway and the UID of the Gateway object it was issued for:
// a Gateway deleted and re-created under the same name has a new UID, so
// the certificates of the old one stop naming it (the xDS server compares
// the UID with the current Gateway's). The "/uid/<uid>" part is optional
// in the format, for certificates made by hand for `portico standalone`,
// which has no Gateway UIDs; the controller's xDS server refuses
// certificates without it. Client certificates are short-lived (one day by
// default) and renewed by the leader two thirds into their lifetime.
//
// Keys are ECDSA P-256. Certificates start slightly in the past to tolerate
// clock skew, have random serial numbers, and never outlive their issuer.
package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"strings"
	"time"
)

// Identity URIs: spiffe://portico.dev/ns/<namespace>/gateway/<name>[/uid/<uid>].
const (
	uriScheme = "spiffe"
	uriHost   = "portico.dev"
)

// ServiceName is the name of the xDS Service in the controller namespace.
const ServiceName = "portico-xds"

// ServerDNSNames are the DNS names of the xDS Service in namespace ns, all
// of which the serving certificate carries.
func ServerDNSNames(ns string) []string {
	return []string{
		ServiceName,
		ServiceName + "." + ns,
		ServiceName + "." + ns + ".svc",
		ServiceName + "." + ns + ".svc.cluster.local",
	}
}

// Backdate is how far before "now" a certificate's validity starts, so that
// peers whose clocks are a little behind accept it.
const Backdate = 5 * time.Minute

// PEM block types.
const (
	pemCertificate = "CERTIFICATE"
	pemPrivateKey  = "PRIVATE KEY" // PKCS #8
)

// CA is a certificate authority: its certificate and private key.
type CA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	keyPEM  []byte
}

// NewCA creates a self-signed CA valid from now (less Backdate) for
// validity.
func NewCA(now time.Time, validity time.Duration) (*CA, error) {
	if validity <= 0 {
		return nil, errors.New("pki: CA validity must be positive")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generate CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			Organization: []string{"portico"},
			// Distinguishes successive CAs in a bundle and in logs.
			CommonName: "portico-ca-" + now.UTC().Format("20060102T150405Z"),
		},
		NotBefore:             now.Add(-Backdate),
		NotAfter:              now.Add(validity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("pki: create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: parse CA certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, certPEM: encodeCert(der), keyPEM: keyPEM}, nil
}

// ParseCA loads a CA from PEM. certPEM may be a bundle (the ca.crt of a
// Secret during a CA rotation): the CA is the certificate whose public key
// matches keyPEM.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, err
	}
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		return nil, err
	}
	for _, c := range certs {
		pub, ok := c.PublicKey.(*ecdsa.PublicKey)
		if !ok || !pub.Equal(&key.PublicKey) {
			continue
		}
		if !c.IsCA || c.KeyUsage&x509.KeyUsageCertSign == 0 {
			return nil, errors.New("pki: the certificate of the CA key is not a CA certificate")
		}
		return &CA{cert: c, key: key, certPEM: encodeCert(c.Raw), keyPEM: bytes.Clone(keyPEM)}, nil
	}
	return nil, errors.New("pki: no certificate matches the CA key")
}

// Certificate returns the CA's certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// CertPEM returns the CA certificate, PEM-encoded.
func (ca *CA) CertPEM() []byte { return bytes.Clone(ca.certPEM) }

// KeyPEM returns the CA private key, PEM-encoded (PKCS #8).
func (ca *CA) KeyPEM() []byte { return bytes.Clone(ca.keyPEM) }

// IssueClient issues the xDS client certificate of the Gateway id names:
// client authentication only, id.URI() as its only URI SAN.
func (ca *CA) IssueClient(id Identity, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if !id.valid() {
		return nil, nil, fmt.Errorf("pki: invalid gateway identity %q/%q uid %q", id.Namespace, id.Name, id.UID)
	}
	u, err := url.Parse(id.URI())
	if err != nil {
		return nil, nil, fmt.Errorf("pki: gateway URI: %w", err)
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{Organization: []string{"portico"}, CommonName: id.Gateway()},
		URIs:        []*url.URL{u},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return ca.issue(tmpl, now, validity)
}

// IssueServer issues a serving certificate for dnsNames and ips: server
// authentication only.
func (ca *CA) IssueServer(dnsNames []string, ips []net.IP, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if len(dnsNames) == 0 && len(ips) == 0 {
		return nil, nil, errors.New("pki: a server certificate needs a DNS name or an IP address")
	}
	cn := ""
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	} else {
		cn = ips[0].String()
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{Organization: []string{"portico"}, CommonName: cn},
		DNSNames:    append([]string(nil), dnsNames...),
		IPAddresses: append([]net.IP(nil), ips...),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	return ca.issue(tmpl, now, validity)
}

// issue fills in the common fields of tmpl, signs it with a new key and
// returns both PEM-encoded. The certificate never outlives the CA.
func (ca *CA) issue(tmpl *x509.Certificate, now time.Time, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if validity <= 0 {
		return nil, nil, errors.New("pki: certificate validity must be positive")
	}
	if !now.Before(ca.cert.NotAfter) {
		return nil, nil, fmt.Errorf("pki: CA %q expired at %s", ca.cert.Subject.CommonName, ca.cert.NotAfter)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: generate key: %w", err)
	}
	tmpl.SerialNumber, err = randomSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl.NotBefore = now.Add(-Backdate)
	if tmpl.NotBefore.Before(ca.cert.NotBefore) {
		tmpl.NotBefore = ca.cert.NotBefore
	}
	tmpl.NotAfter = now.Add(validity)
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: create certificate: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(der), keyPEM, nil
}

// NeedsRenewal reports whether the first certificate of certPEM should be
// replaced at now: it is missing or unparseable, not yet valid, or past two
// thirds of its lifetime.
func NeedsRenewal(certPEM []byte, now time.Time) bool {
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		return true
	}
	return RenewalTime(certs[0]).Compare(now) <= 0 || now.Before(certs[0].NotBefore)
}

// RenewalTime is when c should be replaced: two thirds into its lifetime.
func RenewalTime(c *x509.Certificate) time.Time {
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotBefore.Add(life / 3 * 2)
}

// Identity is the Gateway a client certificate was issued for.
type Identity struct {
	Namespace, Name string
	// UID is the UID of the Gateway object; empty in certificates made
	// for `portico standalone`.
	UID string
}

// Gateway is "<namespace>/<name>", the node.cluster of the Gateway's
// proxies.
func (id Identity) Gateway() string { return id.Namespace + "/" + id.Name }

// URI is the identity as a URI SAN:
// spiffe://portico.dev/ns/<namespace>/gateway/<name>, followed by
// /uid/<uid> when UID is set.
func (id Identity) URI() string {
	u := uriScheme + "://" + uriHost + "/ns/" + id.Namespace + "/gateway/" + id.Name
	if id.UID != "" {
		u += "/uid/" + id.UID
	}
	return u
}

func (id Identity) valid() bool {
	return validName(id.Namespace) && validName(id.Name) && (id.UID == "" || validUID(id.UID))
}

// GatewayURI is Identity{ns, name, uid}.URI().
func GatewayURI(ns, name, uid string) string { return Identity{ns, name, uid}.URI() }

// IdentityFromCert returns the Gateway a client certificate identifies: the
// one named by its Portico URI SAN (host portico.dev). ok is false unless c
// carries exactly one Portico URI SAN and it is a well-formed identity.
func IdentityFromCert(c *x509.Certificate) (id Identity, ok bool) {
	if c == nil {
		return Identity{}, false
	}
	found := 0
	for _, u := range c.URIs {
		if u == nil || u.Scheme != uriScheme || u.Host != uriHost {
			continue
		}
		found++
		if id, ok = parseIdentity(u); !ok {
			return Identity{}, false
		}
	}
	if found != 1 {
		return Identity{}, false
	}
	return id, true
}

func parseIdentity(u *url.URL) (Identity, bool) {
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" ||
		u.Port() != "" || u.RawPath != "" {
		return Identity{}, false
	}
	// "", "ns", <ns>, "gateway", <name>[, "uid", <uid>]
	parts := strings.Split(u.Path, "/")
	if (len(parts) != 5 && len(parts) != 7) || parts[0] != "" || parts[1] != "ns" || parts[3] != "gateway" {
		return Identity{}, false
	}
	id := Identity{Namespace: parts[2], Name: parts[4]}
	if len(parts) == 7 {
		if parts[5] != "uid" || parts[6] == "" {
			return Identity{}, false
		}
		id.UID = parts[6]
	}
	if !id.valid() {
		return Identity{}, false
	}
	return id, true
}

// validUID accepts Kubernetes UIDs (UUIDs: lower-case hex digits and '-').
func validUID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'f', r >= '0' && r <= '9', r == '-':
		default:
			return false
		}
	}
	return true
}

// validName accepts Kubernetes object names (DNS subdomains: lower-case
// alphanumerics, '-' and '.'), which never need escaping in a URI path.
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
		default:
			return false
		}
	}
	return true
}

// ParseCertificates decodes every CERTIFICATE block of data; it fails if
// there is none or one does not parse.
func ParseCertificates(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != pemCertificate {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("pki: parse certificate: %w", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("pki: no certificate in PEM data")
	}
	return out, nil
}

// EncodeCertificates PEM-encodes certs, in order.
func EncodeCertificates(certs []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		buf.Write(encodeCert(c.Raw))
	}
	return buf.Bytes()
}

// Pool returns a certificate pool of the certificates in certPEM.
func Pool(certPEM []byte) (*x509.CertPool, error) {
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der})
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: der}), nil
}

func parseKey(keyPEM []byte) (*ecdsa.PrivateKey, error) {
	b, _ := pem.Decode(keyPEM)
	if b == nil {
		return nil, errors.New("pki: no PEM private key")
	}
	var key any
	var err error
	switch b.Type {
	case pemPrivateKey:
		key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(b.Bytes)
	default:
		return nil, fmt.Errorf("pki: unsupported private key block %q", b.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("pki: parse private key: %w", err)
	}
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("pki: private key is %T, want ECDSA", key)
	}
	return ec, nil
}

// randomSerial returns a random positive 127-bit serial number.
func randomSerial() (*big.Int, error) {
	limit := new(big.Int).Lsh(big.NewInt(1), 127)
	for {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return nil, fmt.Errorf("pki: serial number: %w", err)
		}
		if n.Sign() > 0 {
			return n, nil
		}
	}
}
